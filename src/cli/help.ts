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
  --hold-leftovers     after a normal exit, wait for its background processes to end (a stop
                       signal or --hold-limit ends them), then exit with the command's status
  --hold-limit DUR     with --hold-leftovers: end them after DUR (0: no limit; --timeout
                       bounds the command alone, not what it left)
  --cwd DIR            run in DIR
  --env NAME=VALUE     set an environment variable (repeatable)
  --pty                run in a pseudo-terminal
  --oom-score-adj N|off
                       (Linux) start the command with procwarden's own oom_score_adj + N (at
                       most 1000), so that the OOM killer takes it before procwarden (default
                       500); off: the command keeps procwarden's score
  --json [FILE]        write the result as JSON (reason, exit status, output, which process got
                       which signal) to FILE, to stdout with '-', or to stderr without FILE
                       (then put -- before COMMAND, or write --json=FILE)
  --quiet              do not print the line that says why and how the run was stopped
  -h, --help           show this help

DUR is a number with an optional unit: ms, s (default), m, h, d, e.g. 500ms, 30s, 1.5m.
SIG is a name or number: TERM, SIGINT, 9.

When procwarden stops the command (or ends what it left behind), one line on stderr says so:
  procwarden: timed out after 30 s; SIGTERM to 3 processes; no SIGKILL needed; all gone in 12 ms

A signal sent to procwarden (INT, TERM, HUP, QUIT, ALRM, USR1, USR2, PIPE, XCPU, XFSZ, VTALRM,
PROF) stops the command the same graceful way, then procwarden exits 128+N. The terminal's own
signals (INT, QUIT, HUP) reach the tree as they are (a member that ignores one, as a script's
background jobs ignore INT, gets --signal instead); the others become --signal. A second signal
sends SIGKILL at once.

Exit status:
  124      a timeout (--timeout or --idle-timeout) stopped the command
  125      procwarden itself failed (its stdout could not be written: the output is lost),
           or the options are wrong
  126      COMMAND was found but cannot be executed
  127      COMMAND was not found
  128+N    COMMAND died of signal N (procwarden then dies of N too), or procwarden
           was stopped by signal N (INT, QUIT and HUP are passed on: then as COMMAND)
  other    COMMAND's own exit status

Examples:
  procwarden run --timeout 30s -- npm test
  procwarden run --idle-timeout 2m --grace 10s -- ./long-build.sh
  procwarden run --json result.json -- make
`;

export const TIMEOUT_HELP = `Usage: procwarden timeout [OPTION] DURATION COMMAND [ARG]...
  or:  procwarden timeout [OPTION]
  or:  timeout [OPTION] DURATION COMMAND [ARG]...   (through a link named timeout)
Start COMMAND; if it is still running after DURATION, signal it and its whole process tree.

A drop-in replacement for coreutils timeout(1) that also reaches the descendants that left
COMMAND's process group (setsid, a double fork).

Mandatory arguments to long options are mandatory for short options too.
  -p, --preserve-status
                 exit with COMMAND's own status, even when it timed out
  -f, --foreground
                 let COMMAND read from the TTY and get TTY signals; in this mode
                   only COMMAND itself is signalled, not its children
  -k, --kill-after=DURATION
                 also send SIGKILL if COMMAND is still running this long
                   after the first signal
  -s, --signal=SIGNAL
                 the signal to send on timeout (default TERM): a name like
                   HUP or a number; 0 sends nothing (then only -k acts)
  -v, --verbose  say on stderr which signal is sent, and when
      --help     display this help and exit
      --version  output version information and exit

DURATION is a floating point number with an optional suffix: s for seconds (the
default), m for minutes, h for hours, d for days; procwarden also accepts ms.
0 disables the timeout, and so does a value too large to count.

Upon timeout, the TERM signal (or SIGNAL) goes to COMMAND's whole tree. Without -k,
COMMAND gets as long as it needs to exit; once it has, what is left of its tree gets
SIGKILL after 5 s. What COMMAND leaves running after exiting on its own is not touched.
A signal sent to timeout itself (INT, TERM, HUP, QUIT, USR1...) is passed on to the
tree as it is, followed by SIGKILL after -k; a second one sends SIGKILL at once. The
timer still runs: when it fires, SIGNAL (or, after -k, SIGKILL) follows. SIGALRM counts
as the timer firing.

Exit status:
  124    if COMMAND times out (or timeout gets SIGALRM), and --preserve-status is not given
  125    if timeout itself fails (bad option, duration or signal)
  126    if COMMAND is found but cannot be invoked
  127    if COMMAND cannot be found
  137    if COMMAND had to be sent SIGKILL (128+9)
  128+N  if COMMAND died of signal N: timeout dies of it too (128+N in a shell;
         exits 128+N for USR1 and for signals that dump core)
  -      the exit status of COMMAND otherwise, also after a signal sent to
         timeout was passed on to it
`;

/** --version in coreutils' shape: name (package) version, then the licence. */
export function timeoutVersion(version: string): string {
  return `timeout (procwarden) ${version}
License MIT: <https://opensource.org/license/mit>.
This is free software: you are free to change and redistribute it.
There is NO WARRANTY, to the extent permitted by law.
`;
}

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
supervisor dies (crash, SIGKILL, deploy), its guard process ends its runs by itself
(PROCWARDEN_WATCHDOG=0 turns the guard off). For what that could not reach, reap finds the
records of dead supervisors and ends what is left of each run (members checked by identity, escaped members found
by their cookie, cgroup.kill for cgroup runs), then removes the records and empty cgroups.
Runs of supervisors that are alive are never touched, nor records written in another pid
namespace (a container's), which it cannot judge from here; a run another live reaper is ending
is left to it. A record is used only from a directory and
a file nobody else can write (no symlinks), and only on processes and cgroups it can prove are the
run's; anything else is reported and left alone.

Options:
  --dry-run          show what would be ended; signal nothing, remove nothing
  --json             print the report as JSON
  --grace DUR        time between the graceful signal and SIGKILL (default 5s)
  --state-dir DIR    the journal (default: $PROCWARDEN_STATE_DIR, $XDG_STATE_HOME/procwarden,
                     ~/.local/state/procwarden)
  -h, --help         show this help

Exit status: 0 nothing left behind; 1 members survived SIGKILL or a run's cgroup could not be
removed (their records are kept), a record could not be judged from this pid namespace, the
journal could not be read, or a directory, file or record was not trusted; 2 bad options.
`;
