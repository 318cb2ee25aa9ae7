import { nextTurn } from '../clock.js';
import type { EnvQuery, ProcessInfo, ProcessTable, Sweep } from './types.js';

/** A table that can answer many sweeps in a single pass. */
export interface BatchSweepTable extends ProcessTable {
  sweepMany?(queries: readonly EnvQuery[]): Promise<Sweep[]>;
}

/**
 * When many runs end at once (a shutdown of hundreds), each termination sequence asks for full
 * sweeps, and each costs a read of every /proc entry. Requests made before a pass is taken share
 * it: the pass is taken on the next turn, after every sharer asked, so no one gets an older view
 * than a private one would have given. `get` (the identity check before each signal) is never shared.
 */
export class CoalescingTable implements ProcessTable {
  readonly name: string;
  readonly findByEnv: ProcessTable['findByEnv'];
  readonly sweep: ProcessTable['sweep'];
  readonly births: ProcessTable['births'];
  readonly ignores: ProcessTable['ignores'];
  private pendingList: Promise<ProcessInfo[]> | null = null;
  private pendingSweeps: { queries: EnvQuery[]; answer: Promise<Sweep[]> } | null = null;

  constructor(private readonly inner: BatchSweepTable) {
    this.name = inner.name;
    this.births = inner.births?.bind(inner);
    this.ignores = inner.ignores?.bind(inner);
    const batched = inner.sweepMany;
    this.sweep = batched ? (query) => this.sharedSweep(query, batched.bind(inner)) : inner.sweep?.bind(inner);
    this.findByEnv = batched
      ? async (name, value, listName) => [
          ...(await this.sharedSweep({ name, value, ...(listName && { listName }) }, batched.bind(inner)))
            .holders,
        ]
      : inner.findByEnv?.bind(inner);
  }

  get(pid: number): Promise<ProcessInfo | null> {
    return this.inner.get(pid);
  }

  list(): Promise<ProcessInfo[]> {
    this.pendingList ??= nextTurn().then(() => {
      this.pendingList = null;
      return this.inner.list();
    });
    return this.pendingList;
  }

  private async sharedSweep(
    query: EnvQuery,
    sweepMany: (queries: readonly EnvQuery[]) => Promise<Sweep[]>,
  ): Promise<Sweep> {
    if (!this.pendingSweeps) {
      const queries: EnvQuery[] = [];
      const answer = nextTurn().then(() => {
        this.pendingSweeps = null;
        return sweepMany(queries);
      });
      this.pendingSweeps = { queries, answer };
    }
    const { queries, answer } = this.pendingSweeps;
    const index = queries.push(query) - 1;
    return (await answer)[index] as Sweep;
  }
}
