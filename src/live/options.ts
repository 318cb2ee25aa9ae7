import { ProcwardenError, showValue } from '../errors.js';
import { isProcessId, MAX_PID } from '../tree/index.js';
import type { ChildLimits } from './children.js';
import type {
  AcquireOptions,
  AttachChildOptions,
  LivePoolOptions,
  LiveSessionOptions,
  TurnOptions,
} from './types.js';

export const DEFAULT_MAX_DRAIN_MS = 15 * 60_000;
export const DEFAULT_MAX_SESSIONS = 16;
/**
 * How long a child handle counts when nothing releases it. Twice the drain cap: a subagent gets
 * longer to work than a close waits for it, and a lost 'child done' report costs the session's
 * slot for half an hour (plus its idle timeout), not for ever. A child meant to outlive that (a dev
 * server) is attached with its pid and `timeoutMs: Infinity`: its exit still releases it.
 */
export const DEFAULT_CHILD_TIMEOUT_MS = 30 * 60_000;
/**
 * How long a closeOnRunEnd close that finds no live child waits for one to be reported. An agent
 * often writes its answer and its 'child started' report in separate writes, read as separate
 * chunks milliseconds apart (the turn ends on the first); half a second covers that many times
 * over on a loaded machine, and delays only an acquire that waits for that session to close.
 */
export const DEFAULT_RUN_END_SETTLE_MS = 500;

const SESSION_KEYS = [
  'idleTimeoutMs',
  'maxDrainMs',
  'closeOnRunEnd',
  'maxLineChars',
  'childTimeoutMs',
  'runEndSettleMs',
];
const POOL_KEYS = [...SESSION_KEYS, 'maxSessions', 'supervisor', 'clock', 'env'];
const ACQUIRE_KEYS = [...SESSION_KEYS, 'fingerprint'];
const TURN_KEYS = ['timeoutMs', 'noOutputTimeoutMs'];
const CHILD_KEYS = ['pid', 'timeoutMs'];

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

/**
 * A timeout that 0 cannot mean: more than 0 ms, or Infinity. For a child, 0 would release it at
 * once, and a caller who meant "no timeout" (as 0 means for idleTimeoutMs) would lose its drain.
 */
function positiveMillis(value: unknown, what: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || Number.isNaN(value) || value <= 0) {
    throw invalid(
      `${what}: ${showValue(value)} is not a valid timeout; give milliseconds, more than 0 (Infinity: none).`,
    );
  }
  return value;
}

/** A wait that must end: 0 or more milliseconds, finite. */
function finiteMillis(value: unknown, what: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw invalid(
      `${what}: ${showValue(value)} is not a valid duration; give milliseconds, 0 or more, finite.`,
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
    childTimeoutMs: positiveMillis(o.childTimeoutMs, `${what}.childTimeoutMs`),
    runEndSettleMs: finiteMillis(o.runEndSettleMs, `${what}.runEndSettleMs`),
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

/** attachChild's arguments, checked; `defaultTimeoutMs` is the session's childTimeoutMs. */
export function checkChildOptions(
  label: unknown,
  options: AttachChildOptions | undefined,
  defaultTimeoutMs: number,
): ChildLimits {
  if (label !== undefined && typeof label !== 'string') {
    throw invalid(`attachChild(label): the label must be a string, got ${showValue(label)}.`);
  }
  const o = knownKeys(options, CHILD_KEYS, 'attachChild() options');
  if (o.pid !== undefined && !isProcessId(o.pid)) {
    throw new ProcwardenError(
      'INVALID_PID',
      `attachChild() options.pid: ${showValue(o.pid)} is not a process id; give the child's pid as the agent reported it, a whole number from 1 to ${MAX_PID}.`,
    );
  }
  return {
    label,
    pid: o.pid as number | undefined,
    timeoutMs: positiveMillis(o.timeoutMs, 'attachChild() options.timeoutMs') ?? defaultTimeoutMs,
  };
}
