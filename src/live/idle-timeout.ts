import { envDurationMs } from '../options/index.js';

export const DEFAULT_IDLE_TIMEOUT_MS = 10 * 60_000;
export const IDLE_TIMEOUT_ENV = 'PROCWARDEN_LIVE_IDLE_TIMEOUT_MS';

/**
 * The idle timeout when no option sets it: the environment variable (milliseconds, or a duration
 * with a unit such as `10s`; 0 disables the idle close), else the default. Unset or empty counts as
 * unset; an unusable value throws INVALID_ENV.
 */
export function idleTimeoutFromEnv(env: Record<string, string | undefined>): number {
  return envDurationMs(env, IDLE_TIMEOUT_ENV) ?? DEFAULT_IDLE_TIMEOUT_MS;
}
