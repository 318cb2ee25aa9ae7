/**
 * One 'abort' listener per signal in this process, however many runs and acquires wait on it. A
 * caller's signal is often shared (an agent's turn, a request, a shutdown), and one listener each
 * would pass Node's limit of 10 on an AbortSignal and print a leak warning for a program that
 * leaks nothing.
 */
const watched = new WeakMap<AbortSignal, { calls: Set<() => void>; listener: () => void }>();

/**
 * Calls `then` when `signal` aborts, until the returned function is called. Like a listener it is
 * never called for an abort that came before: the caller checks `signal.aborted` itself.
 */
export function whenAborted(signal: AbortSignal, then: () => void): () => void {
  let entry = watched.get(signal);
  if (!entry) {
    const calls = new Set<() => void>();
    const listener = () => {
      if (watched.get(signal)?.calls === calls) watched.delete(signal);
      let failure: { error: unknown } | undefined;
      // One that throws does not keep the others from hearing the abort.
      for (const call of calls) {
        try {
          call();
        } catch (error) {
          failure ??= { error };
        }
      }
      if (failure) throw failure.error;
    };
    entry = { calls, listener };
    watched.set(signal, entry);
    signal.addEventListener('abort', listener, { once: true });
  }
  const { calls, listener } = entry;
  calls.add(then);
  return () => {
    calls.delete(then);
    if (calls.size > 0 || watched.get(signal)?.calls !== calls) return;
    watched.delete(signal);
    signal.removeEventListener('abort', listener);
  };
}
