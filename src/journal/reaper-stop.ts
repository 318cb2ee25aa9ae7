import type { ProcessInfo } from '../tree/index.js';
import type { Journal } from './journal.js';
import { MAX_SIGNALLED, type RunRecord, type StoppingRecord } from './record.js';

/**
 * A reaper writes the run's stop record (`<run id>.stop.json`) once its first signal went out, as
 * a live supervisor does: a reaper that dies mid-sequence (SIGKILLed, OOM) leaves its claim to be
 * taken over, and the next one then goes on with that signal and deadline, not signalling again
 * what was reached (a second SIGTERM restarts a shell trap's cleanup), instead of starting over.
 * A sequence taken over already keeps its first signal's time and grace; the reached are added.
 * Returns why it could not be written, or null.
 */
export function writeReaperStop(
  journal: Journal,
  record: RunRecord,
  first: { signal: NodeJS.Signals; graceMs: number },
  reached: readonly ProcessInfo[],
  now = Date.now(),
): string | null {
  const before = record.stopping;
  const signalled = [
    ...new Set([...(before?.signalled ?? []), ...reached.map((m) => `${m.pid}@${m.startTime}`)]),
  ].slice(0, MAX_SIGNALLED);
  const stopping: StoppingRecord = before
    ? { ...before, signalled }
    : { signal: first.signal, atMs: now, graceMs: first.graceMs, signalled };
  try {
    journal.write({ ...record, stopping });
    return null;
  } catch (error) {
    return `stop record not written (${(error as NodeJS.ErrnoException).code ?? error}): a reaper taking over after this one died would signal again`;
  }
}
