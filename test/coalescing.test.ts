import { describe, expect, it } from 'vitest';
import { type BatchSweepTable, CoalescingTable, type EnvQuery, type ProcessInfo } from '../src/tree/index.js';

const proc = (pid: number): ProcessInfo => ({
  pid,
  ppid: 1,
  pgid: pid,
  sid: pid,
  startTime: String(pid),
  state: 'S',
  command: 'x',
});

function fakeTable(withEnv = true) {
  const calls = { list: 0, get: 0, sweeps: [] as string[][] };
  let generation = 0;
  const table: BatchSweepTable = {
    name: 'fake',
    async list() {
      calls.list++;
      generation++;
      return [proc(100 + generation)];
    },
    async get(pid) {
      calls.get++;
      return proc(pid);
    },
    ...(withEnv
      ? {
          findByEnv: async () => [],
          async sweepMany(queries: readonly EnvQuery[]) {
            calls.sweeps.push(queries.map((q) => q.value));
            return queries.map((_, i) => ({ processes: [], holders: new Set([i + 1]), vanished: 0 }));
          },
        }
      : {}),
  };
  return { table, calls };
}

describe('CoalescingTable', () => {
  it('requests made before a snapshot share it; a later request gets a fresh one', async () => {
    const { table, calls } = fakeTable();
    const t = new CoalescingTable(table);
    const [a, b, c] = await Promise.all([t.list(), t.list(), t.list()]);
    expect(calls.list).toBe(1);
    expect(a).toBe(b);
    expect(b).toBe(c);
    const later = await t.list();
    expect(calls.list).toBe(2);
    expect(later[0]?.pid).toBe(102);
  });

  it('sweeps of many runs are one pass; each caller gets its own answer', async () => {
    const { table, calls } = fakeTable();
    const t = new CoalescingTable(table);
    const answers = await Promise.all(
      ['r1', 'r2', 'r3'].map((value) => t.sweep?.({ name: 'PROCWARDEN_RUN', value })),
    );
    expect(calls.sweeps).toEqual([['r1', 'r2', 'r3']]);
    expect(answers.map((a) => [...(a?.holders ?? [])])).toEqual([[1], [2], [3]]);
    expect(await Promise.all(['r4', 'r5'].map((v) => t.findByEnv?.('PROCWARDEN_RUN', v)))).toEqual([
      [1],
      [2],
    ]);
    expect(calls.sweeps).toEqual([
      ['r1', 'r2', 'r3'],
      ['r4', 'r5'],
    ]);
  });

  it('identity checks are never shared, and a table without environments offers no sweep', async () => {
    const { table, calls } = fakeTable(false);
    const t = new CoalescingTable(table);
    await Promise.all([t.get(5), t.get(5)]);
    expect(calls.get).toBe(2);
    expect(t.findByEnv).toBeUndefined();
    expect(t.sweep).toBeUndefined();
  });
});
