import { realClock, type TimerHandle } from '../clock.js';
import { isProcwardenError } from '../errors.js';
import { signalTree } from '../kill/index.js';
import { DEFAULT_GRACE_MS, killable } from '../options/index.js';
import { Supervisor } from '../supervisor/index.js';
import { isGone, platformTable } from '../tree/index.js';
import type { RunHandle, RunResult } from '../types.js';
import { type OptionToken, parseOptions, splitAtCommand, UsageError } from './args.js';
import { dieOfAtExit } from './die-of.js';
import type { EarlySignals } from './early-signals.js';
import { EXIT_FAILED, EXIT_NOT_FOUND } from './exit-codes.js';
import { timeoutStatus } from './exit-status.js';
import { onControllingTerminal } from './foreground.js';
import { printable } from './format.js';
import { TIMEOUT_HELP, timeoutVersion } from './help.js';
import { inheritedFds } from './inherited-fds.js';
import { keepRunningWhileTheJobReads } from './job-control.js';
import { onStopSignals } from './signals.js';
import { timeoutDurationMs } from './timeout-duration.js';
import { timeoutSignal as parseTimeoutSignal, type TimeoutSignal } from './timeout-signal.js';
import { packageVersion } from './version.js';
import { sayNow, writeNow } from './write-now.js';

const OPTIONS = {
  signal: { type: 'string', short: 's' },
  'kill-after': { type: 'string', short: 'k' },
  // -p and -f: POSIX.1-2024's timeout, which coreutils has taken up.
  'preserve-status': { type: 'boolean', short: 'p' },
  foreground: { type: 'boolean', short: 'f' },
  verbose: { type: 'boolean', short: 'v' },
  help: { type: 'boolean' },
  version: { type: 'boolean' },
} as const;

const UNBOUNDED_MS = Number.MAX_SAFE_INTEGER;
const POLL_MS = 50;

/** glibc's strerror() texts, which timeout(1) prints, for what an exec can fail with. */
const STRERROR: Record<string, string> = {
  ENOENT: 'No such file or directory',
  EACCES: 'Permission denied',
  ENOEXEC: 'Exec format error',
  EISDIR: 'Is a directory',
  ENOTDIR: 'Not a directory',
  ELOOP: 'Too many levels of symbolic links',
  ENAMETOOLONG: 'File name too long',
  E2BIG: 'Argument list too long',
  ETXTBSY: 'Text file busy',
  EPERM: 'Operation not permitted',
  ENOMEM: 'Cannot allocate memory',
  EAGAIN: 'Resource temporarily unavailable',
};

/** timeout(1)'s DURATION in ms; 0 means no limit, as do `inf` and a number too large for a double. */
function duration(text: string): number {
  const ms = timeoutDurationMs(text);
  if (ms === null) throw new UsageError(`invalid time interval '${text}'`, EXIT_FAILED);
  return Number.isFinite(ms) ? ms : 0;
}

function signal(text: string): TimeoutSignal {
  const sig = parseTimeoutSignal(text);
  if (sig === null) throw new UsageError(`'${text}': invalid signal`, EXIT_FAILED);
  return sig;
}

/** Of two names for one number, the one coreutils prints (its sig2str table comes first with it). */
const GNU_NAME: Record<string, string> = { IOT: 'ABRT', IO: 'POLL' };
/**
 * As coreutils names them in its -v lines. Signal 0 is `0`, as at coreutils HEAD (whose
 * tests/timeout/timeout.sh expects `sending signal 0`); 9.1's gnulib sig2str said `EXIT`.
 */
const shortName = (sig: TimeoutSignal) => {
  if (sig === 0) return '0';
  const name = sig.replace(/^SIG/, '');
  return GNU_NAME[name] ?? name;
};

/** Our options, then the operands and the command. */
function split(args: readonly string[]) {
  const { ours, rest } = splitAtCommand(args, OPTIONS, { prefixes: { status: EXIT_FAILED } });
  return { rest, ...parseOptions(ours, OPTIONS, EXIT_FAILED, true) };
}

/**
 * In the order given, each as it comes, as timeout(1)'s getopt loop reads them: the first bad one
 * is the one reported, and --help or --version ends the reading where it stands (`exit`).
 */
function readOptions(
  tokens: readonly OptionToken[],
): { exit: number } | { timeoutSignal: TimeoutSignal; killAfterMs: number } {
  let timeoutSignal: TimeoutSignal = 'SIGTERM';
  let killAfterMs = 0;
  for (const token of tokens) {
    if (token.kind !== 'option') continue;
    if (token.name === 'signal') timeoutSignal = signal(token.value ?? '');
    else if (token.name === 'kill-after') killAfterMs = duration(token.value ?? '');
    else if (token.name === 'help') {
      writeNow(1, TIMEOUT_HELP);
      return { exit: 0 };
    } else if (token.name === 'version') {
      writeNow(1, timeoutVersion(packageVersion()));
      return { exit: 0 };
    }
  }
  return { timeoutSignal, killAfterMs };
}

