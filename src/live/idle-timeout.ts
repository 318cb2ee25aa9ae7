import { showValue } from '../errors.js';
import type { WarningEvent } from './types.js';

export const DEFAULT_IDLE_TIMEOUT_MS = 10 * 60_000;
export const IDLE_TIMEOUT_ENV = 'PROCWARDEN_LIVE_IDLE_TIMEOUT_MS';

/**
 * The idle timeout when no option sets it: the environment variable when it holds a whole number
 * of milliseconds (0 disables the idle close), else the default. An unusable value comes back as a
 * warning for the caller to report; an empty one counts as unset.
 */
export function idleTimeoutFromEnv(env: Record<string, string | undefined>): {
  idleTimeoutMs: number;
  warning?: WarningEvent;
} {
  // Only a string is an environment value: anything else (a number in an object passed as `env`)
  // is as unusable as a word, and reported the same way.
  const value: unknown = env[IDLE_TIMEOUT_ENV];
  const raw = typeof value === 'string' ? value.trim() : null;
  if (value === undefined || raw === '') return { idleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS };
  if (raw !== null && /^\d+$/.test(raw) && Number.isSafeInteger(Number(raw)))
    return { idleTimeoutMs: Number(raw) };
  return {
    idleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS,
    warning: {
      code: 'INVALID_ENV',
      message: `${IDLE_TIMEOUT_ENV}=${showValue(value)} is not a whole number of milliseconds; using the default idle timeout of ${DEFAULT_IDLE_TIMEOUT_MS} ms. Set it to e.g. 600000, or 0 to disable the idle close.`,
    },
  };
}
