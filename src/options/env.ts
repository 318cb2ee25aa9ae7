import { ProcwardenError, showValue } from '../errors.js';
import { parseDuration } from './duration.js';

/** Where a PROCWARDEN_* variable is read: process.env, or an object the caller passed for it. */
export type EnvSource = Readonly<Record<string, string | undefined>>;

/**
 * A duration variable named in milliseconds (`..._MS`): a bare number is milliseconds, a number
 * with a unit is read as the CLI reads `--timeout` (`10s`, `1.5m`, `500ms`, `2h`). undefined when
 * unset or empty. Anything else throws INVALID_ENV: a value someone set is never swapped for a
 * default behind their back.
 */
export function envDurationMs(env: EnvSource, name: string): number | undefined {
  // Only a string is an environment value: a number in an object passed as `env` is refused too.
  const value: unknown = env[name];
  if (value === undefined || (typeof value === 'string' && value.trim() === '')) return undefined;
  try {
    if (typeof value === 'string') return parseDuration(value, name, 'ms');
  } catch {
    // reported below, in the variable's terms
  }
  throw new ProcwardenError(
    'INVALID_ENV',
    `${name}=${showValue(value)} is not a duration; write milliseconds (600000) or a number with a unit (ms, s, m, h, d), e.g. 10s or 1.5m; 0 turns it off. Fix it or unset it.`,
  );
}

export const WATCHDOG_ENV = 'PROCWARDEN_WATCHDOG';

/**
 * PROCWARDEN_WATCHDOG: `0` turns the host guard off, `1` (or unset, or empty) leaves it on. Any
 * other value throws INVALID_ENV: `false` or `off` would otherwise mean on.
 */
export function watchdogFromEnv(env: EnvSource): boolean {
  const value: unknown = env[WATCHDOG_ENV];
  const text = typeof value === 'string' ? value.trim() : value;
  if (text === undefined || text === '' || text === '1') return true;
  if (text === '0') return false;
  throw new ProcwardenError(
    'INVALID_ENV',
    `${WATCHDOG_ENV}=${showValue(value)} is neither 0 (no host guard) nor 1 (a host guard, the default); set one of those or unset it.`,
  );
}
