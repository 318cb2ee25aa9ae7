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
