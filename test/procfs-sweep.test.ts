import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TreeMembership } from '../src/containment/index.js';
import { Guard } from '../src/kill/index.js';
import {
  type EnvQuery,
  type ProcessInfo,
  type ProcessTable,
  ProcfsTable,
  type Sweep,
} from '../src/tree/index.js';
import { alive, LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

interface FakeProcess {
  pid: number;
  start: number;
  env: string;
  cmdline?: string;
  /** Parent, group and session; default 1, its own pid, its own pid. */
  ppid?: number;
  pgid?: number;
  sid?: number;
}

/** One process's entry in a fake /proc (stat + environ, and cmdline when given). */
function writeProc(root: string, p: FakeProcess): void {
  const dir = join(root, String(p.pid));
  mkdirSync(dir);
  const stat = `${p.pid} (sh) S ${p.ppid ?? 1} ${p.pgid ?? p.pid} ${p.sid ?? p.pid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 ${p.start} 0 0`;
  writeFileSync(join(dir, 'stat'), stat);
  writeFileSync(join(dir, 'environ'), p.env);
  if (p.cmdline !== undefined) writeFileSync(join(dir, 'cmdline'), p.cmdline);
}

/** A fake /proc with the given processes. */
function fakeProc(procs: FakeProcess[]): string {
  const root = leaks.trackDir(makeTmp());
  for (const p of procs) writeProc(root, p);
  writeFileSync(join(root, 'uptime'), '1.0 1.0'); // non-numeric entries are skipped
  return root;
}

describe('procfs sweep', () => {
  it('finds cookie holders in the same pass as the table', async () => {
    const cookie = `sweep-${process.pid}`;
    const child = spawn('sleep', ['30'], { env: { PATH: process.env.PATH, PROCWARDEN_RUN: cookie } });
    leaks.track(child.pid);
    const table = new ProcfsTable();
    await waitFor(() => table.getSync(child.pid ?? 0)?.command === 'sleep');
    const sweep = table.sweepManySync([{ name: 'PROCWARDEN_RUN', value: cookie }])[0] as Sweep;
    expect([...sweep.holders]).toEqual([child.pid]);
    expect(sweep.processes.some((p) => p.pid === child.pid)).toBe(true);
    expect(sweep.processes.some((p) => p.pid === process.pid)).toBe(true);
    child.kill('SIGKILL');
    await waitFor(() => !alive(child.pid ?? 0));
  });

  it('finds a cookie behind an environment larger than its read buffer, and one between two of them', async () => {
    const cookie = `large-${process.pid}`;
    // 100 KiB before the cookie: past the sweep's reused 64 KiB buffer, so the whole block is read.
    const big = spawn('sleep', ['30'], {
      env: { PATH: process.env.PATH, PAD: 'x'.repeat(100 * 1024), PROCWARDEN_RUN: cookie },
    });
    const small = spawn('sleep', ['30'], { env: { PATH: process.env.PATH, PROCWARDEN_RUN: cookie } });
    leaks.track(big.pid);
    leaks.track(small.pid);
    const table = new ProcfsTable();
    for (const c of [big, small]) await waitFor(() => table.getSync(c.pid ?? 0)?.command === 'sleep');
    const sweep = table.sweepManySync([{ name: 'PROCWARDEN_RUN', value: cookie }])[0] as Sweep;
    expect([...sweep.holders].sort()).toEqual([big.pid, small.pid].sort());
    for (const c of [big, small]) c.kill('SIGKILL');
    await waitFor(() => !alive(big.pid ?? 0) && !alive(small.pid ?? 0));
  });

  it('hands each holder to onHolder the moment it is read, before the sweep ends', async () => {
    const cookie = `onsight-${process.pid}`;
    const child = spawn('sleep', ['30'], { env: { PATH: process.env.PATH, PROCWARDEN_RUN: cookie } });
    leaks.track(child.pid);
    const table = new ProcfsTable();
    await waitFor(() => table.getSync(child.pid ?? 0)?.command === 'sleep');
    const seen: ProcessInfo[] = [];
    const sweep = table.sweepManySync([
      // What a freeze does there: the holder is stopped while the sweep is still reading.
      {
        name: 'PROCWARDEN_RUN',
        value: cookie,
        onHolder: (p) => seen.push(p) && process.kill(p.pid, 'SIGSTOP'),
      },
    ])[0] as Sweep;
    expect(seen.map((p) => p.pid)).toEqual([child.pid]);
    expect(seen[0]?.startTime).toBe(table.getSync(child.pid ?? 0)?.startTime);
    expect([...sweep.holders]).toEqual([child.pid]);
    await waitFor(() => table.getSync(child.pid ?? 0)?.state === 'T', { what: 'holder stopped' });
    child.kill('SIGKILL');
    await waitFor(() => !alive(child.pid ?? 0));
  });

  it('a holder stopped on sight has the pids after it read at once: what it forked as it was stopped', () => {
    // Each stop lands a moment after a fork: the child took the next free pid (61 is free, 64 is a
    // thread of 60's, which is no process of its own), after the listing, before any re-listing.
    const root = fakeProc([
      { pid: 20, start: 100, env: 'A=1\0' },
      { pid: 60, start: 100, env: 'PROCWARDEN_RUN=h\0' },
    ]);
    const fork = (pid: number, tgid = pid) => {
      writeProc(root, { pid, start: 101, env: 'PROCWARDEN_RUN=h\0' });
      writeFileSync(join(root, String(pid), 'status'), `Name:\tsh\nTgid:\t${tgid}\n`);
    };
    const stopped: number[] = [];
    const onHolder = (p: ProcessInfo) => {
      stopped.push(p.pid);
      if (p.pid === 60) fork(62);
      if (p.pid === 62) fork(63);
      if (p.pid === 63) fork(64, 60); // a thread: /proc has an entry for it, which no listing shows
    };
    const [sweep] = new ProcfsTable(root).sweepManySync([{ name: 'PROCWARDEN_RUN', value: 'h', onHolder }]);
    expect(stopped).toEqual([60, 62, 63]);
    expect([...(sweep?.holders ?? [])].sort()).toEqual([60, 62, 63]);
    expect(sweep?.vanished).toBe(0);
  });

  it('hands processes and holders on in the order of their pids, though it reads the newest first', () => {
    // Members are signalled one by one in this order: a parent before the children it forked.
    const root = fakeProc([
      { pid: 70, start: 100, env: 'PROCWARDEN_RUN=o\0' },
      { pid: 71, start: 101, env: 'PROCWARDEN_RUN=o\0', ppid: 70 },
      { pid: 75, start: 102, env: 'A=1\0' },
      { pid: 79, start: 103, env: 'PROCWARDEN_RUN=o\0', ppid: 71 },
    ]);
    const read: number[] = [];
    const table = new ProcfsTable(root);
    const getSync = table.getSync.bind(table);
    table.getSync = (pid: number) => {
      read.push(pid);
      return getSync(pid);
    };
    const [sweep] = table.sweepManySync([{ name: 'PROCWARDEN_RUN', value: 'o' }]);
    expect(read.slice(0, 4)).toEqual([79, 75, 71, 70]);
    expect(sweep?.processes.map((p) => p.pid)).toEqual([70, 71, 75, 79]);
    expect([...(sweep?.holders ?? [])]).toEqual([70, 71, 79]);
  });

  it('matches whole entries only, the last one even without its NUL', () => {
    const root = fakeProc([
      { pid: 10, start: 5, env: 'A=1\0PROCWARDEN_RUN=abc\0' },
      { pid: 11, start: 5, env: 'A=1\0PROCWARDEN_RUN=abc' },
      { pid: 12, start: 5, env: 'XPROCWARDEN_RUN=abc\0PROCWARDEN_RUN=abcd\0' },
    ]);
    const sweep = new ProcfsTable(root).sweepManySync([{ name: 'PROCWARDEN_RUN', value: 'abc' }])[0] as Sweep;
    expect([...sweep.holders].sort()).toEqual([10, 11]);
    expect(sweep.processes.map((p) => p.pid).sort()).toEqual([10, 11, 12]);
  });

  it('answers many queries in one pass, each with its own value and floor', () => {
    const root = fakeProc([
      { pid: 30, start: 100, env: 'PROCWARDEN_RUN=a\0' },
      { pid: 31, start: 300, env: 'PROCWARDEN_RUN=a\0' },
      { pid: 32, start: 300, env: 'PROCWARDEN_RUN=b\0' },
      { pid: 33, start: 50, env: 'PROCWARDEN_RUN=b\0' },
    ]);
    const table = new ProcfsTable(root);
    const [a, b] = table.sweepManySync([
      { name: 'PROCWARDEN_RUN', value: 'a', firstHolder: table.getSync(31) },
      { name: 'PROCWARDEN_RUN', value: 'b' },
    ]);
    expect([...(a?.holders ?? [])]).toEqual([31]);
    expect([...(b?.holders ?? [])].sort()).toEqual([32, 33]);
    expect(a?.processes).toBe(b?.processes);
  });

  it('reads no environment in the session the caller claims, while its founder still leads it', () => {
    // 40 founded session 40; 41 is in it; 42 left it (setsid) and holds the cookie.
    const procs = [
      { pid: 40, start: 100, env: 'PROCWARDEN_RUN=s\0' },
      { pid: 41, start: 200, env: 'PROCWARDEN_RUN=s\0', ppid: 40, pgid: 40, sid: 40 },
      { pid: 42, start: 300, env: 'PROCWARDEN_RUN=s\0', ppid: 41 },
    ];
    const holders = (root: string, query: Partial<EnvQuery>) => {
      const table = new ProcfsTable(root);
      const sweep = table.sweepManySync([{ name: 'PROCWARDEN_RUN', value: 's', ...query }])[0] as Sweep;
      expect(sweep.processes.map((p) => p.pid).sort()).toEqual(
        procs.map((p) => p.pid).filter((pid) => table.getSync(pid) !== null),
      );
      return [...sweep.holders].sort();
    };
    const root = fakeProc(procs);
    const session = { sid: 40, startTime: '100' };
    expect(holders(root, {})).toEqual([40, 41, 42]);
    expect(holders(root, { session })).toEqual([42]);
    // Recycled: pid 40 is another process now, its session someone else's: read as usual.
    expect(holders(root, { session: { sid: 40, startTime: '999' } })).toEqual([40, 41, 42]);
    // A freeze stops holders on sight: it reads them all.
    const seen: number[] = [];
    expect(holders(root, { session, onHolder: (p) => seen.push(p.pid) })).toEqual([40, 41, 42]);
    expect(seen.sort()).toEqual([40, 41, 42]);
    // The founder gone: its number proves nothing any more (a stranger's setsid may hold it).
    rmSync(join(root, '40'), { recursive: true });
    expect(holders(root, { session })).toEqual([41, 42]);
  });

  it("one run's session is still read for another in a shared pass: a daemon may pass its client's environment on", () => {
    // Run a's root (40) is a build daemon; run b's client (50) had it start 41 with b's
    // environment. 41 sits in a's session and is b's by its cookie only.
    const me = process.pid;
    const root = fakeProc([
      { pid: 40, start: 100, env: 'PROCWARDEN_RUN=a\0', ppid: me },
      { pid: 41, start: 200, env: 'PROCWARDEN_RUN=b\0', ppid: 40, pgid: 40, sid: 40 },
      { pid: 50, start: 150, env: 'PROCWARDEN_RUN=b\0', ppid: me },
    ]);
    const table = new ProcfsTable(root);
    const query = (value: string, first: ProcessInfo) => ({
      name: 'PROCWARDEN_RUN',
      value,
      firstHolder: first,
      session: { sid: first.pid, startTime: first.startTime },
    });
    const a = query('a', table.getSync(40) as ProcessInfo);
    const b = query('b', table.getSync(50) as ProcessInfo);
    const alone = table.sweepManySync([b])[0] as Sweep;
    const [, shared] = table.sweepManySync([a, b]);
    expect([...alone.holders]).toContain(41);
    expect([...(shared?.holders ?? [])]).toContain(41);
  });

  it('reads everything when the founder does not lead the session, or is recycled while the sweep reads', () => {
    const root = fakeProc([
      { pid: 40, start: 100, env: 'PROCWARDEN_RUN=s\0', sid: 7 }, // read before its setsid
      { pid: 41, start: 200, env: 'PROCWARDEN_RUN=s\0', ppid: 40, pgid: 40, sid: 40 },
    ]);
    const query = { name: 'PROCWARDEN_RUN', value: 's', session: { sid: 40, startTime: '100' } };
    expect([...(new ProcfsTable(root).sweepManySync([query])[0]?.holders ?? [])].sort()).toEqual([40, 41]);

    const leads = fakeProc([
      { pid: 40, start: 100, env: 'PROCWARDEN_RUN=s\0' },
      { pid: 41, start: 200, env: 'PROCWARDEN_RUN=s\0', ppid: 40, pgid: 40, sid: 40 },
    ]);
    // Pid 40 is someone else from its second read on: after the check at the start, before the end.
    class Recycled extends ProcfsTable {
      private reads = 0;
      override getSync(pid: number): ProcessInfo | null {
        const info = super.getSync(pid);
        return pid === 40 && info && ++this.reads > 1 ? { ...info, startTime: '999' } : info;
      }
    }
    const sweep = new Recycled(leads).sweepManySync([query])[0] as Sweep;
    expect([...sweep.holders]).toContain(41);
  });

  it('does not read the environment of processes older than the first holder', () => {
    const root = fakeProc([
      { pid: 20, start: 100, env: 'PROCWARDEN_RUN=r1\0' },
      { pid: 21, start: 500, env: 'PROCWARDEN_RUN=r1\0' },
      { pid: 22, start: 700, env: 'PROCWARDEN_RUN=r1\0' },
    ]);
    const table = new ProcfsTable(root);
    const first = table.getSync(21);
    const sweep = table.sweepManySync([
      { name: 'PROCWARDEN_RUN', value: 'r1', firstHolder: first },
    ])[0] as Sweep;
    expect([...sweep.holders].sort()).toEqual([21, 22]);
    expect(sweep.processes).toHaveLength(3);
  });

  it('leaves out a process older than the first holder once its /proc entry proves it the same, and reads a changed entry again', async () => {
    const root = fakeProc([
      { pid: 50, start: 100, env: '' },
      { pid: 51, start: 500, env: 'PROCWARDEN_RUN=r2\0' },
    ]);
    const table = new ProcfsTable(root);
    const holder = table.getSync(51);
    const query = { name: 'PROCWARDEN_RUN', value: 'r2', firstHolder: holder, olderThan: holder };
    const pids = () => (table.sweepManySync([query])[0] as Sweep).processes.map((p) => p.pid).sort();
    // First sweep: read (its start is what makes it old); second: its entry read before its stat
    // file, which still shows the same start; from then on the entry alone vouches for it.
    expect(pids()).toEqual([50, 51]);
    expect(pids()).toEqual([50, 51]);
    expect(pids()).toEqual([51]);
    // Another process under pid 50: a new entry (another inode), read again, and found.
    rmSync(join(root, '50'), { recursive: true });
    await new Promise((r) => setTimeout(r, 5));
    writeProc(root, { pid: 50, ppid: 51, start: 600, env: 'PROCWARDEN_RUN=r2\0' });
    const sweep = table.sweepManySync([query])[0] as Sweep;
    expect(sweep.processes.map((p) => p.pid).sort()).toEqual([50, 51]);
    expect([...sweep.holders].sort()).toEqual([50, 51]);
    // Without `olderThan` nothing is left out.
    for (let i = 0; i < 3; i++) table.sweepManySync([query]);
    const all = table.sweepManySync([
      { name: 'PROCWARDEN_RUN', value: 'r2', firstHolder: holder },
    ])[0] as Sweep;
    expect(all.processes).toHaveLength(2);
  });

  it('on the real /proc: old processes left out after two sweeps, our own ancestry always in, every holder found', async () => {
    const cookie = `old-${process.pid}`;
    const older = spawn('sleep', ['30'], { env: { PATH: process.env.PATH } });
    leaks.track(older.pid);
    const table = new ProcfsTable();
    await waitFor(() => table.getSync(older.pid ?? 0)?.command === 'sleep');
    // Start times tick at 100 Hz: the holder must start in a later tick than the older sleep.
    await new Promise((r) => setTimeout(r, 30));
    const holder = spawn('sleep', ['30'], { env: { PATH: process.env.PATH, PROCWARDEN_RUN: cookie } });
    leaks.track(holder.pid);
    await waitFor(() => table.getSync(holder.pid ?? 0)?.command === 'sleep');
    const first = table.getSync(holder.pid ?? 0);
    const query = { name: 'PROCWARDEN_RUN', value: cookie, firstHolder: first, olderThan: first };
    const sweeps = [1, 2, 3].map(() => table.sweepManySync([query])[0] as Sweep);
    const has = (s: Sweep, pid: number | undefined) => s.processes.some((p) => p.pid === pid);
    expect(sweeps.map((s) => has(s, older.pid))).toEqual([true, true, false]);
    for (const s of sweeps) {
      expect([...s.holders]).toEqual([holder.pid]);
      expect(has(s, process.pid)).toBe(true);
      expect(has(s, process.ppid)).toBe(true);
    }
    // What the guard sees: our whole ancestry, up to PID 1.
    const guard = new Guard();
    guard.refreshFrom(sweeps[2]?.processes ?? []);
    expect(guard.isOwnOrAncestor(process.ppid)).toBe(true);
    for (const c of [older, holder]) c.kill('SIGKILL');
    await waitFor(() => !alive(older.pid ?? 0) && !alive(holder.pid ?? 0));
  });

  it('a member older than the root (moved into its cgroup) keeps its older child, session member and their young descendants', async () => {
    const root = fakeProc([
      { pid: 10, ppid: 1, pgid: 10, sid: 10, start: 100, env: '', cmdline: 'sh\0' }, // moved into the run's cgroup
      { pid: 11, ppid: 10, pgid: 10, sid: 10, start: 150, env: '', cmdline: 'sh\0' }, // its child, older than the run
      { pid: 12, ppid: 1, pgid: 12, sid: 10, start: 160, env: '', cmdline: 'sh\0' }, // in its session, re-parented
      { pid: 13, ppid: 11, pgid: 10, sid: 10, start: 600, env: '', cmdline: 'sh\0' }, // young, under the old child
      { pid: 14, ppid: 1, pgid: 14, sid: 14, start: 50, env: '', cmdline: 'sh\0' }, // older than all: not the run's
      { pid: 20, ppid: 1, pgid: 20, sid: 20, start: 500, env: 'PROCWARDEN_RUN=c\0', cmdline: 'sh\0' }, // the root
    ]);
    const table = new ProcfsTable(root);
    const membership = new TreeMembership(table, new Guard(), 'c', false);
    await membership.attach(20);
    // Scans that prove the old processes old, so that they could be left out.
    for (let i = 0; i < 3; i++) expect((await membership.scan()).map((p) => p.pid)).toEqual([20]);
    membership.remember([table.getSync(10) as ProcessInfo]); // what a cgroup's list now shows
    for (let i = 0; i < 3; i++) {
      const pids = (await membership.scan()).map((p) => p.pid).sort((a, b) => a - b);
      expect(pids).toEqual([10, 11, 12, 13, 20]);
    }
  });

  it('an empty environment without a command line (between two execs) is unsettled, not cookie-less', () => {
    const root = fakeProc([
      { pid: 40, start: 5, env: '', cmdline: '' }, // mid-exec: the kernel shows neither yet
      { pid: 41, start: 5, env: '', cmdline: 'sleep\x0030\x00' }, // env -i: an environment of its own
      { pid: 42, start: 5, env: 'PROCWARDEN_RUN=x\0', cmdline: 'sh\0' },
    ]);
    const sweep = new ProcfsTable(root).sweepManySync([{ name: 'PROCWARDEN_RUN', value: 'x' }])[0] as Sweep;
    expect([...sweep.holders]).toEqual([42]);
    expect(sweep.unsettled).toBe(1);
    expect(sweep.processes.map((p) => p.pid).sort()).toEqual([40, 41, 42]);
  });

  it('an empty tree is not believed while a process is between two execs', async () => {
    // The root is gone; a re-parented fork in a session of its own is mid-exec for three sweeps
    // (its cookie unreadable), then shows the cookie.
    const late: ProcessInfo = {
      pid: 4_000_301,
      ppid: 1,
      pgid: 4_000_301,
      sid: 4_000_301,
      startTime: '301',
      state: 'S',
      command: 'sleep',
    };
    let sweeps = 0;
    const table = (settlesAfter: number): ProcessTable => ({
      name: 'stub',
      list: async () => [late],
      get: async (pid) => (pid === late.pid ? late : null),
      sweep: async () => {
        sweeps++;
        const settled = sweeps > settlesAfter;
        return {
          processes: [late],
          holders: new Set(settled ? [late.pid] : []),
          vanished: 0,
          unsettled: settled ? 0 : 1,
        };
      },
    });
    const notes: string[] = [];
    const settling = new TreeMembership(table(3), new Guard(), 'c1', true, notes);
    expect((await settling.scan()).map((p) => p.pid)).toEqual([late.pid]);
    expect(notes).toEqual([]);

    // One that never settles: the scan still ends, and says what it could not confirm.
    sweeps = 0;
    const stuck = new TreeMembership(table(Number.POSITIVE_INFINITY), new Guard(), 'c1', true, notes);
    expect(await stuck.scan()).toEqual([]);
    expect(notes.join('\n')).toContain('between two execs');
  });

  it('an entry that vanishes mid-scan is skipped, not an error', () => {
    const root = fakeProc([{ pid: 30, start: 1, env: '' }]);
    mkdirSync(join(root, '31')); // listed, but its stat is gone
    expect(new ProcfsTable(root).listSync().map((p) => p.pid)).toEqual([30]);
    expect(new ProcfsTable(root).getSync(31)).toBeNull();
  });
});

describe('procfs: which signals a process ignores', () => {
  it('reads SigIgn: a real shell that traps SIGINT with "" ignores it, not SIGTERM; a gone pid is null', async () => {
    const child = spawn('sh', ['-c', `trap '' INT; echo ready; exec sleep 30`], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    leaks.track(child.pid);
    let out = '';
    child.stdout?.on('data', (c: Buffer) => (out += c));
    await waitFor(() => out.includes('ready'));
    const table = new ProcfsTable();
    const pid = child.pid ?? 0;
    expect(table.ignores(pid, 2)).toBe(true);
    expect(table.ignores(pid, 15)).toBe(false);
    const reaped = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await reaped;
    expect(table.ignores(pid, 2)).toBe(null);
  });

  it('bits above 32 and out-of-range numbers', () => {
    const root = fakeProc([{ pid: 7, start: 1, env: '' }]);
    // SIGRTMIN+30 (signal 64) is the highest bit of the mask.
    writeFileSync(
      join(root, '7', 'status'),
      'Name:\tx\nSigBlk:\t0000000000000000\nSigIgn:\t8000000000000002\n',
    );
    const table = new ProcfsTable(root);
    expect(table.ignores(7, 64)).toBe(true);
    expect(table.ignores(7, 2)).toBe(true);
    expect(table.ignores(7, 1)).toBe(false);
    expect(table.ignores(7, 0)).toBe(null);
    expect(table.ignores(7, 65)).toBe(null);
  });
});

describe('a zombie in the table', () => {
  /** A zombie leader whose task directory shows a thread still sleeping, counting `threads`. */
  function zombieWithThread(threads: number): string {
    const root = leaks.trackDir(makeTmp('pw-fakeproc-'));
    const stat = (pid: number, state: string) =>
      `${pid} (worker) ${state} 1 500 500 0 -1 0 0 0 0 0 0 0 0 0 20 0 ${threads} 0 4242 0 0`;
    mkdirSync(join(root, '500', 'task', '501'), { recursive: true });
    mkdirSync(join(root, '500', 'task', '500'), { recursive: true });
    writeFileSync(join(root, '500', 'stat'), stat(500, 'Z'));
    writeFileSync(join(root, '500', 'task', '500', 'stat'), stat(500, 'Z'));
    writeFileSync(join(root, '500', 'task', '501', 'stat'), stat(501, 'S'));
    return root;
  }

  it('that counts more threads than itself is alive as the thread still running', async () => {
    const info = await new ProcfsTable(zombieWithThread(2)).get(500);
    expect(info?.state).toBe('S');
  });

  it('that counts one thread, itself, is dead: its task directory is not read', async () => {
    // The kernel never shows this pair (a live thread is counted); the fake shows the read is spared.
    const info = await new ProcfsTable(zombieWithThread(1)).get(500);
    expect(info?.state).toBe('Z');
  });
});
