import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ProcwardenError } from '../src/index.js';
import treeKill, { treeKill as named } from '../src/tree-kill.js';
import { alive, exists, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** Starts a fixture the way a tree-kill user's program would, and waits until it is ready. */
async function startTree(script: string) {
  const dir = leaks.trackDir(makeTmp());
  const child = spawn(fixture(script), [dir], { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  leaks.track(child.pid);
  await waitFor(() => out.includes('ready'), { what: `${script} ready` });
  return { pid: child.pid ?? 0, dir, pids: [...readPids(dir).values()] };
}

/** Calls treeKill with a callback; resolves with what the callback got and how often it was called. */
function callTreeKill(...args: [number, (string | number)?]) {
  return new Promise<{ error: Error | undefined; calls: number }>((resolve) => {
    let calls = 0;
    const callback = (error?: Error) => {
      calls++;
      // A second call would arrive after this; the wait lets it count.
      setTimeout(() => resolve({ error, calls }), 50);
    };
    if (args.length === 1) treeKill(args[0], callback);
    else treeKill(args[0], args[1], callback);
  });
}

describe('procwarden/tree-kill: tree-kill’s call, procwarden’s sequence', () => {
  it('treeKill(pid, callback): SIGTERM to the whole tree, the callback once, when it is extinct', async () => {
    const { pid, dir, pids } = await startTree('parent-exits.sh');
    expect(pids.length).toBe(2);
    const { error, calls } = await callTreeKill(pid);
    expect(error).toBeUndefined();
    expect(calls).toBe(1);
    for (const p of pids) expect(alive(p)).toBe(false);
    // The descendant got the graceful signal (it writes this marker on SIGTERM).
    expect(exists(join(dir, 'child.done'))).toBe(true);
    expect(named).toBe(treeKill);
  });

  it('a descendant that ignores the signal gets SIGKILL after the grace; tree-kill would call back at once and leave it', async () => {
    const { pid, pids } = await startTree('orphan-ignores-term.sh');
    const { error } = await callTreeKill(pid, 'SIGTERM');
    expect(error).toBeUndefined();
    for (const p of pids) expect(alive(p)).toBe(false);
  });

  it('signals by name, short name or number, as tree-kill passes them to process.kill', async () => {
    for (const signal of ['SIGHUP', 'USR1', 15]) {
      const { pid, pids } = await startTree('parent-exits.sh');
      const { error } = await callTreeKill(pid, signal);
      expect(error).toBeUndefined();
      for (const p of pids) expect(alive(p)).toBe(false);
    }
  });

  it('errors where tree-kill errors: a pid that is not a number, to the callback or thrown', async () => {
    const { error } = await callTreeKill('abc' as unknown as number);
    expect(error?.message).toBe('pid must be a number');
    expect(() => treeKill('abc' as unknown as number)).toThrow('pid must be a number');
  });

  it('an unknown signal is an error, before anything is signalled', async () => {
    const { pid, pids } = await startTree('parent-exits.sh');
    const { error } = await callTreeKill(pid, 'SIGNOPE');
    expect((error as ProcwardenError).code).toBe('INVALID_SIGNAL');
    for (const p of pids) expect(alive(p)).toBe(true);
    expect(() => treeKill(pid, 'SIGNOPE')).toThrow(ProcwardenError);
    for (const p of pids) expect(alive(p)).toBe(true);
    await callTreeKill(pid);
  });

  it('a pid that is already gone calls back without an error, as tree-kill does (the tree is extinct)', async () => {
    const child = spawn('true');
    await new Promise((resolve) => child.on('exit', resolve));
    const { error, calls } = await callTreeKill(child.pid ?? 0);
    expect(error).toBeUndefined();
    expect(calls).toBe(1);
  });

  it('refuses what tree-kill would hit: pid ≤ 0 (a process group), PID 1, itself, its parent', async () => {
    expect(() => treeKill(0)).toThrow(ProcwardenError);
    expect(() => treeKill(-1)).toThrow(ProcwardenError);
    expect(() => treeKill(process.pid)).toThrow(ProcwardenError);
    for (const [pid, code] of [
      [0, 'INVALID_PID'],
      [-5, 'INVALID_PID'],
      [1, 'FORBIDDEN_TARGET'],
      [process.pid, 'FORBIDDEN_TARGET'],
      [process.ppid, 'FORBIDDEN_TARGET'],
    ] as const) {
      const { error, calls } = await callTreeKill(pid);
      expect(error).toBeInstanceOf(ProcwardenError);
      expect((error as ProcwardenError).code).toBe(code);
      expect(calls).toBe(1);
    }
    expect(alive(process.ppid)).toBe(true);
  });
});
