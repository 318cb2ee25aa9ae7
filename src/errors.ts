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
  | 'LISTENER_THREW';

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

/**
 * A value as a validation message shows it: strings and plain data as JSON, anything else as
 * String() gives it (NaN stays NaN); never throws, whatever a caller passed (a BigInt or a cycle,
 * which JSON refuses; an object without a prototype).
 */
export function showValue(value: unknown): string {
  if (typeof value === 'string' || (typeof value === 'object' && value !== null)) {
    try {
      const json = JSON.stringify(value);
      if (json !== undefined) return json;
    } catch {
      // a BigInt inside, a cycle, a throwing getter: String() below
    }
  }
  return safeString(value);
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
