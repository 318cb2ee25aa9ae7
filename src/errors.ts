import { util } from './lazy-builtins.js';

/**
 * The one error class procwarden throws. `code` is stable and documented in the README;
 * the message says what was wrong and what to do about it.
 */
export type ProcwardenErrorCode =
  | 'INVALID_SPEC'
  | 'INVALID_ARGV'
  | 'INVALID_DURATION'
  | 'INVALID_SIGNAL'
  | 'INVALID_OPTION'
  | 'CWD_NOT_FOUND'
  | 'CWD_NOT_ACCESSIBLE'
  | 'INVALID_ENV'
  | 'INVALID_PID'
  | 'FORBIDDEN_TARGET'
  | 'NO_SUCH_PROCESS'
  | 'CGROUP_UNAVAILABLE'
  | 'PTY_UNAVAILABLE'
  | 'NOT_A_PTY'
  | 'UNSUPPORTED_PLATFORM'
  | 'PROCESS_TABLE_UNAVAILABLE'
  | 'SUPERVISOR_CLOSED'
  | 'UNKNOWN_RUN'
  | 'LIVE_SESSION_LIMIT'
  | 'LIVE_SESSION_CLOSED'
  | 'LIVE_TURN_ACTIVE'
  | 'LISTENER_THREW'
  | 'GUARD_UNAVAILABLE'
  | 'OOM_SCORE_UNAVAILABLE'
  | 'NOT_JOURNALLED';

export class ProcwardenError extends Error {
  readonly code: ProcwardenErrorCode;

  constructor(code: ProcwardenErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProcwardenError';
    this.code = code;
  }
}

export function isProcwardenError(value: unknown): value is ProcwardenError {
  return value instanceof ProcwardenError;
}

/**
 * What a thrown or rejected value says, for a note or a message; never throws itself. A user's
 * callback can throw anything: a Symbol (which a template literal refuses), an object without a
 * prototype (which String() refuses), a Proxy whose every trap throws.
 */
export function describeThrown(value: unknown): string {
  try {
    if (typeof value === 'object' && value !== null && 'message' in value) {
      const { message } = value as { message: unknown };
      if (typeof message === 'string') return message;
    }
  } catch {
    // a Proxy, say: shown as a value below
  }
  return safeString(value);
}

/** How much of a value a message shows: a mistake is recognised by its start. */
const SHOWN_CHARS = 120;

/**
 * A value as a validation message shows it: a string as JSON, an object by a bounded inspection,
 * anything else as String() gives it (NaN stays NaN). Never throws, and costs the same for a
 * 100 MB typed array as for a number: whatever a caller passed (a BigInt, a cycle, an object
 * without a prototype, a Proxy) is only ever looked at that far.
 */
export function showValue(value: unknown): string {
  let text: string;
  if (typeof value === 'string') text = JSON.stringify(value.slice(0, SHOWN_CHARS + 1));
  else if (typeof value === 'object' && value !== null) text = inspected(value);
  else text = safeString(value);
  return text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS)}…` : text;
}

function inspected(value: object): string {
  try {
    return util().inspect(value, {
      depth: 1,
      maxArrayLength: 8,
      maxStringLength: SHOWN_CHARS,
      breakLength: Number.POSITIVE_INFINITY,
      customInspect: false,
      getters: false,
    });
  } catch {
    return safeString(value);
  }
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    try {
      return Object.prototype.toString.call(value);
    } catch {
      return '(a value that cannot be shown)';
    }
  }
}
