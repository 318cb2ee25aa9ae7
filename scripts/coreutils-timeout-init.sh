# Stand-in for gnulib's tests/init.sh (plus the few coreutils tests/init.cfg helpers) that GNU
# coreutils' tests/timeout/*.sh source: scripts/coreutils-timeout-tests.sh puts it where they look,
# "$srcdir/tests/init.sh". A fresh clone of coreutils has no tests/init.sh (its bootstrap copies
# gnulib's in), and gnulib's is GPL, so this is our own, written to gnulib's documented meaning
# and implementing only what those scripts call.
#
# SPDX-License-Identifier: MIT (procwarden)

# The runner sets these; defaults let a script be run by hand (srcdir=DIR sh tests/timeout/x.sh).
: "${srcdir=.}"
ME_=$(basename "$0")
initial_cwd_=$PWD
fail=0

warn_() { printf '%s\n' "$*" >&2; }
Exit() {
  set +e
  (exit "$1")
  exit "$1"
}
skip_() {
  warn_ "$ME_: skipped test: $*"
  Exit 77
}
fail_() {
  warn_ "$ME_: failed test: $*"
  Exit 1
}
# 99 is automake's "hard error": the test could not be set up, which is not a verdict on timeout.
framework_failure_() {
  warn_ "$ME_: set-up failure: $*"
  Exit 99
}

# Scripts redefine it to end what they left in the background.
cleanup_() { :; }

# returns_ N CMD...: true iff CMD exits N. The mismatch goes to the log (gnulib's is silent) so a
# failure can be traced to its line; scripts that expect a mismatch (`returns_ 124 ... && fail=1`)
# print it too, so the log says "exit", not "fail".
returns_() {
  returns_want_=$1
  shift
  "$@"
  returns_got_=$?
  test "$returns_got_" -eq "$returns_want_" && return 0
  warn_ "returns_: exit $returns_got_, not $returns_want_: $*"
  return 1
}

# compare EXPECTED ACTUAL: silent and true iff equal; otherwise the diff, to the log.
compare() {
  if test "$1" = /dev/null || test "$2" = /dev/null; then
    test ! -s "$1" && test ! -s "$2" && return 0
    cat "$1" "$2" >&2
    return 1
  fi
  diff -u "$1" "$2" >&2
}

# Relative directories are taken from where the script started (coreutils: the build tree), not the
# temporary directory it runs in.
path_prepend_() {
  for path_dir_ in "$@"; do
    case $path_dir_ in
    /*) ;;
    *) path_dir_=$initial_cwd_/$path_dir_ ;;
    esac
    test -d "$path_dir_" || fail_ "path_prepend_: no directory $path_dir_"
    PATH=$path_dir_:$PATH
  done
  export PATH
}

# coreutils skips a test whose programs were not built; here: not found on PATH.
print_ver_() {
  for prog_ in "$@"; do
    command -v "$prog_" >/dev/null || skip_ "required program $prog_ not found"
    test "$VERBOSE" = yes && "$prog_" --version
  done
  :
}

require_trap_signame_() {
  (trap '' CHLD) || skip_ 'requires trap with signal name support'
}

require_kill_group_() {
  kill -0 -- -1 || skip_ 'requires kill with group signaling support'
}

# coreutils gets these from its own getlimits program; only the three the timeout tests use, for
# the 64-bit Linux this runs on (time_t and long are 64 bits, unsigned int 32, long double x87).
getlimits_() {
  test "$(getconf LONG_BIT)" = 64 || skip_ 'getlimits_ here knows only 64-bit limits'
  UINT_OFLOW=4294967296
  TIME_T_OFLOW=9223372036854775808
  LDBL_MAX=1.18973149535723176502e+4932
}

# retry_delay_ FUNC DELAY N: call FUNC DELAY, FUNC 2*DELAY, FUNC 4*DELAY... at most N times, until
# it succeeds; true iff it did.
retry_delay_() {
  retry_func_=$1
  retry_delay0_=$2
  retry_max_=$3
  retry_n_=1
  retry_mult_=1
  while test "$retry_n_" -le "$retry_max_"; do
    retry_d_=$(awk -v n="$retry_mult_" -v s="$retry_delay0_" 'BEGIN { print s * n }')
    "$retry_func_" "$retry_d_" && return 0
    retry_n_=$((retry_n_ + 1))
    retry_mult_=$((retry_mult_ * 2))
  done
  return 1
}

# Each script runs in a directory of its own, removed on exit (after cleanup_), keeping the status;
# a signal to the script is its 128+N, as under gnulib.
remove_tmp_() {
  remove_st_=$?
  cleanup_
  cd "$initial_cwd_" || cd /
  if test "$KEEP" = yes; then
    warn_ "$ME_: kept $test_dir_"
  else
    chmod -R u+rwx "$test_dir_" 2>/dev/null
    rm -rf "$test_dir_" || { test "$remove_st_" = 0 && remove_st_=1; }
  fi
  exit "$remove_st_"
}
test_dir_=$(mktemp -d "$initial_cwd_/gt-$ME_.XXXXXX") || framework_failure_ 'mktemp -d failed'
trap remove_tmp_ 0
for sig_ in 1 2 3 13 15; do
  # shellcheck disable=SC2064 # the number is meant to be fixed now
  trap "Exit $((sig_ + 128))" "$sig_"
done
cd "$test_dir_" || framework_failure_ "cannot cd to $test_dir_"
test "$VERBOSE" = yes && set -x
:
