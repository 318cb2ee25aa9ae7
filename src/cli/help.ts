/** Help texts, written for someone who has never seen procwarden. */

export const MAIN_HELP = `procwarden - run commands so that everything they start ends with them

Usage: procwarden COMMAND [OPTIONS]

Commands:
  run      run a command; when it ends (exit, timeout, Ctrl-C), end its whole process tree
  timeout  drop-in for timeout(1) that also ends the command's descendants, escaped ones included
  kill     end a running process and all its descendants: SIGTERM, a grace, then SIGKILL
  tree     show the process tree, with groups, sessions and procwarden runs marked
  proof    prove the guarantees live on this machine (five real cases); exit 0 when all hold
  reap     after a crash: end what is left of the runs of supervisors that died

Options:
  -h, --help     show this help (or: procwarden COMMAND --help)
  -V, --version  print the version

Examples:
  procwarden run --timeout 30s -- npm test
  procwarden timeout -k 5s 10m make check
  procwarden kill 4242
  npx procwarden proof
`;

export const RUN_HELP = `Usage: procwarden run [OPTIONS] [--] COMMAND [ARG...]

Runs COMMAND (no shell) with its output passed through live. When it ends, for any reason, its
whole process tree ends too: SIGTERM to every process at once, a grace period, then SIGKILL for
whatever is still alive. Descendants that escaped with setsid or a double fork are found too.

Options:
  --timeout DUR        stop the command after DUR (default: no limit)
  --idle-timeout DUR   stop it after DUR without a byte of output
  --grace DUR          time between the graceful signal and SIGKILL (default 5s)
  --signal SIG         the graceful signal (default SIGTERM)
  --containment MODE   how the tree is held: auto (default), process-group, cgroup, or none
                       (the command stays in procwarden's own process group)
  --keep-leftovers     after a normal exit, leave the command's background processes running
  --cwd DIR            run in DIR
  --env NAME=VALUE     set an environment variable (repeatable)
  --pty                run in a pseudo-terminal
  --json [FILE]        write the result as JSON (reason, exit status, output, which process got
                       which signal) to FILE, to stdout with '-', or to stderr without FILE
                       (then put -- before COMMAND, or write --json=FILE)
  --quiet              do not print the line that says why and how the run was stopped
  -h, --help           show this help

DUR is a number with an optional unit: ms, s (default), m, h, d, e.g. 500ms, 30s, 1.5m.
SIG is a name or number: TERM, SIGINT, 9.

When procwarden stops the command (or ends what it left behind), one line on stderr says so:
  procwarden: timed out after 30 s; SIGTERM to 3 processes; no SIGKILL needed; all gone in 12 ms

Ctrl-C (SIGINT), SIGTERM or SIGHUP sent to procwarden stop the command the same graceful way;
a second one sends SIGKILL at once.

Exit status:
  124      a timeout (--timeout or --idle-timeout) stopped the command
  125      procwarden itself failed, or the options are wrong
  126      COMMAND was found but cannot be executed
  127      COMMAND was not found
  128+N    COMMAND died of signal N, or procwarden was stopped by signal N
  other    COMMAND's own exit status

Examples:
  procwarden run --timeout 30s -- npm test
  procwarden run --idle-timeout 2m --grace 10s -- ./long-build.sh
  procwarden run --json result.json -- make
`;

