import { constants } from 'node:os';
import { ProcwardenError, showValue } from '../errors.js';
import { realtimeName, realtimeNumber } from './realtime.js';

const SIGNALS = constants.signals as Record<string, number>;

/** Accepts 'SIGTERM', 'TERM', 'term' or a number; returns the canonical name. */
export function normalizeSignal(value: unknown, what = 'signal'): NodeJS.Signals {
  if (typeof value === 'number' && Number.isInteger(value)) {
    const name = signalName(value);
    if (name) return name;
  } else if (typeof value === 'string' && value.length > 0) {
    if (/^\d+$/.test(value)) return normalizeSignal(Number(value), what);
    const upper = value.toUpperCase();
    const name = upper.startsWith('SIG') ? upper : `SIG${upper}`;
    if (name in SIGNALS) return name as NodeJS.Signals;
    const realtime = realtimeName(realtimeNumber(value) ?? 0);
    if (realtime) return realtime;
  }
  throw new ProcwardenError(
    'INVALID_SIGNAL',
    `${what}: ${showValue(value)} is not a signal this platform knows; use a name such as SIGTERM, SIGINT or SIGHUP.`,
  );
}

export function signalName(num: number): NodeJS.Signals | undefined {
  for (const [name, n] of Object.entries(SIGNALS)) if (n === num) return name as NodeJS.Signals;
  return realtimeName(num);
}

export function signalNumber(name: string): number {
  return SIGNALS[name] ?? realtimeNumber(name) ?? 0;
}
