const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * What the C library's strtod reads at the start of a DURATION (after optional blanks and a plus
 * sign): `inf`/`infinity`, a hexadecimal float (`0x1.8p3`), or a decimal one (`1.5E3`). Then one
 * unit, or none, and nothing else: not even a blank, as timeout(1) wants. Each part can match a
 * text one way only, so a long argument that is not a duration fails in linear time.
 */
const DURATION =
  /^[ \t\n\v\f\r]*\+?(?:([iI][nN][fF](?:[iI][nN][iI][tT][yY])?)|0[xX]([0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)(?:[pP]([+-]?\d+))?|(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?)(ms|s|m|h|d)?$/;

/**
 * timeout(1)'s DURATION in milliseconds, read as coreutils reads it (strtod, then a unit), or null
 * when it is not one. `ms` is our one extra unit. Infinity: too large for a double, or `inf` (no
 * limit). A number that is not zero never says 0: one whose value underflows rounds up to the
 * smallest interval our timers have, 1 ms, as timeout(1) rounds up to its own.
 */
export function timeoutDurationMs(text: string): number | null {
  const match = DURATION.exec(text);
  if (!match) return null;
  const [, inf, hex, binaryExponent, decimal, exponent, unit = 's'] = match;
  if (inf) return Number.POSITIVE_INFINITY;
  const digits = (hex ?? decimal) as string;
  const number = hex ? hexValue(hex, Number(binaryExponent ?? 0)) : Number(`${decimal}e${exponent ?? 0}`);
  const value = number * (UNITS[unit] ?? 1000);
  return value === 0 && /[1-9a-fA-F]/.test(digits) ? 1 : value;
}

/** A hexadecimal mantissa (`1.8`, `.c`, `ff.`) scaled by 2 to the `exponent`. */
function hexValue(mantissa: string, exponent: number): number {
  const [whole = '', fraction = ''] = mantissa.split('.');
  const digits = `${whole}${fraction}`.replace(/^0+/, '') || '0';
  // A long mantissa: its leading 16 digits carry all a double holds, the rest only their count.
  const kept = digits.slice(0, 16);
  const scale = exponent - 4 * fraction.length + 4 * (digits.length - kept.length);
  // Past 2^1024 every double is infinite and below 2^-1074 zero, so the clamp changes no result.
  return Number.parseInt(kept, 16) * 2 ** Math.max(-1200, Math.min(1200, scale));
}