export const TIMEOUT_HELP = `Usage: procwarden timeout [OPTION] DURATION COMMAND [ARG]...
  or:  timeout [OPTION] DURATION COMMAND [ARG]...   (through a link named timeout)

A drop-in replacement for coreutils timeout(1): start COMMAND, and signal it if it is still
running after DURATION. The difference: the signal reaches COMMAND's whole process tree,
including descendants that left its process group with setsid or a double fork.

Options:
      --preserve-status  exit with the same status as COMMAND, even when it times out
      --foreground       let COMMAND read from the TTY and get TTY signals; in this mode
                         only COMMAND itself is signalled, not its children (as in timeout(1))
  -k, --kill-after=DURATION
                         also send SIGKILL if COMMAND is still running this long after the
                         first signal
  -s, --signal=SIGNAL    the signal to send on timeout (default TERM); a name like HUP or a number
  -v, --verbose          say on stderr when a signal is sent
      --help             show this help
      --version          print the version

DURATION is a floating point number with an optional suffix: s (seconds, the default), m
(minutes), h (hours) or d (days); procwarden also accepts ms. 0 disables the timeout.

Without -k, COMMAND gets as long as it needs to exit after the signal (as in timeout(1)); once
it has exited, what is left of its tree gets SIGKILL after 5 s. Processes COMMAND leaves behind
after exiting on its own are not touched (as in timeout(1)); use procwarden run for that.
SIGINT, SIGTERM or SIGHUP sent to timeout itself end COMMAND's tree the same way (the -s signal,
SIGKILL after -k), then timeout exits 128+N.

Exit status:
  124  COMMAND timed out, and --preserve-status was not given
  125  timeout itself failed (bad option, duration or signal)
  126  COMMAND was found but cannot be executed
  127  COMMAND was not found
  137  COMMAND had to be sent SIGKILL (128+9)
  -    COMMAND's exit status otherwise (128+N when it died of signal N)
`;

export const KILL_HELP = `Usage: procwarden kill [OPTIONS] PID...

Ends each PID and all of its descendants: the graceful signal to every process of the tree at
once, a grace period, then SIGKILL for the survivors only. Prints who got which signal and who
needed SIGKILL. Never signals PID 1, procwarden itself or its ancestors, and re-checks each
process's identity before signalling it, so a recycled pid is never hit.

Options:
  --grace DUR    time between the graceful signal and SIGKILL (default 5s)
  --signal SIG   the graceful signal (default SIGTERM)
  --json         print the termination reports as JSON on stdout
  -h, --help     show this help

Exit status: 0 every tree ended; 1 a PID could not be ended (no such process, refused, or a
process survived SIGKILL); 2 bad options.
`;

export const TREE_HELP = `Usage: procwarden tree [PID]

Shows the process tree of the whole machine, or of PID and its descendants: pid, process group,
session, state, age and command. The LD column marks group leaders (G) and session leaders (S);
processes of a procwarden run carry run=ID (the PROCWARDEN_RUN cookie in their environment).
With PID, members of the same runs that escaped the tree (setsid, double fork) are listed after.

Options:
  -h, --help   show this help
`;

export const PROOF_HELP = `Usage: procwarden proof [--json]

Runs five real cases on this machine and checks that procwarden's guarantees hold:
  cleanup     a command that traps SIGTERM finishes its cleanup; no SIGKILL is needed
  fallback    a command that ignores SIGTERM gets SIGKILL when the grace ends
  descendant  a parent that exits on SIGTERM: its child gets SIGTERM too and is gone
  escaped     a descendant that escaped with setsid and a double fork still gets SIGTERM
  no-detach   a run that stays in its caller's process group ends without harming that group
Every process a case starts must be gone when it ends. Exit 0 when every case holds, 1 otherwise.

Options:
  --json       print the proof of each case as JSON on stdout (the summary goes to stderr)
  -h, --help   show this help
`;

export const REAP_HELP = `Usage: procwarden reap [OPTIONS]

Every run a Supervisor starts is recorded in its journal until the run's tree is gone. When the
supervisor dies (crash, SIGKILL, deploy), its watchdog process ends its runs by itself
(PROCWARDEN_WATCHDOG=0 turns the watchdog off). For what that could not reach, reap finds the
records of dead supervisors and ends what is left of each run (members checked by identity, escaped members found
by their cookie, cgroup.kill for cgroup runs), then removes the records and empty cgroups.
Runs of supervisors that are alive are never touched.

Options:
  --dry-run          show what would be ended; signal nothing, remove nothing
  --json             print the report as JSON
  --grace DUR        time between the graceful signal and SIGKILL (default 5s)
  --state-dir DIR    the journal (default: $PROCWARDEN_STATE_DIR, $XDG_STATE_HOME/procwarden,
                     ~/.local/state/procwarden)
  -h, --help         show this help

Exit status: 0 nothing left behind; 1 members survived SIGKILL (their records are kept); 2 bad options.
`;
