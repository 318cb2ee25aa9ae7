import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TreeMembership } from '../src/containment/index.js';
import { ProcwardenError, terminateTree } from '../src/index.js';
import { Deliverer, Guard } from '../src/kill/index.js';
import { type ProcessInfo, type ProcessTable, ProcfsTable } from '../src/tree/index.js';
import { alive, exists, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());
const table = new ProcfsTable();

describe('never the wrong target', () => {
  it("containment 'none' in a sacrificial parent: the parent and its group survive, the tree is gone", async () => {
    const dir = leaks.trackDir(makeTmp());
    const host = spawn(process.execPath, [fixture('host-none.mjs'), dir], {
      detached: true, // the host leads its own group: the run shares it
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    leaks.track(host.pid);
    let out = '';
    host.stdout.on('data', (d) => (out += d));
    await waitFor(() => out.includes('\n'), { timeoutMs: 20_000, what: 'host report' });
    const report = JSON.parse(out);
    expect(report.result.containment).toBe('none');
    expect(report.result.reason).toBe('cancelled');
    expect(report.hits).toBe(0); // no signal reached the host
    expect(alive(host.pid as number)).toBe(true);
    const hostInfo = await table.get(host.pid as number);
    expect(hostInfo?.pgid).toBe(host.pid); // its group still exists, led by it
    // The run's tree shared that group, and it is gone.
    const pids = readPids(dir);
    expect(alive(pids.get('parent') ?? 0)).toBe(false);
    expect(alive(pids.get('child') ?? 0)).toBe(false);
    expect(exists(join(dir, 'child.done'))).toBe(true);
    host.stdin.end();
    await new Promise((r) => host.once('exit', r));
  });

  it('the deliverer refuses pid 1, ourselves, our ancestors and our own group', async () => {
    const sent: Array<[number, string]> = [];
    const guard = await Guard.load(table);
    const deliverer = new Deliverer(table, guard, (pid, sig) => sent.push([pid, sig]));
    const self = await table.get(process.pid);
    const parent = await table.get(process.ppid);
    const init = await table.get(1);
    for (const info of [self, parent, init]) {
      if (info) expect(await deliverer.toMember(info, 'SIGTERM')).toBe('forbidden');
    }
    if (self) expect(await deliverer.toGroup(self.pgid, [self], 'SIGTERM')).toBe('forbidden');
    expect(sent).toEqual([]);
    expect(deliverer.notes.length).toBeGreaterThan(0);
  });

  it('a recycled pid (same pid, other start time) is never signalled', async () => {
    const sent: Array<[number, string]> = [];
    const child = spawn('sleep', ['30']);
    leaks.track(child.pid);
    const info = await table.get(child.pid as number);
    expect(info).not.toBeNull();
    const deliverer = new Deliverer(table, await Guard.load(table), (pid, sig) => sent.push([pid, sig]));
    if (info) expect(await deliverer.toMember({ ...info, startTime: '1' }, 'SIGKILL')).toBe('gone');
    expect(sent).toEqual([]);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
  });

  it("a member's session is claimed only while its number is not another process's", async () => {
    // A table replayed row by row: the root, then a member in a session of its own, then what is
    // left after the member exited and its late fork was re-parented to init.
    let rows: ProcessInfo[] = [];
    const stub: ProcessTable = {
      name: 'stub',
      list: async () => rows,
      get: async (pid) => rows.find((r) => r.pid === pid) ?? null,
    };
    const row = (pid: number, ppid: number, sid: number, startTime: string, state = 'S'): ProcessInfo => ({
      pid,
      ppid,
      pgid: sid,
      sid,
      startTime,
      state,
      command: 'sh',
    });
    const membership = (first: ProcessInfo[]) => {
      rows = first;
      const m = new TreeMembership(stub, new Guard(), null, true);
      return m.attach(first[0]?.pid ?? 0).then(() => m);
    };
    const root = row(4_000_100, 1, 4_000_100, '100');
    const leader = row(4_000_101, 4_000_100, 4_000_101, '101');
    const late = row(4_000_102, 1, 4_000_101, '102');
    const pids = async (m: TreeMembership) => (await m.scan()).map((p) => p.pid).sort();

    // The founder a zombie (same start time): its session is still its own.
    const kept = await membership([root, leader]);
    expect(await pids(kept)).toEqual([root.pid, leader.pid]);
    rows = [{ ...leader, state: 'Z' }, late];
    expect(await pids(kept)).toEqual([late.pid]);

    // The founder's pid now held by another process (other start time): that session is not the run's.
    const recycled = await membership([root, leader]);
    await recycled.scan();
    rows = [row(leader.pid, 1, leader.pid, '900'), row(4_000_103, 1, leader.pid, '901')];
    expect(await pids(recycled)).toEqual([]);
  });

  it('terminateTree refuses bad targets with a typed error and sends nothing', async () => {
    const sent: number[] = [];
    const send = (pid: number) => sent.push(pid);
    for (const [pid, code] of [
      [0, 'INVALID_PID'],
      [-3, 'INVALID_PID'],
      [1.5, 'INVALID_PID'],
      [1, 'FORBIDDEN_TARGET'],
      [process.pid, 'FORBIDDEN_TARGET'],
      [process.ppid, 'FORBIDDEN_TARGET'],
      [2 ** 22 + 12345, 'NO_SUCH_PROCESS'],
    ] as const) {
      await expect(terminateTree(pid, { send })).rejects.toSatisfy(
        (e: unknown) => e instanceof ProcwardenError && e.code === code,
      );
    }
    expect(sent).toEqual([]);
  });

  it('terminateTree ends an existing tree it did not start, gracefully first', async () => {
    const dir = leaks.trackDir(makeTmp());
    const child = spawn(fixture('parent-exits.sh'), [dir], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    leaks.track(child.pid);
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    await waitFor(() => out.includes('ready'));
    const report = await terminateTree(child.pid as number, { graceMs: 2000 });
    expect(report.escalated).toBe(false);
    expect(report.signalled).toBeGreaterThanOrEqual(2);
    expect(exists(join(dir, 'child.done'))).toBe(true);
    expect(alive(readPids(dir).get('child') ?? 0)).toBe(false);
  });
});
