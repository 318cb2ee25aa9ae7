import type { ProcessInfo, ProcessTable } from './types.js';

/**
 * A table frozen at one enumeration. Lets code written against `get()` (the ancestor walk of the
 * guard) run over a list already read, where each fresh `get()` would cost a process launch.
 */
export class SnapshotTable implements ProcessTable {
  readonly name = 'snapshot';
  private readonly byPid: Map<number, ProcessInfo>;

  constructor(private readonly processes: readonly ProcessInfo[]) {
    this.byPid = new Map(processes.map((p) => [p.pid, p]));
  }

  async list(): Promise<ProcessInfo[]> {
    return [...this.processes];
  }

  async get(pid: number): Promise<ProcessInfo | null> {
    return this.byPid.get(pid) ?? null;
  }
}
