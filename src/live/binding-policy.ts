export interface BindingPolicy {
  /** Keep the binding when the turn was aborted (the caller cancelled, the session is still good). Default false. */
  keepOnAbort?: boolean;
}

/**
 * Whether a turn's error should drop the caller's binding of a conversation to its live session
 * (its process, or the CLI's own session id to resume). An empty response (`code: 'empty_response'`)
 * keeps it: the process is fine and said nothing. An AbortError clears it unless `keepOnAbort`. Any
 * other error clears it. No error (null / undefined) keeps it.
 */
export function shouldClearSessionBinding(error: unknown, policy: BindingPolicy = {}): boolean {
  if (error === null || error === undefined) return false;
  if (typeof error !== 'object') return true;
  const { code, name } = error as { code?: unknown; name?: unknown };
  if (code === 'empty_response') return false;
  if (name === 'AbortError' || code === 'ABORT_ERR') return policy.keepOnAbort !== true;
  return true;
}
