import { describe, expect, it } from 'vitest';
import { type BatchEnvTable, CoalescingTable, type ProcessInfo } from '../src/tree/index.js';

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
  const calls = { list: 0, get: 0, env: [] as string[][] };
  let generation = 0;
  const table: BatchEnvTable = {
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
          async findByEnvValues(_name: string, values: ReadonlySet<string>) {
            calls.env.push([...values]);
            return new Map([...values].map((v, i) => [v, [i + 1]]));
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

  it('cookie sweeps of many runs are one pass; each caller gets its own answer', async () => {
    const { table, calls } = fakeTable();
    const t = new CoalescingTable(table);
    const answers = await Promise.all(['r1', 'r2', 'r3'].map((v) => t.findByEnv?.('PROCWARDEN_RUN', v)));
    expect(calls.env).toEqual([['r1', 'r2', 'r3']]);
    expect(answers).toEqual([[1], [2], [3]]);
  });

  it('identity checks are never shared, and a table without environments offers no sweep', async () => {
    const { table, calls } = fakeTable(false);
    const t = new CoalescingTable(table);
    await Promise.all([t.get(5), t.get(5)]);
    expect(calls.get).toBe(2);
    expect(t.findByEnv).toBeUndefined();
  });
});
