import type { RunResult } from '../types.js';
import type { ManagedRun } from './managed-run.js';

/**
 * Cancels runs (a scope's) and resolves when every one of them has settled, i.e. when its whole
 * tree is extinct: that is what `replaceScope` waits for before starting the new run.
 */
export function cancelRuns(runs: readonly ManagedRun[], reason: string): Promise<RunResult[]> {
  for (const run of runs) run.cancel(reason);
  return Promise.all(runs.map((r) => r.result));
}