/**
 * A word getopt refuses (unknown, ambiguous, a value missing) is refused only where it stands:
 * the options before it are read first (`--help --bogus` is the help, `-s FOO --bogus` the bad
 * signal). Those are the longest run of words before it that parses.
 */
function readBefore(args: readonly string[], refused: UsageError): { exit: number } {
  for (let end = args.length - 1; end >= 0; end--) {
    let tokens: OptionToken[];
    try {
      tokens = split(args.slice(0, end)).tokens ?? [];
    } catch {
      continue;
    }
    const read = readOptions(tokens);
    if ('exit' in read) return read;
    break;
  }
  throw refused;
}

export async function timeoutCommand(args: string[], prog: string, early?: EarlySignals): Promise<number> {
  let parsed: ReturnType<typeof split>;
  try {
    parsed = split(args);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    return readBefore(args, error).exit;
  }
  const { values, tokens = [], rest } = parsed;
  const read = readOptions(tokens);
  if ('exit' in read) return read.exit;
  const { timeoutSignal, killAfterMs } = read;
  // Then the operands: too few is the hint alone (timeout(1) names nothing missing).
  const [durationText, command, ...commandArgs] = rest;
  if (durationText === undefined || command === undefined) throw new UsageError('', EXIT_FAILED);
  const argv: readonly [string, ...string[]] = [command, ...commandArgs];
  const timeoutMs = duration(durationText);
  const foreground = values.foreground === true;
  // timeout(1) tries to exec it, and says so as for any name that is not found.
  if (argv[0] === '') {
    sayNow(2, `${prog}: failed to run command '': No such file or directory\n`);
    return EXIT_NOT_FOUND;
  }
  // Our lines go out with write(2), never through process.stdout or process.stderr: building either
  // stream would make a piped descriptor non-blocking, and the command shares that open file (it
  // would get EAGAIN from a full pipe). A closed stderr loses the lines, never changes our status.
  const said = new Set<string>();
  /** `again`: said each time, as timeout(1) says each signal its timer sends. */
  const say = (sig: TimeoutSignal, again = false) => {
    const name = shortName(sig);
    if (values.verbose && (again || !said.has(name))) {
      said.add(name);
      sayNow(2, `${prog}: sending signal ${name} to command '${printable(argv[0])}'\n`);
    }
  };

  const supervisor = new Supervisor();
  // Assigned by the spawn below; every use is in a callback that runs after it.
  let handle!: RunHandle;
  const timers: TimerHandle[] = [];
  const later = (ms: number, fn: () => void) => {
    if (ms > 0) timers.push(realClock.setTimeout(fn, ms));
  };
  const running = () => handle.state !== 'exited';
  // Neither exited on its own nor stopped yet: a timer or signal now is what stops it.
  const untouched = () => supervisor.get(handle.id)?.reason === null;
  const signalCommand = (sig: NodeJS.Signals) => {
    // The direct child is not reaped before its exit event, so its pid cannot have been reused.
    if (running() && handle.pid !== undefined) process.kill(handle.pid, killable(sig));
  };
  const killNow = () => {
    if (!running()) return;
    say('SIGKILL');
    if (foreground) signalCommand('SIGKILL');
    else handle.kill();
  };

  // The first signal, from our timer or passed on from our caller: the tree gets it (--foreground:
  // the command only), then SIGKILL after -k; any later signal means SIGKILL now.
  let stopping = false;
  let timedOut = false;
  /** The command itself exited after we signalled it: what is left are its leftovers. */
  let commandGone = false;
  let received: NodeJS.Signals | null = null;
  /** A second signal made us SIGKILL the tree at once (the first one's, if a signal began it). */
  let forcedAfter: NodeJS.Signals | null = null;
  const begin = (sig: TimeoutSignal, why: string) => {
    stopping = true;
    say(sig);
    if (sig !== 0) {
      if (foreground) signalCommand(sig);
      // As timeout(1): the signal as it is, even to what ignores it (a nohup'ed command and SIGHUP).
      else handle.cancel(why, { signal: sig, ifIgnored: 'nothing' });
    }
    if (killAfterMs > 0) later(killAfterMs, killNow);
    if (!foreground && sig !== 0) {
      void watchCommandExit(handle, timers, () => {
        commandGone = true;
        // Without -k, a leftover that ignores the signal must not keep us waiting for ever.
        if (killAfterMs <= 0) timers.push(realClock.setTimeout(() => handle.kill(), DEFAULT_GRACE_MS));
      });
    }
  };
  const fire = () => {
    // The timer runs out while the tree ends: a timeout only while the command itself lives (it
    // died of the signal we passed on at 0.5 s: its leftovers' grace is no timeout of it).
    if (stopping) {
      timedOut ||= !commandGone;
      if (commandGone || !running()) return;
      // As timeout(1), whose timer still runs after a passed-on signal (a nohup'ed command ignored
      // the SIGHUP): the -s signal goes out too, or SIGKILL once -k has made that the next one.
      if (killAfterMs > 0) return killNow();
      say(timeoutSignal, true);
      if (timeoutSignal === 0) return;
      if (foreground) signalCommand(timeoutSignal);
      else handle.cancel(`timed out after ${durationText}`, { signal: timeoutSignal });
    } else if (untouched()) {
      timedOut = true;
      begin(timeoutSignal, `timed out after ${durationText}`);
    }
  };
  // Listening before the spawn: a signal sent as soon as the command runs (a loaded machine can
  // run it before this process gets the CPU back) must reach the tree, not kill us alone.
  // Our job is in the foreground again after a read from the background stopped the command: it
  // reads on (job-control.ts).
  const continueJob = () => {
    if (handle?.pid !== undefined && handle.state !== 'exited')
      signalTree(handle.pid, 'SIGCONT').catch(() => {});
  };
  const inheritGroup = !foreground && onControllingTerminal();
  // --foreground too keeps the command in our group: either way its background read stops it, not us.
  const unignore = foreground || inheritGroup ? keepRunningWhileTheJobReads(continueJob) : () => {};
  const signals = onStopSignals((sig) => {
    // timeout(1) runs its timer on SIGALRM: one sent from outside is the timer firing, whenever.
    if (sig === 'SIGALRM') return fire();
    if (stopping) {
      // Our SIGKILL is not what the caller should see the command die of: the signal it sent is.
      forcedAfter ??= received ?? sig;
      return killNow();
    }
    if (!untouched()) return;
    received = sig;
    begin(sig, `got ${sig}`);
  }, early);
  const uninstall = () => {
    signals.uninstall();
    unignore();
  };
  try {
    handle = supervisor.spawn({
      argv,
      stdin: 'inherit',
      // Descriptors beyond stdio our parent passed us (a make jobserver's pipe), as timeout(1) passes them.
      inheritFds: inheritedFds(),
      // The command gets our own stdout and stderr, TTY included, exactly as under timeout(1).
      output: { inherit: true },
      // --foreground keeps timeout(1)'s meaning: only the command itself is signalled (below).
      containment: foreground ? 'none' : 'auto',
      // On our controlling terminal the command is in our job (our process group), as timeout(1)
      // keeps it in its own: Ctrl-Z stops both, `fg`/`bg` continue both, and a command started with
      // `&` that reads is stopped by SIGTTIN, never taking the shell's input.
      inheritGroup,
      // Our own timer, not the run's: a SIGALRM sent to us fires it too, as in timeout(1).
      timeoutMs: 0,
      // timeout(1) never sends SIGKILL unless -k says so (below): the grace is unbounded.
      graceMs: UNBOUNDED_MS,
      // What the watchdog sends if we die first (coreutils' timeout sends -s when it dies too).
      ...(timeoutSignal !== 0 && { killSignal: timeoutSignal }),
      // Like timeout(1), what the command leaves running after exiting on its own is not ours.
      leftovers: 'keep',
      // The command keeps our OOM score, as under timeout(1), which changes nothing of it (and no
      // shell starts the command to change it: `timeout 10 true` pays for no extra exec).
      oomScoreAdj: false,
    });
  } catch (error) {
    uninstall();
    if (isProcwardenError(error)) throw new UsageError(error.message, EXIT_FAILED, false);
    throw error;
  }
  signals.replayEarly();

  later(timeoutMs, fire);

  const result: RunResult = await handle.result;
  uninstall();
  for (const t of timers) realClock.clearTimeout(t);

  if (result.reason === 'spawn-error') {
    const code = result.error?.code ?? '';
    // Its name as given, its escapes and newlines made '?' (coreutils quotes them as \033, \n).
    const name = printable(argv[0]);
    sayNow(
      2,
      `${prog}: failed to run command '${name}': ${printable(STRERROR[code] ?? result.error?.message ?? '')}\n`,
    );
  }
  // timeout(1) dies of the signal its command died of unless it timed out, also after passing on a
  // signal it was sent (bash then stops a loop on a Ctrl-C). A second signal made us SIGKILL the
  // command: we die of that signal, not of our SIGKILL. Where it cannot die of it: 128+N.
  if (!timedOut && result.reason !== 'spawn-error' && result.exitSignal) {
    dieOfAtExit(forcedAfter && result.exitSignal === 'SIGKILL' ? forcedAfter : result.exitSignal);
  }
  return timeoutStatus(result, forcedAfter, values['preserve-status'] === true, timedOut);
}

/**
 * Calls `gone` once the command itself has exited. Without -k the command may take as long as it
 * likes; but once it has exited, a descendant that ignores the signal must not keep us waiting
 * forever (timeout(1) would have returned): the caller gives it the default grace, then SIGKILL.
 */
async function watchCommandExit(handle: RunHandle, timers: TimerHandle[], gone: () => void): Promise<void> {
  const table = platformTable();
  const pid = handle.pid;
  if (pid === undefined) return;
  const first = await table.get(pid);
  const ended = () => handle.state === 'exited';
  const poll = async () => {
    if (ended()) return;
    const now = await table.get(pid);
    // The run may have ended during the read; a timer armed now would outlive it (its timers are cleared once).
    if (ended()) return;
    if (isGone(now) || now?.startTime !== first?.startTime) {
      gone();
      return;
    }
    timers.push(realClock.setTimeout(poll, POLL_MS));
  };
  await poll();
}
