import { DURATION_UNITS } from '../options/index.js';

/**
 * What the C library's strtod reads at the start of a DURATION (after optional blanks and a sign):
 * `inf`/`infinity`, a hexadecimal float (`0x1.8p3`), or a decimal one (`1.5E3`). Then one unit, or
 * none, and nothing else: not even a blank, as timeout(1) wants. Each part can match a text one way
 * only, so a long argument that is not a duration fails in linear time.
 */
const DURATION =
  /^[ \t\n\v\f\r]*([+-]?)(?:([iI][nN][fF](?:[iI][nN][iI][tT][yY])?)|0[xX]([0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)(?:[pP]([+-]?\d+))?|(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?)(ms|s|m|h|d)?$/;

/**
 * timeout(1)'s DURATION in milliseconds, read as coreutils reads it (strtod, then a unit), or null
 * when it is not one. `ms` is our one extra unit. Infinity: too large for a double, or `inf` (no
 * limit). A number that is not zero never says 0: one whose value underflows rounds up to the
 * smallest interval our timers have, 1 ms, as timeout(1) rounds up to its own.
 */
export function timeoutDurationMs(text: string): number | null {
  const match = DURATION.exec(text);
  if (!match) return null;
  const [, sign, inf, hex, binaryExponent, decimal, exponent, unit = 's'] = match;
  const zero = !inf && !/[1-9a-fA-F]/.test((hex ?? decimal) as string);
  // Negative zero is zero (no limit), as in coreutils; any other negative number is invalid, even
  // one too small to count.
  if (sign === '-') return zero ? 0 : null;
  if (inf) return Number.POSITIVE_INFINITY;
  if (zero) return 0;
  const number = hex ? hexValue(hex, Number(binaryExponent ?? 0)) : Number(`${decimal}e${exponent ?? 0}`);
  const value = number * (DURATION_UNITS[unit] ?? 1000);
  return value === 0 ? 1 : value;
}

/** A hexadecimal mantissa (`1.8`, `.c`, `ff.`), not zero, scaled by 2 to the `exponent`. */
function hexValue(mantissa: string, exponent: number): number {
  const [whole = '', fraction = ''] = mantissa.split('.');
  const digits = `${whole}${fraction}`.replace(/^0+/, '') || '0';
  // A long mantissa: its leading 16 digits carry all a double holds, the rest only their count.
  const kept = digits.slice(0, 16);
  const scale = exponent - 4 * fraction.length + 4 * (digits.length - kept.length);
  // Two steps: 2 ** scale alone would underflow for a value that is itself a normal double
  // (0x8000000000000000p-1100). Past 2^1024 every double is infinite and below 2^-1074 zero, and
  // the mantissa is under 2^64, so the clamp changes no result.
  const clamped = Math.max(-1300, Math.min(1300, scale));
  const half = Math.trunc(clamped / 2);
  return Number.parseInt(kept, 16) * 2 ** half * 2 ** (clamped - half);
}
