import { signalNumber } from '../options/index.js';
import type { RunResult } from '../types.js';
import { EXIT_CANNOT_EXECUTE, EXIT_FAILED, EXIT_NOT_FOUND, EXIT_TIMED_OUT } from './exit-codes.js';

export const bySignal = (signal: string): number => 128 + signalNumber(signal);

/** Failures to make the process at all (fork, not exec): ours to report, as timeout(1) does (125). */
const CANNOT_FORK = ['EAGAIN', 'ENOMEM', 'EMFILE', 'ENFILE', 'SPAWN_FAILED'];

/**
 * As timeout(1) and a shell say it: 127 when the command was not found, 126 when it was found and
 * could not be executed (not a directory, a symlink loop, a name or argument list too long, a bad
 * format...), 125 when not even the process could be made.
 */
export function spawnErrorStatus(code: string | undefined): number {
  if (code === 'ENOENT') return EXIT_NOT_FOUND;
  if (code === undefined || CANNOT_FORK.includes(code)) return EXIT_FAILED;
  return EXIT_CANNOT_EXECUTE;
}

/** The command's own status: its exit code, or 128+N when it died of signal N. */
export function commandStatus(result: RunResult): number {
  if (result.exitSignal) return bySignal(result.exitSignal);
  return result.exitCode ?? EXIT_FAILED;
}

/**
 * The signal procwarden dies of itself (as timeout(1) re-raises its command's), so that the
 * caller's waitpid sees a death by it and a shell acts on it (bash stops a loop whose command died
 * of the SIGINT bash got too): the command's own, when it died of one and no timeout stopped it.
 * `passedOn` is the signal procwarden was sent and passed on to the command as it is; when the
 * command then died of anything (procwarden's SIGKILL after a second signal, its --signal to a
 * command that ignores SIGINT), procwarden dies of that one: the caller sees the signal it sent.
 */
export function deathSignal(result: RunResult, passedOn: NodeJS.Signals | null): NodeJS.Signals | null {
  if (result.reason === 'spawn-error' || result.timedOut || !result.exitSignal) return null;
  return passedOn ?? (result.exitSignal as NodeJS.Signals);
}

/**
 * `procwarden run`: 124 when a timeout stopped it, 126/127 when it could not start, 128+N when
 * procwarden was told to stop by signal N (not one it passed on as it is: a terminal's SIGINT,
 * SIGQUIT, SIGHUP; nor after a timeout began), else the command's status: its exit code, or 128+N
 * when it died of signal N (N being the passed-on signal, if any: see deathSignal).
 */
export function runStatus(
  result: RunResult,
  received: NodeJS.Signals | null,
  passedOn: NodeJS.Signals | null = null,
): number {
  if (received && (received !== passedOn || result.timedOut)) return bySignal(received);
  if (result.reason === 'spawn-error') return spawnErrorStatus(result.error?.code);
  if (result.timedOut) return EXIT_TIMED_OUT;
  const death = deathSignal(result, passedOn);
  return death ? bySignal(death) : commandStatus(result);
}

/**
 * `procwarden timeout`, as timeout(1) documents it: 124 on timeout (its timer, or a SIGALRM sent to
 * it) unless --preserve-status; 137 when the command itself had to be SIGKILLed (so a caller can
 * tell it was forced); else the command's status, also after a signal sent to timeout was passed
 * on (a command that handles SIGINT and exits 42: 42), as timeout(1) returns it. `forcedAfter`: a
 * second signal made procwarden SIGKILL the command (timeout(1) would have passed it on again):
 * that signal's 128+N. `timedOut` comes from the caller, which runs the timer.
 */
export function timeoutStatus(
  result: RunResult,
  forcedAfter: NodeJS.Signals | null,
  preserve: boolean,
  timedOut: boolean,
): number {
  if (result.reason === 'spawn-error') return spawnErrorStatus(result.error?.code);
  if (timedOut) return result.exitSignal !== 'SIGKILL' && !preserve ? EXIT_TIMED_OUT : commandStatus(result);
  if (forcedAfter && result.exitSignal === 'SIGKILL') return bySignal(forcedAfter);
  return commandStatus(result);
}
