import { ProcwardenError, showValue } from '../errors.js';

/** Milliseconds per unit of a duration text; `timeout`'s own reader shares them. */
export const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * The milliseconds a duration text says, before any range check: null when it is not a duration,
 * Infinity when it is one too large for a double (which checkDuration refuses). A positive text
 * never says 0: one whose value underflows rounds up to the smallest interval our timers have, 1 ms.
 */
function durationMs(text: string, bareUnit: keyof typeof UNITS = 's'): number | null {
  // Trimmed first: blanks on both sides of an optional unit made the match quadratic in the
  // length of a text that is not a duration (100 k blanks took 14 s).
  const match = /^(\d+(?:\.\d*)?|\.\d+)(?:e([+-]?\d+))?\s*(ms|s|m|h|d)?$/.exec(text.trim());
  if (!match) return null;
  const value =
    Number(`${match[1]}${match[2] ? `e${match[2]}` : ''}`) * (UNITS[match[3] ?? bareUnit] ?? 1000);
  return value === 0 && /[1-9]/.test(match[1] as string) ? 1 : value;
}

/**
 * Parses '1.5s', '200ms', '2m', '1h', '1d' or a bare number (in `bareUnit`, seconds by default,
 * as coreutils timeout does) into milliseconds.
 */
export function parseDuration(text: string, what = 'duration', bareUnit: keyof typeof UNITS = 's'): number {
  if (typeof text !== 'string') {
    throw new ProcwardenError(
      'INVALID_DURATION',
      `${what}: ${showValue(text)} is not a duration text; write a string such as '30s' or '1.5m' (or give milliseconds as a number where an option takes one).`,
    );
  }
  const value = durationMs(text, bareUnit);
  if (value === null) {
    throw new ProcwardenError(
      'INVALID_DURATION',
      `${what}: ${JSON.stringify(text)} is not a duration (an invalid time interval); write a non-negative number with an optional unit (ms, s, m, h, d), e.g. 30s or 1.5m.`,
    );
  }
  // Said in the text's own terms: milliseconds are not what the caller wrote.
  if (!Number.isFinite(value)) {
    throw new ProcwardenError(
      'INVALID_DURATION',
      `${what}: ${JSON.stringify(text)} is too long to count; leave the option out for no limit.`,
    );
  }
  return checkDuration(value, what);
}

/** Validates a millisecond count from a spec: finite, not negative. */
export function checkDuration(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new ProcwardenError(
      'INVALID_DURATION',
      `${what}: ${showValue(value)} is not a valid duration; give a finite number of milliseconds, 0 or more.`,
    );
  }
  return value;
}
