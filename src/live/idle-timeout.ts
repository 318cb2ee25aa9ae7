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
  const raw = env[IDLE_TIMEOUT_ENV]?.trim();
  if (raw === undefined || raw === '') return { idleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS };
  if (/^\d+$/.test(raw) && Number.isSafeInteger(Number(raw))) return { idleTimeoutMs: Number(raw) };
  return {
    idleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS,
    warning: {
      code: 'INVALID_ENV',
      message: `${IDLE_TIMEOUT_ENV}=${JSON.stringify(env[IDLE_TIMEOUT_ENV])} is not a whole number of milliseconds; using the default idle timeout of ${DEFAULT_IDLE_TIMEOUT_MS} ms. Set it to e.g. 600000, or 0 to disable the idle close.`,
    },
  };
}
