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
 * `procwarden run`: 124 when a timeout stopped it, 126/127 when it could not start, 128+N when
 * procwarden was told to stop by signal N (or the command died of it), else the command's status.
 */
export function runStatus(result: RunResult, received: NodeJS.Signals | null): number {
  if (received) return bySignal(received);
  if (result.reason === 'spawn-error') return spawnErrorStatus(result.error?.code);
  if (result.timedOut) return EXIT_TIMED_OUT;
  return commandStatus(result);
}

/**
 * `procwarden timeout`, as timeout(1) documents it: 124 on timeout (its timer, or a SIGALRM sent to
 * it) unless --preserve-status; 137 when the command itself had to be SIGKILLed (so a caller can
 * tell it was forced); else 128+N when timeout was stopped by signal N. `timedOut` comes from the
 * caller, which runs the timer.
 */
export function timeoutStatus(
  result: RunResult,
  received: NodeJS.Signals | null,
  preserve: boolean,
  timedOut: boolean,
): number {
  if (result.reason === 'spawn-error') return spawnErrorStatus(result.error?.code);
  if (timedOut) return result.exitSignal !== 'SIGKILL' && !preserve ? EXIT_TIMED_OUT : commandStatus(result);
  if (received) return bySignal(received);
  return commandStatus(result);
}
