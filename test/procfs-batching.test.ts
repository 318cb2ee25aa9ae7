import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { ProcfsTable } from '../src/tree/index.js';
import { alive, LeakGuard, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** A sleeping process whose environment holds BENCH_TAG=<tag>. */
function tagged(tag: string): number {
  const child = spawn('sleep', ['30'], { env: { ...process.env, BENCH_TAG: tag }, stdio: 'ignore' });
  if (!child.pid) throw new Error('sleep did not start');
  leaks.track(child.pid);
  return child.pid;
}

async function end(pids: number[]): Promise<void> {
  for (const pid of pids) process.kill(pid, 'SIGKILL');
  await waitFor(() => pids.every((pid) => !alive(pid)), { what: 'the sleeps to end' });
}

describe('ProcfsTable scans asked for in one turn', () => {
  it('share one snapshot and one environment pass, each answer its own', async () => {
    const table = new ProcfsTable();
    const a = tagged('a-1');
    const b = tagged('b-2');
    await waitFor(() => table.getSync(b) !== null && table.getSync(a) !== null);
    // Let both exec sleep: the environment is read from the new image.
    await waitFor(() => table.getSync(a)?.command === 'sleep' && table.getSync(b)?.command === 'sleep');
    const [l1, l2] = await Promise.all([table.list(), table.list()]);
    expect(l1).toBe(l2);
    const [fa, fb, none] = await Promise.all([
      table.findByEnv('BENCH_TAG', 'a-1', { among: l1 }),
      table.findByEnv('BENCH_TAG', 'b-2'),
      table.findByEnv('BENCH_TAG', 'a'),
    ]);
    expect(fa).toEqual([a]);
    expect(fb).toEqual([b]);
    expect(none).toEqual([]);
    await end([a, b]);
  });

  it('bornSince skips environments older than the given process', async () => {
    const table = new ProcfsTable();
    const older = tagged('same');
    await waitFor(() => table.getSync(older)?.command === 'sleep');
    // Start times have clock-tick resolution: make sure the second process is a tick younger.
    await new Promise((r) => setTimeout(r, 50));
    const younger = tagged('same');
    await waitFor(() => table.getSync(younger)?.command === 'sleep');
    const list = await table.list();
    const youngerInfo = list.find((p) => p.pid === younger);
    expect(youngerInfo).toBeDefined();
    const all = await table.findByEnv('BENCH_TAG', 'same', { among: list });
    expect(all.sort()).toEqual([older, younger].sort());
    const since = await table.findByEnv('BENCH_TAG', 'same', { among: list, bornSince: youngerInfo });
    expect(since).toEqual([younger]);
    await end([older, younger]);
  });
});
