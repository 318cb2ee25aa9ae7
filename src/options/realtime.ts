/**
 * Linux's real-time signals, which Node names none of (os.constants.signals stops at 31) but
 * process.kill sends by number. Numbered as glibc numbers them, as coreutils does: SIGRTMIN is 34
 * (the kernel's 32 and 33 are glibc's own), SIGRTMAX 64. Named as gnulib's sig2str names them:
 * RTMIN+n up to the middle, RTMAX-n above it.
 */
export const RT_MIN = 34;
export const RT_MAX = 64;
const MIDDLE = (RT_MIN + RT_MAX) >> 1;
const HAS_REALTIME = process.platform === 'linux';

/** 'SIGRTMIN+10' for 44; undefined for a number that is no real-time signal here. */
export function realtimeName(num: number): NodeJS.Signals | undefined {
  if (!HAS_REALTIME || !Number.isInteger(num) || num < RT_MIN || num > RT_MAX) return undefined;
  const name =
    num === RT_MIN
      ? 'SIGRTMIN'
      : num === RT_MAX
        ? 'SIGRTMAX'
        : num <= MIDDLE
          ? `SIGRTMIN+${num - RT_MIN}`
          : `SIGRTMAX-${RT_MAX - num}`;
  // Node's type lists only the signals it names; these travel as names all the same.
  return name as NodeJS.Signals;
}

/** 44 for 'SIGRTMIN+10', 'RTMAX-20' or 'sigrtmin+10'; undefined for any other text. */
export function realtimeNumber(name: string): number | undefined {
  const m = /^(?:SIG)?RT(MIN|MAX)(?:([+-])(\d{1,3}))?$/i.exec(name);
  if (!HAS_REALTIME || !m) return undefined;
  const offset = Number(m[3] ?? 0);
  const num =
    m[1]?.toUpperCase() === 'MIN'
      ? m[2] === '-'
        ? -1
        : RT_MIN + offset
      : m[2] === '+'
        ? -1
        : RT_MAX - offset;
  return num >= RT_MIN && num <= RT_MAX ? num : undefined;
}

/** What process.kill takes for `signal`: the name where Node knows it, else its number. */
export function killable(signal: NodeJS.Signals): NodeJS.Signals | number {
  return realtimeNumber(signal) ?? signal;
}
