import type { ProcessInfo, ProcessTable } from './types.js';

/** A table that can answer many environment lookups of one variable in a single pass. */
export interface BatchEnvTable extends ProcessTable {
  findByEnvValues?(name: string, values: ReadonlySet<string>): Promise<Map<string, number[]>>;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * When many runs end at once (a shutdown of hundreds), each termination sequence asks for a full
 * snapshot and a cookie sweep, and each costs a read of every /proc entry. Requests made before a
 * snapshot is taken share it: the snapshot is taken on the next turn, after every sharer asked, so
 * no one gets an older view than a private one would have given. `get` (the identity check before
 * each signal) is never shared.
 */
export class CoalescingTable implements ProcessTable {
  readonly name: string;
  readonly findByEnv: ProcessTable['findByEnv'];
  private pendingList: Promise<ProcessInfo[]> | null = null;
  private readonly pendingEnv = new Map<
    string,
    { values: Set<string>; answer: Promise<Map<string, number[]>> }
  >();

  constructor(private readonly inner: BatchEnvTable) {
    this.name = inner.name;
    this.findByEnv = inner.findByEnv ? (name, value) => this.sharedEnvLookup(name, value) : undefined;
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

  private sharedEnvLookup(name: string, value: string): Promise<number[]> {
    let batch = this.pendingEnv.get(name);
    if (!batch) {
      const values = new Set<string>();
      const answer = nextTurn().then(() => {
        this.pendingEnv.delete(name);
        return this.lookup(name, values);
      });
      batch = { values, answer };
      this.pendingEnv.set(name, batch);
    }
    batch.values.add(value);
    return batch.answer.then((found) => found.get(value) ?? []);
  }

  private async lookup(name: string, values: Set<string>): Promise<Map<string, number[]>> {
    if (this.inner.findByEnvValues) return this.inner.findByEnvValues(name, values);
    const found = new Map<string, number[]>();
    for (const v of values) found.set(v, (await this.inner.findByEnv?.(name, v)) ?? []);
    return found;
  }
}
