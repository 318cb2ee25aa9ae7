import { ProcwardenError, showValue } from '../errors.js';
import type { AcquireOptions, LivePoolOptions, LiveSessionOptions, TurnOptions } from './types.js';

export const DEFAULT_MAX_DRAIN_MS = 15 * 60_000;
export const DEFAULT_MAX_SESSIONS = 16;

const SESSION_KEYS = ['idleTimeoutMs', 'maxDrainMs', 'closeOnRunEnd', 'maxLineChars'];
const POOL_KEYS = [...SESSION_KEYS, 'maxSessions', 'supervisor', 'clock', 'env'];
const ACQUIRE_KEYS = [...SESSION_KEYS, 'fingerprint'];
const TURN_KEYS = ['timeoutMs', 'noOutputTimeoutMs'];

function invalid(message: string): ProcwardenError {
  return new ProcwardenError('INVALID_OPTION', message);
}

function knownKeys(value: unknown, allowed: string[], what: string): Record<string, unknown> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(`${what} must be an object.`);
  }
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key))
      throw invalid(`${what}: unknown option "${key}"; known: ${allowed.join(', ')}.`);
  }
  return value as Record<string, unknown>;
}

/** Milliseconds, 0 or more; Infinity allowed where "never" makes sense. */
function millis(value: unknown, what: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || Number.isNaN(value) || value < 0) {
    throw invalid(
      `${what}: ${showValue(value)} is not a valid duration; give milliseconds, 0 or more (or Infinity).`,
    );
  }
  return value;
}

function sessionOptions(o: Record<string, unknown>, what: string): LiveSessionOptions {
  if (o.closeOnRunEnd !== undefined && typeof o.closeOnRunEnd !== 'boolean') {
    throw invalid(`${what}.closeOnRunEnd must be true or false.`);
  }
  const max = o.maxLineChars;
  if (max !== undefined && (typeof max !== 'number' || !Number.isSafeInteger(max) || max < 1)) {
    throw invalid(`${what}.maxLineChars: ${showValue(max)} is not a whole number of characters, 1 or more.`);
  }
  return {
    idleTimeoutMs: millis(o.idleTimeoutMs, `${what}.idleTimeoutMs`),
    maxDrainMs: millis(o.maxDrainMs, `${what}.maxDrainMs`),
    closeOnRunEnd: o.closeOnRunEnd as boolean | undefined,
    maxLineChars: max,
  };
}

export function checkPoolOptions(options: LivePoolOptions | undefined): LivePoolOptions {
  const o = knownKeys(options, POOL_KEYS, 'LiveSessionPool options');
  const max = o.maxSessions ?? DEFAULT_MAX_SESSIONS;
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 1) {
    throw invalid(
      `LiveSessionPool options.maxSessions: ${showValue(max)} is not a whole number of 1 or more.`,
    );
  }
  const has = (value: unknown, methods: string[]) =>
    typeof value === 'object' &&
    value !== null &&
    methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function');
  if (o.supervisor !== undefined && !has(o.supervisor, ['spawn'])) {
    throw invalid('LiveSessionPool options.supervisor must be a Supervisor.');
  }
  if (o.clock !== undefined && !has(o.clock, ['now', 'setTimeout', 'clearTimeout'])) {
    throw invalid('LiveSessionPool options.clock must be a Clock ({ now, setTimeout, clearTimeout }).');
  }
  if (o.env !== undefined && (typeof o.env !== 'object' || o.env === null)) {
    throw invalid('LiveSessionPool options.env must be an object of environment variables.');
  }
  return { ...(o as LivePoolOptions), ...sessionOptions(o, 'LiveSessionPool options'), maxSessions: max };
}

export function checkAcquireOptions(options: AcquireOptions | undefined): AcquireOptions {
  const o = knownKeys(options, ACQUIRE_KEYS, 'acquire() options');
  if (o.fingerprint !== undefined && typeof o.fingerprint !== 'string') {
    throw invalid('acquire() options.fingerprint must be a string (e.g. a hash of argv, env and model).');
  }
  return { ...sessionOptions(o, 'acquire() options'), fingerprint: o.fingerprint as string | undefined };
}

export function checkTurnOptions(options: TurnOptions | undefined): Required<TurnOptions> {
  const o = knownKeys(options, TURN_KEYS, 'beginTurn() options');
  return {
    timeoutMs: millis(o.timeoutMs, 'beginTurn() options.timeoutMs') ?? 0,
    noOutputTimeoutMs: millis(o.noOutputTimeoutMs, 'beginTurn() options.noOutputTimeoutMs') ?? 0,
  };
}
