import { normalizeSignal, RT_MAX, RT_MIN, realtimeName } from '../options/index.js';

/** What -s says; 0 (coreutils' "EXIT") sends nothing: only -k's SIGKILL, if any, follows. */
export type TimeoutSignal = NodeJS.Signals | 0;

const INT_MAX = 2 ** 31 - 1;
/** C's isspace in the C locale: what strtol skips before a number. */
const SPACE = '[ \\t\\n\\v\\f\\r]*';
const RT_OFFSET = new RegExp(`^RT(MIN|MAX)(?:${SPACE}([+-]?\\d+))?$`);

/**
 * -s as coreutils' operand2sig reads it, and so exactly the operands timeout(1) takes. Text that
 * starts with a digit is a decimal number, all of it; it may be a shell's $? of a killed command
 * (137 for KILL), or ksh's 256+N, so it is masked: with 0xFF from 255 up, else 0x7F (128 and 256 are
 * 0, EXIT). The result must be a signal sig2str names: 0, 1-31, or a real-time one (34-64).
 * Anything else is a name, upper-cased in ASCII only, with or without SIG, as gnulib's str2sig knows
 * them (RTMIN+n and RTMAX-n included, n as strtol reads it). Returns null for what it refuses.
 */
export function timeoutSignal(text: string): TimeoutSignal | null {
  if (/^\d/.test(text)) {
    if (!/^\d+$/.test(text)) return null;
    const value = Number(text);
    if (value > INT_MAX) return null;
    const sig = value & (value >= 0xff ? 0xff : 0x7f);
    return sig === 0 ? 0 : numbered(sig);
  }
  const upper = text.replace(/[a-z]+/g, (s) => s.toUpperCase());
  if (!upper.startsWith('SIG')) return named(upper);
  const rest = upper.slice(3);
  // str2sig reads a number after SIG as it is, unmasked, up to SIGRTMAX: SIG15, sig015, SIG44.
  if (/^\d+$/.test(rest))
    return Number(rest) === 0 ? 0 : Number(rest) <= RT_MAX ? numbered(Number(rest)) : null;
  return named(upper) ?? named(rest);
}

function numbered(sig: number): TimeoutSignal | null {
  // 32 and 33 are glibc's, never a name (sig2str fails on them); so is anything past SIGRTMAX.
  if (sig < 32) return normalizeSignal(sig);
  return realtimeName(sig) ?? null;
}

/** A name without SIG, as str2sig matches it, or null. */
function named(name: string): TimeoutSignal | null {
  if (name === 'EXIT') return 0;
  // System V's name for SIGCHLD, which gnulib's table keeps and Node's does not.
  if (name === 'CLD') return 'SIGCHLD';
  const rt = RT_OFFSET.exec(name);
  if (rt) {
    // strtol: leading blanks, a sign, digits to the end (nothing after them); none at all is 0.
    const n = Number(rt[2] ?? 0);
    const sig = rt[1] === 'MIN' ? (n >= 0 ? RT_MIN + n : -1) : n <= 0 ? RT_MAX + n : -1;
    return realtimeName(sig) ?? null;
  }
  // Only names: whatever else normalizeSignal takes (a number, RTMIN+n in other spellings) is not one.
  if (!/^[A-Z][A-Z0-9]*$/.test(name)) return null;
  try {
    return normalizeSignal(`SIG${name}`);
  } catch {
    return null;
  }
}
