#!/bin/sh
# Runs GNU coreutils' own timeout tests (tests/timeout/*.sh and *.pl of a coreutils checkout)
# against the built `procwarden timeout`, one PASS/FAIL/SKIP/ERROR line per script.
#
#   git clone https://github.com/coreutils/coreutils ../coreutils
#   npm run build && sh scripts/coreutils-timeout-tests.sh ../coreutils
#
# The tests stay in the checkout: they are GPL and are not copied into this repository. They
# source gnulib's tests/init.sh, which a clone lacks until coreutils' bootstrap fetches gnulib, so
# scripts/coreutils-timeout-init.sh (our own) stands in for it. TIMEOUT=/usr/bin/timeout runs
# them against another timeout instead (a control: GNU's own timeout should pass what the
# stand-in runs). KEEP=yes keeps each test's directory and the logs; VERBOSE=yes traces the scripts.
#
# SPDX-License-Identifier: MIT

set -u

checkout=${1:?usage: $0 COREUTILS_CHECKOUT}
checkout=$(cd "$checkout" && pwd) || exit 2
here=$(cd "$(dirname "$0")/.." && pwd)
target=${TIMEOUT:-$here/dist/cli/main.js}
test -d "$checkout/tests/timeout" || {
  echo "$0: $checkout/tests/timeout: not a coreutils checkout" >&2
  exit 2
}
test -x "$target" || {
  echo "$0: $target not found: build first (npm run build)" >&2
  exit 2
}

# The layout the scripts expect, relative to where they start: tests/init.sh, and ./src holding
# the timeout under test ("path_prepend_ ./src" puts it first on PATH). The link must be named
# `timeout`: that name is what makes procwarden's CLI the drop-in.
work=$(mktemp -d "${TMPDIR:-/tmp}/coreutils-timeout.XXXXXX") || exit 2
mkdir -p "$work/tests/timeout" "$work/src" "$work/logs"
cp "$here/scripts/coreutils-timeout-init.sh" "$work/tests/init.sh"
ln -s "$target" "$work/src/timeout"
if test "${KEEP:-no}" != yes; then
  trap 'rm -rf "$work"' 0
  trap 'exit 130' 2
  trap 'exit 143' 15
fi

# As coreutils' `make check` runs them: C locale (ASCII quotes in messages); one known shell for
# the scripts and the ones they write (`#!$SHELL`), whatever the caller's login shell: bash where
# there is one, since dash's kill takes no `--` and timeout-group.sh would only skip under it
# (`kill -0 -- -1`); fd 9 is the tests' stderr.
LC_ALL=C
SHELL=$(command -v bash || echo /bin/sh)
srcdir=$work
built_programs=timeout
export LC_ALL SHELL srcdir built_programs

failed=0
for t in "$checkout"/tests/timeout/*.sh "$checkout"/tests/timeout/*.pl; do
  test -f "$t" || continue
  name=${t#"$checkout"/}
  log=$work/logs/$(basename "$t").log
  case $t in
  *.pl)
    command -v perl >/dev/null || {
      echo "SKIP: $name (no perl)"
      continue
    }
    # coreutils' Makefile: perl -w -I tests -MCuSkip -MCoreutils -M"CuTmpdir qw(NAME)" -- NAME,
    # from the top of the tree; Coreutils.pm and friends are the checkout's own.
    (cd "$work" && PATH=$work/src:$PATH exec perl -w -I"$checkout/tests" -MCuSkip -MCoreutils \
      -M"CuTmpdir qw(tests/timeout/$(basename "$t"))" -- "$t") >"$log" 2>&1 9>&2
    ;;
  *) (cd "$work" && PATH=$work/src:$PATH exec "$SHELL" "$t") >"$log" 2>&1 9>&2 ;;
  esac
  status=$?
  case $status in
  0) result=PASS ;;
  77) result=SKIP ;;
  99) result=ERROR ;;
  *) result=FAIL ;;
  esac
  echo "$result: $name"
  case $result in
  FAIL | ERROR)
    failed=1
    sed 's/^/    /' "$log"
    # A script that only sets fail=1 leaves no message: its trace says which line did.
    test "${VERBOSE:-no}" = yes || echo "    (VERBOSE=yes traces the script)"
    ;;
  SKIP) sed -n 's/^/    /; /skip/p' "$log" ;;
  esac
done
test "${KEEP:-no}" = yes && echo "logs: $work/logs"
exit "$failed"
