import type { TerminateReport } from '../types.js';

/** 14 ms, 1.5 s, 2 min 5 s, 3 h 20 min: short, and exact enough for a person. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${trim(ms / 1000)} s`;
  if (ms < 3_600_000) return pair(ms, 60_000, 'min', 1000, 's');
  if (ms < 86_400_000) return pair(ms, 3_600_000, 'h', 60_000, 'min');
  return pair(ms, 86_400_000, 'd', 3_600_000, 'h');
}

/** A compact age for tables: 45s, 12m, 3h05m, 2d04h. */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  const pad = (n: number) => String(n).padStart(2, '0');
  if (s < 86_400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86_400)}d${pad(Math.floor((s % 86_400) / 3600))}h`;
}

/**
 * Text another user chose (a command name, a command line, an environment value), made safe to
 * print: control characters (C0, DEL, C1: escape sequences, newlines), format characters (bidi
 * overrides such as U+202E, zero-width ones) and the line and paragraph separators U+2028/U+2029
 * become '?', as ps shows control characters. Printed raw, a process named with `\e]0;…` retitles
 * the terminal of whoever lists it, a newline or a separator in its name adds a row of its choosing,
 * and a bidi override shows its row's text reversed.
 */
export function printable(text: string): string {
  return text.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, '?');
}

export const processes = (n: number) => `${n} process${n === 1 ? '' : 'es'}`;

/** How many members got SIGKILL: a survivor of it counts too (report.killed counts only the dead). */
export const sigkillSent = (report: TerminateReport) =>
  report.members.filter((m) => m.signals.some((s) => s.signal === 'SIGKILL')).length;

/** A member escaped that our SIGKILL never reached: it refused it (EPERM), it did not outlive it. */
export const sigkillRefused = (report: TerminateReport) =>
  report.members.some((m) => m.outcome === 'escaped' && !m.signals.some((s) => s.signal === 'SIGKILL'));

function trim(value: number): string {
  return String(Math.round(value * 100) / 100);
}

function pair(ms: number, big: number, bigUnit: string, small: number, smallUnit: string): string {
  const whole = Math.floor(ms / big);
  const rest = Math.round((ms - whole * big) / small);
  return rest === 0 ? `${whole} ${bigUnit}` : `${whole} ${bigUnit} ${rest} ${smallUnit}`;
}
