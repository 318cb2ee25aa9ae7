/** How a listener failed: it threw, or the promise it returned rejected. */
export type ListenerFailure = 'threw' | 'rejected';

/**
 * Calls one listener on its own. EventEmitter's emit() stops at the first listener that throws and
 * throws into whoever emitted (the session's output path, an acquire); here what it throws, or
 * what the promise it returns rejects with (an `async` listener, whose rejection would otherwise
 * end the host as unhandled), goes to `failed` instead, and the caller goes on to the next one.
 */
export function callListener(
  listener: unknown,
  self: unknown,
  args: readonly unknown[],
  failed: (error: unknown, how: ListenerFailure) => void,
): void {
  try {
    const returned = (listener as (...a: unknown[]) => unknown).apply(self, args as unknown[]);
    if (returned !== null && typeof returned === 'object' && 'then' in returned) {
      const then = returned.then;
      if (typeof then === 'function')
        then.call(returned, undefined, (error: unknown) => failed(error, 'rejected'));
    }
  } catch (error) {
    failed(error, 'threw');
  }
}
