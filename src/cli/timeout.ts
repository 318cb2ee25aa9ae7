import { realClock, type TimerHandle } from '../clock.js';
import { isProcwardenError } from '../errors.js';
import { DEFAULT_GRACE_MS, normalizeSignal, parseDuration } from '../options/index.js';
import { Supervisor } from '../supervisor/index.js';
import { isGone, platformTable } from '../tree/index.js';
import type { RunHandle, RunResult } from '../types.js';
import { parseOptions, splitAtCommand, UsageError } from './args.js';
import { EXIT_FAILED, timeoutStatus } from './exit-status.js';
import { TIMEOUT_HELP } from './help.js';
import { onStopSignals } from './signals.js';
import { packageVersion } from './version.js';

const OPTIONS = {
  signal: { type: 'string', short: 's' },
  'kill-after': { type: 'string', short: 'k' },
  'preserve-status': { type: 'boolean' },
  foreground: { type: 'boolean' },
  verbose: { type: 'boolean', short: 'v' },
  help: { type: 'boolean' },
  version: { type: 'boolean' },
} as const;

// timeout(1) never sends SIGKILL unless -k says so: the command's own grace is unbounded.
const UNBOUNDED_MS = Number.MAX_SAFE_INTEGER;
const POLL_MS = 50;

const STRERROR: Record<string, string> = {
  ENOENT: 'No such file or directory',
  EACCES: 'Permission denied',
  ENOEXEC: 'Exec format error',
  EISDIR: 'Is a directory',
};

/** timeout(1)'s DURATION; 'inf' (which strtod accepts) means no limit, like 0. */
function duration(text: string): number {
  if (/^\s*inf(inity)?\s*$/i.test(text)) return 0;
  try {
    return parseDuration(text);
  } catch {
    throw new UsageError(`invalid time interval '${text}'`, EXIT_FAILED);
  }
}

function signal(text: string): NodeJS.Signals {
  try {
    return normalizeSignal(text);
  } catch {
    throw new UsageError(`'${text}': invalid signal`, EXIT_FAILED);
  }
}

const shortName = (sig: string) => sig.replace(/^SIG/, '');

export async function timeoutCommand(args: string[], prog: string): Promise<number> {
  const { ours, rest } = splitAtCommand(args, OPTIONS);
  const { values } = parseOptions(ours, OPTIONS, EXIT_FAILED);
  if (values.help) {
    process.stdout.write(TIMEOUT_HELP);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`timeout (procwarden) ${packageVersion()}\n`);
    return 0;
  }
  const [durationText, ...argv] = rest;
  if (durationText === undefined) throw new UsageError('missing operand', EXIT_FAILED);
  const timeoutMs = duration(durationText);
  if (argv.length === 0) throw new UsageError(`missing operand after '${durationText}'`, EXIT_FAILED);
  const killSignal = signal(values.signal ?? 'TERM');
  const killAfterMs = values['kill-after'] === undefined ? 0 : duration(values['kill-after']);
  const foreground = values.foreground === true;
  const said = new Set<string>();
  const say = (sig: string) => {
    if (values.verbose && !said.has(sig)) {
      said.add(sig);
      process.stderr.write(`${prog}: sending signal ${shortName(sig)} to command '${argv[0]}'\n`);
    }
  };

  let handle: RunHandle;
  try {
    handle = new Supervisor().spawn({
      argv,
      stdin: 'inherit',
      // The command gets our own stdout and stderr, TTY included, exactly as under timeout(1).
      output: { inherit: true },
      killSignal,
      // --foreground keeps timeout(1)'s meaning: only the command itself is signalled (below).
      containment: foreground ? 'none' : 'auto',
      timeoutMs: foreground ? 0 : timeoutMs,
      graceMs: killAfterMs > 0 ? killAfterMs : UNBOUNDED_MS,
      // Like timeout(1), what the command leaves running after exiting on its own is not ours.
      leftovers: 'keep',
    });
  } catch (error) {
    if (isProcwardenError(error)) throw new UsageError(error.message, EXIT_FAILED, false);
    throw error;
  }

  const timers: TimerHandle[] = [];
  const later = (ms: number, fn: () => void) => {
    if (ms > 0) timers.push(realClock.setTimeout(fn, ms));
  };
  const running = () => handle.state !== 'exited';
  const signalCommand = (sig: NodeJS.Signals) => {
    // The direct child is not reaped before its exit event, so its pid cannot have been reused.
    if (running() && handle.pid !== undefined) process.kill(handle.pid, sig);
  };

  let foregroundTimedOut = false;
  if (foreground) {
    later(timeoutMs, () => {
      if (!running()) return;
      foregroundTimedOut = true;
      say(killSignal);
      signalCommand(killSignal);
      later(killAfterMs, () => {
        say('SIGKILL');
        signalCommand('SIGKILL');
      });
    });
  } else {
    // The run's own timer fires first (it was armed first); these only narrate and bound the wait.
    later(timeoutMs, () => {
      if (handle.state !== 'stopping') return;
      say(killSignal);
      if (killAfterMs > 0) {
        later(killAfterMs, () => {
          if (handle.state === 'stopping') say('SIGKILL');
        });
      } else {
        void killRestOnceCommandExits(handle, timers);
      }
    });
  }

  let received: NodeJS.Signals | null = null;
  const uninstall = onStopSignals((sig, count) => {
    received ??= sig;
    if (count === 1) handle.cancel(sig);
    else handle.kill();
  });
  const result: RunResult = await handle.result;
  uninstall();
  for (const t of timers) realClock.clearTimeout(t);
  // A busy machine can run the narrating timers after the run already ended: say it now then.
  if (!foreground && result.timedOut) say(killSignal);
  if (!foreground && result.timedOut && result.escalated) say('SIGKILL');

  if (result.reason === 'spawn-error') {
    const code = result.error?.code ?? '';
    process.stderr.write(
      `${prog}: failed to run command '${argv[0]}': ${STRERROR[code] ?? result.error?.message}\n`,
    );
  }
  const timedOut = foreground ? foregroundTimedOut : result.timedOut;
  return timeoutStatus(result, received, values['preserve-status'] === true, timedOut);
}

/**
 * Without -k the command may take as long as it likes; but once it has exited, a descendant that
 * ignores the signal must not keep us waiting forever (timeout(1) would have returned): it gets
 * the default grace, then SIGKILL.
 */
async function killRestOnceCommandExits(handle: RunHandle, timers: TimerHandle[]): Promise<void> {
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
      timers.push(realClock.setTimeout(() => handle.kill(), DEFAULT_GRACE_MS));
      return;
    }
    timers.push(realClock.setTimeout(poll, POLL_MS));
  };
  await poll();
}
