import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TreeMembership } from '../src/containment/index.js';
import { ProcwardenError, type RunSpec, reap, Supervisor, terminateTree } from '../src/index.js';
import { Guard } from '../src/kill/index.js';
import {
  type CommandRunner,
  execRunner,
  exists,
  isGone,
  type ProcessInfo,
  type ProcessTable,
  ProcfsTable,
  PsTable,
  parsePs,
  platformTable,
} from '../src/tree/index.js';
import { journalFiles } from './helpers/host.js';
import { alive, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const MACOS = readFileSync(fixture('recorded/ps-macos.txt'), 'utf8');

/** A runner that answers from recorded output and remembers what it was asked. */
function recorded(answer: (args: readonly string[]) => { code: number | null; stdout: string }) {
  const calls: string[][] = [];
  const runner: CommandRunner = async (file, args) => {
    calls.push([file, ...args]);
    return { stderr: '', ...answer(args) };
  };
  return { runner, calls };
}

/** A recorded macOS ps: the listing, or the rows of the pids asked for with -p. */
function recordedMacos() {
  const lines = MACOS.split('\n');
  return recorded((args) => {
    if (args.includes('-A')) return { code: 0, stdout: MACOS };
    const wanted = (args.at(-1) ?? '').split(',');
    const rows = lines.filter((l) => wanted.includes(l.trim().split(/\s+/)[0] ?? ''));
    // Like macOS ps: exit 1 when a listed pid does not exist, the others still printed.
    return { code: rows.length === wanted.length ? 0 : 1, stdout: rows.join('\n') };
  });
}

describe('ps process table (macOS/BSD)', () => {
  it('parses recorded macOS output: paths with spaces, one-digit hours, every state', () => {
    const rows = parsePs(MACOS);
    expect(rows).toHaveLength(10);
    expect(rows[3]).toEqual({
      pid: 4077,
      ppid: 4051,
      pgid: 4051,
      sid: -1,
      startTime: 'Tue Nov 24 19:44:05 2026',
      state: 'S',
      command:
        '/Applications/Google Chrome.app/Contents/Frameworks/Google Chrome Helper (Renderer).app/Contents/MacOS/Google Chrome Helper (Renderer)',
    });
    expect(rows.find((r) => r.pid === 9188)?.startTime).toBe('Mon Nov 30 0:02:07 2026');
    expect(rows.map((r) => r.state).join('')).toBe('SSSSSRSTZU');
    expect(isGone(rows.find((r) => r.pid === 9192))).toBe(true);
    expect(parsePs('garbage\n\n  12 x\n')).toEqual([]);
  });

  it('a pid with two rows (a name with a newline forging a row of a stranger) is dropped, both rows', () => {
    const forged =
      '  400     1   400 Mon Nov 30 09:00:00 2026 Ss   launchd-helper\n' +
      '50001 50000 50000 Mon Nov 30 10:00:00 2026 S    /tmp/x\n  400 50001 400 Mon Nov 30 09:00:00 2026 Ss y\n';
    expect(parsePs(forged).map((r) => r.pid)).toEqual([50001]);
  });

  it('a forged row hides no process from the table: pids printed twice are read again without names', async () => {
    // 50001 names itself "/tmp/x\n<a row>": once with the pid of launchd-helper (400), once with
    // its own pid, to hide itself. The rows read again carry no name, so they cannot be forged.
    const forged =
      '  400     1   400 Mon Nov 30 09:00:00 2026 Ss   launchd-helper\n' +
      '50001 50000 50000 Mon Nov 30 10:00:00 2026 S    /tmp/x\n  400 50001 400 Mon Nov 30 09:00:00 2026 Ss y\n' +
      '50002 50000 50000 Mon Nov 30 10:00:01 2026 S    /tmp/y\n50002 1 50002 Mon Nov 30 08:00:00 2026 S z\n';
    const again =
      '  400     1   400 Mon Nov 30 09:00:00 2026 Ss\n50002 50000 50000 Mon Nov 30 10:00:01 2026 S\n';
    const { runner, calls } = recorded((args) =>
      args.includes('-A') ? { code: 0, stdout: forged } : { code: 0, stdout: again },
    );
    const rows = await new PsTable(runner).list();
    expect(calls[1]).toEqual(['ps', '-ww', '-o', 'pid=,ppid=,pgid=,lstart=,stat=', '-p', '400,50002']);
    expect(rows.map((r) => [r.pid, r.ppid, r.pgid, r.startTime, r.command])).toEqual([
      [50001, 50000, 50000, 'Mon Nov 30 10:00:00 2026', '/tmp/x'],
      [400, 1, 400, 'Mon Nov 30 09:00:00 2026', '?'],
      [50002, 50000, 50000, 'Mon Nov 30 10:00:01 2026', '?'],
    ]);
    expect(calls).toHaveLength(2);
  });

  it('a start time printed as "-" (a zombie on FreeBSD and macOS) is a row, not an unreadable line', async () => {
    const zombie = ' 9192  9188  9188 -                        Z+   (sh)\n';
    expect(parsePs(zombie)).toEqual([
      { pid: 9192, ppid: 9188, pgid: 9188, sid: -1, startTime: '-', state: 'Z', command: '(sh)' },
    ]);
    const { runner } = recorded(() => ({ code: 0, stdout: zombie }));
    expect(isGone(await new PsTable(runner).get(9192))).toBe(true);
  });

  it('a COLUMNS set in the host does not reach ps, and ps is asked for lines of any width', async () => {
    const before = process.env.COLUMNS;
    process.env.COLUMNS = '20';
    try {
      const seen: (string | undefined)[] = [];
      const runner: CommandRunner = async (file, args, env) => {
        seen.push(env?.COLUMNS);
        return execRunner(file, args, env);
      };
      const me = await new PsTable(runner).get(process.pid);
      expect(me?.pid).toBe(process.pid);
      expect(seen).toEqual([undefined]);
    } finally {
      if (before === undefined) delete process.env.COLUMNS;
      else process.env.COLUMNS = before;
    }
  });

  it('a command named with many blanks is read at once, trailing blanks trimmed', () => {
    // Any process can name itself so; the old pattern took 3 s for this one row.
    const name = `a${' '.repeat(60_000)}b`;
    const t = performance.now();
    const rows = parsePs(`  123     1   123 Wed Dec  2 04:07:19 2026 S    ${name}   \n`);
    expect(performance.now() - t).toBeLessThan(1000);
    expect(rows.map((r) => r.command)).toEqual([name]);
  });

  it('asks ps once per snapshot, with the documented columns', async () => {
    const { runner, calls } = recorded(() => ({ code: 0, stdout: MACOS }));
    const list = await new PsTable(runner).list();
    expect(list).toHaveLength(10);
    expect(calls).toEqual([['ps', '-ww', '-A', '-o', 'pid=,ppid=,pgid=,lstart=,stat=,comm=']]);
  });

  it('get(pid) reads one process; ps exiting 1 with nothing printed means "no such process"', async () => {
    const line = MACOS.split('\n').find((l) => l.includes(' 9191 ')) ?? '';
    const { runner, calls } = recorded((args) =>
      args.includes('9191') ? { code: 0, stdout: `${line}\n` } : { code: 1, stdout: '' },
    );
    const table = new PsTable(runner);
    expect(await table.get(9191)).toMatchObject({ pid: 9191, state: 'T', command: 'vim' });
    expect(await table.get(4242)).toBeNull();
    expect(await table.get(-3)).toBeNull();
    expect(calls[0]).toEqual(['ps', '-ww', '-o', 'pid=,ppid=,pgid=,lstart=,stat=,comm=', '-p', '9191']);
    expect(calls).toHaveLength(2);
  });

  it('reads asked for in one turn share one ps call: a batched -p list, or the snapshot a list takes', async () => {
    const { runner, calls } = recordedMacos();
    const table = new PsTable(runner);
    const [vim, chrome, none] = await Promise.all([table.get(9191), table.get(4051), table.get(4242)]);
    expect(vim).toMatchObject({ pid: 9191, command: 'vim', startTime: 'Mon Nov 30 0:02:08 2026' });
    expect(chrome?.pid).toBe(4051);
    expect(none).toBeNull();
    expect(calls).toEqual([
      ['ps', '-ww', '-o', 'pid=,ppid=,pgid=,lstart=,stat=,comm=', '-p', '9191,4051,4242'],
    ]);

    calls.length = 0;
    const [list, one] = await Promise.all([table.list(), table.get(9190)]);
    expect(list).toHaveLength(10);
    expect(one?.command).toBe('sleep');
    expect(calls).toEqual([['ps', '-ww', '-A', '-o', 'pid=,ppid=,pgid=,lstart=,stat=,comm=']]);

    // A read asked after an answer came back is a fresh call: nobody is given an older view.
    calls.length = 0;
    await table.get(9191);
    await table.get(9191);
    expect(calls).toHaveLength(2);
  });

  it('getSoon: reads deferred in one window share a call; one let go is never read; a read made at once takes them along', async () => {
    const { runner, calls } = recordedMacos();
    const table = new PsTable(runner);
    // Let go before the window ends: no call at all.
    const dropped = table.getSoon(9191, 5);
    table.letGo(9191);
    expect(await dropped).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(calls).toEqual([]);

    // Two deferred in one window (the second joins the first's), one of them let go: one call.
    const vim = table.getSoon(9191, 5);
    const chrome = table.getSoon(4051, 5);
    const gone = table.getSoon(4242, 5);
    table.letGo(4051);
    expect(await chrome).toBeUndefined();
    expect((await vim)?.command).toBe('vim');
    expect(await gone).toBeNull();
    expect(calls).toEqual([['ps', '-ww', '-o', 'pid=,ppid=,pgid=,lstart=,stat=,comm=', '-p', '9191,4242']]);

    // A read made at once takes the deferred along, and hurry() makes it now: one call each, no wait.
    calls.length = 0;
    const later = table.getSoon(9191, 60_000);
    expect((await table.get(4051))?.pid).toBe(4051);
    expect((await later)?.pid).toBe(9191);
    const hurried = table.getSoon(9190, 60_000);
    table.hurry(9190);
    expect((await hurried)?.command).toBe('sleep');
    expect(calls.map((c) => c.at(-1))).toEqual(['9191,4051', '9190']);
  });

  it('getSoon: a read that fails fails the deferred reads it answers', async () => {
    const { runner } = recorded(() => ({ code: 2, stdout: '' }));
    const table = new PsTable(runner);
    await expect(table.getSoon(9191, 1)).rejects.toMatchObject({ code: 'UNSUPPORTED_PLATFORM' });
  });

  it('ancestry is one snapshot: the chain up to (not including) PID 1, nearest first', async () => {
    const { runner, calls } = recorded(() => ({ code: 0, stdout: MACOS }));
    const table = new PsTable(runner);
    expect((await table.ancestry(9190)).map((p) => p.pid)).toEqual([9190, 9188, 9120]);
    expect((await table.ancestry(4077)).map((p) => p.pid)).toEqual([4077, 4051]);
    expect(await table.ancestry(4242)).toEqual([]);
    expect(calls).toHaveLength(3);
    expect(calls.every((c) => c.includes('-A'))).toBe(true);
  });

  it('the guard reads our ancestry with one ps call, whatever its depth', async () => {
    let calls = 0;
    const counting: CommandRunner = (file, args) => {
      calls++;
      return execRunner(file, args);
    };
    const guard = await Guard.load(new PsTable(counting));
    expect(calls).toBe(1);
    expect(guard.isOwnOrAncestor(process.pid)).toBe(true);
    expect(guard.isOwnOrAncestor(process.ppid)).toBe(true);
    expect(guard.forbidsGroup(new ProcfsTable().getSync(process.pid)?.pgid ?? -1)).toBe(true);
  });

  it('a ps that cannot run is a typed error that says what to do', async () => {
    const missing: CommandRunner = async () => ({
      code: null,
      stdout: '',
      stderr: '',
      error: Object.assign(new Error('spawn ps ENOENT'), { code: 'ENOENT' }),
    });
    const error = await new PsTable(missing).list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProcwardenError);
    expect((error as ProcwardenError).code).toBe('UNSUPPORTED_PLATFORM');
    expect((error as Error).message).toContain('needs a working ps');
  });

  it('forced on Linux with the real ps, it agrees with /proc about live processes', async () => {
    const ps = new PsTable();
    const procfs = new ProcfsTable();
    const me = await ps.get(process.pid);
    const truth = procfs.getSync(process.pid);
    expect(me).toMatchObject({ pid: process.pid, ppid: truth?.ppid, pgid: truth?.pgid });
    const list = await ps.list();
    const parent = list.find((p) => p.pid === process.ppid);
    expect(parent?.pid).toBe(process.ppid);
    expect(list.length).toBeGreaterThan(2);
    // Identity is stable between two reads.
    expect((await ps.get(process.pid))?.startTime).toBe(me?.startTime);
  });
});

describe('forced on Linux: what a supervised run costs in ps calls', () => {
  const leaks = new LeakGuard();
  afterEach(() => leaks.check());

  /** A supervisor on the real ps, counting every call it makes (and keeping their arguments). */
  function counted() {
    const counter = { calls: 0, args: [] as string[][] };
    const runner: CommandRunner = (file, args) => {
      counter.calls++;
      counter.args.push([...args]);
      return execRunner(file, args);
    };
    const sup = new Supervisor({ table: new PsTable(runner) });
    leaks.trackCookie(sup.id);
    return { sup, counter };
  }

  /** `size` processes: a shell and its sleeping children. */
  const flatTree = (size: number): RunSpec['argv'] => [
    'sh',
    '-c',
    `i=1; while [ $i -lt ${size} ]; do sleep 600 & i=$((i + 1)); done; wait`,
  ];

  it('a tree that ignores SIGTERM for a 6 s grace costs a bounded number of calls, not one every 25 ms', async () => {
    const { sup, counter } = counted();
    const dir = leaks.trackDir(makeTmp());
    const handle = sup.spawn({
      argv: ['sh', '-c', 'trap "" TERM; sleep 300 & echo $! > "$1/s.pid"; wait', 'sh', dir],
      containment: 'process-group',
      graceMs: 6000,
    });
    leaks.track(handle.pid);
    leaks.track(await waitFor(() => readPids(dir).get('s'), { what: 'the sleeper' }));
    const before = counter.calls;
    handle.cancel('test');
    const r = await handle.result;
    expect(r.tree.killed).toBe(2);
    // Polls paced up to 250 ms where each is a launch: about 40 for the grace; at 25 ms it was 90
    // here (and more where ps starts faster).
    expect(counter.calls - before).toBeLessThan(65);
  });

  it('spawn + wait costs a few calls, not one per ancestor of ours', async () => {
    const { sup, counter } = counted();
    const r = await sup.spawn({ argv: ['/bin/true'], containment: 'process-group' }).result;
    expect(r.reason).toBe('exit');
    // At most one. The identity of the child is read ROOT_READ_DELAY_MS after its spawn, and a root
    // reaped sooner is let go unread: none then; on a loaded machine /bin/true can outlive that
    // delay, and its one read is the call (shared by the journal). The leftover check needs no ps
    // call when the run's group is empty and the root is all it remembers: a scan could find
    // nothing (3 calls when it took one snapshot and its confirming rescan anyway).
    expect(counter.calls).toBeLessThanOrEqual(1);
  });

  it("a run that outlives the window has its root read once (the journal's read shared); runs started together share that call", async () => {
    const { sup, counter } = counted();
    const handles = [1, 2, 3].map(() => sup.spawn({ argv: ['sleep', '0.5'], containment: 'process-group' }));
    for (const h of handles) leaks.track(h.pid);
    const results = await Promise.all(handles.map((h) => h.result));
    expect(results.map((r) => r.reason)).toEqual(['exit', 'exit', 'exit']);
    const reads = counter.args.filter((args) => !listing(args));
    expect(reads).toHaveLength(1);
    expect(pidsRead(reads[0] ?? [])).toBe(3);
  });

  it('a signal due within the window has the root read at once: the stop waits for no timer', async () => {
    const { sup, counter } = counted();
    const handle = sup.spawn({ argv: ['sleep', '30'], containment: 'process-group' });
    leaks.track(handle.pid);
    handle.cancel();
    // Made by the next turn's check phase, not when the window's timer fires.
    await new Promise((resolve) => setImmediate(resolve));
    expect(counter.args).toEqual([['-ww', '-o', expect.any(String), '-p', String(handle.pid)]]);
    const r = await handle.result;
    expect(r.reason).toBe('cancelled');
    expect(r.tree.signalled).toBe(1);
    expect(pidsRead(counter.args[0] ?? [])).toBe(1);
    expect(counter.args[0]?.at(-1)).toBe(String(handle.pid));
  });

  it('a leftover in the group is still found and ended, with the scans that takes', async () => {
    const { sup, counter } = counted();
    const dir = leaks.trackDir(makeTmp());
    const r = await sup.spawn({
      argv: ['sh', '-c', 'sleep 300 & echo $! > "$1/left.pid"', 'sh', dir],
      containment: 'process-group',
    }).result;
    const left = readPids(dir).get('left') ?? 0;
    leaks.track(left);
    expect(r.reason).toBe('exit');
    expect(r.tree.leftovers).toBe(1);
    expect(r.tree.escaped).toBe(0);
    expect(alive(left)).toBe(false);
    expect(counter.calls).toBeGreaterThanOrEqual(3);
  });

  /** The ps calls that ending a tree of `size` processes takes, by cancel() or kill(). */
  async function endingCalls(size: number, how: 'cancel' | 'kill') {
    const { sup, counter } = counted();
    const handle = sup.spawn({ argv: flatTree(size), containment: 'process-group', graceMs: 10_000 });
    const procfs = new ProcfsTable();
    await waitFor(() => procfs.listSync().filter((p) => p.pgid === handle.pid).length >= size, {
      what: `${size} processes`,
    });
    // The root's identity, read ROOT_READ_DELAY_MS after the spawn: counted from the calls that
    // end the tree, it would be one more, made at once by the stop.
    await waitFor(() => counter.args.some((args) => args.at(-1) === String(handle.pid)), {
      what: "the root's identity read",
    });
    counter.calls = 0;
    counter.args.length = 0;
    handle[how]();
    const r = await handle.result;
    expect(r.tree.escaped).toBe(0);
    expect(r.tree.signalled).toBe(size);
    expect(alive(handle.pid ?? -1)).toBe(false);
    return counter.args;
  }

  const listing = (args: string[]) => args.includes('-A');
  const pidsRead = (args: string[]) => (listing(args) ? 0 : (args.at(-1) ?? '').split(',').length);

  it('cancel(): the calls do not grow with the tree; one call reads every member', async () => {
    for (const size of [10, 30]) {
      const calls = await endingCalls(size, 'cancel');
      // A snapshot, the group's witness before the signal, liveness reads of every member in one
      // call per poll, then the snapshot and its confirming rescan: 5 calls measured at both sizes
      // (8 and 9 when the liveness reads went in windows of 1, 2, 4… members, never all at once;
      // 17 and 37 when each member was read in a call of its own). The count is a loose bound (a
      // loaded machine adds polls); that every member is read in one call is what the change made.
      expect(calls.some((args) => pidsRead(args) >= size)).toBe(true);
      expect(calls.length).toBeLessThanOrEqual(12);
    }
  });

  it('kill(): after the SIGKILL the scan comes at once, no liveness reads first', async () => {
    for (const size of [10, 30]) {
      const calls = await endingCalls(size, 'kill');
      // The snapshot, the witnesses re-read before the group's SIGKILL, then at once the snapshot
      // that looks for what is left (and its rescan): 4 calls at both sizes; before, per-pid waits
      // in windows came between the SIGKILL and that snapshot (8 and 9 calls). A member the scan
      // still finds dying costs a second round, so only the order is exact, the count loose.
      expect(listing(calls[0] ?? [])).toBe(true);
      expect(pidsRead(calls[1] ?? [])).toBeGreaterThan(0);
      expect(listing(calls[2] ?? [])).toBe(true);
      expect(calls.length).toBeLessThanOrEqual(12);
    }
  });

  it('signals by pid re-read every member in one call: containment none, and terminateTree', async () => {
    const size = 10;
    const { sup, counter } = counted();
    const handle = sup.spawn({ argv: flatTree(size), containment: 'none', graceMs: 10_000 });
    const procfs = new ProcfsTable();
    const tree = () => procfs.listSync().filter((p) => p.pid === handle.pid || p.ppid === handle.pid);
    await waitFor(() => tree().length >= size, { what: `${size} processes` });
    counter.args.length = 0;
    handle.cancel();
    const r = await handle.result;
    expect(r.tree.signalled).toBe(size);
    expect(r.tree.escaped).toBe(0);
    // The identities before the SIGTERM in one `ps -p` of every member: 5 calls in all measured
    // (17 when each member was re-read in a call of its own, one after the other).
    expect(counter.args.some((args) => pidsRead(args) >= size)).toBe(true);
    expect(counter.args.length).toBeLessThanOrEqual(12);

    // A tree procwarden did not start (procwarden kill, procwarden/tree-kill): 8 calls (20 before).
    const other = spawn('sh', flatTree(size).slice(1), { detached: true, stdio: 'ignore' });
    leaks.track(other.pid);
    const pid = other.pid ?? 0;
    await waitFor(() => procfs.listSync().filter((p) => p.pgid === pid).length >= size, { what: 'tree' });
    const calls: string[][] = [];
    const runner: CommandRunner = (file, args) => {
      calls.push([...args]);
      return execRunner(file, args);
    };
    const report = await terminateTree(pid, { table: new PsTable(runner), graceMs: 10_000 });
    expect(report.signalled).toBe(size);
    expect(report.escaped).toBe(0);
    expect(calls.some((args) => pidsRead(args) >= size)).toBe(true);
    expect(calls.length).toBeLessThanOrEqual(14);
  });
});

describe('a table without a cookie search: when a scan can be known to find nothing', () => {
  const leaks = new LeakGuard();
  afterEach(() => leaks.check());

  /** A ps-like table (no sweep, no environments, no sessions) over the real /proc, counting its listings. */
  function psLike(answers: Map<number, ProcessInfo | null>) {
    const real = new ProcfsTable();
    const counter = { lists: 0 };
    const table: ProcessTable = {
      name: 'ps',
      get: async (pid) => (answers.has(pid) ? (answers.get(pid) ?? null) : real.get(pid)),
      list: async () => {
        counter.lists++;
        return real.listSync().map((p) => ({ ...p, sid: -1 }));
      },
      groupHasMembers: (pgid) => exists(-pgid),
    };
    return { table, counter };
  }

  const scanOf = async (table: ProcessTable, pid: number, remember: ProcessInfo[] = []) => {
    const membership = new TreeMembership(table, await Guard.load(table), null, true);
    await membership.attach(pid);
    membership.remember(remember);
    return membership.scan();
  };

  it('the root gone and its group empty: no listing', async () => {
    const gone = spawnSync('true').pid as number; // exited and reaped: nobody is in group `gone`
    const { table, counter } = psLike(new Map([[gone, null]]));
    expect(await scanOf(table, gone)).toEqual([]);
    expect(counter.lists).toBe(0);
  });

  it('the root exited before its identity was read, its group still holds a member: listed and found', async () => {
    // The root backgrounds a sleeper in its group and exits at once, as `sh -c 'server &'` does.
    const leader = spawn('sh', ['-c', 'sleep 300 & exit 0'], { detached: true, stdio: 'ignore' });
    const pid = leader.pid as number;
    await new Promise((resolve) => leader.once('exit', resolve));
    const procfs = new ProcfsTable();
    const sleeper = await waitFor(() => procfs.listSync().find((p) => p.pgid === pid && p.pid !== pid), {
      what: 'the sleeper',
    });
    leaks.track(sleeper.pid);
    // ps, asked once the root was gone, has nothing for its pid.
    const { table, counter } = psLike(new Map([[pid, null]]));
    const members = await scanOf(table, pid);
    expect(members.map((m) => m.pid)).toContain(sleeper.pid);
    expect(counter.lists).toBeGreaterThanOrEqual(1);
    process.kill(sleeper.pid, 'SIGKILL');
    await waitFor(() => !alive(sleeper.pid), { what: 'the sleeper gone' });
  });

  it('another member remembered: listed, even with the group empty', async () => {
    const gone = spawnSync('true').pid as number;
    const other = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
    leaks.track(other.pid);
    const info = (await new ProcfsTable().get(other.pid as number)) as ProcessInfo;
    const { table, counter } = psLike(new Map([[gone, null]]));
    const members = await scanOf(table, gone, [info]);
    expect(members.map((m) => m.pid)).toContain(other.pid);
    expect(counter.lists).toBeGreaterThanOrEqual(1);
    other.kill('SIGKILL');
    await waitFor(() => !alive(other.pid as number), { what: 'the sleeper gone' });
  });
});

describe('a ps that answers in another form, or not at all (forced on Linux, with the real ps)', () => {
  const leaks = new LeakGuard();
  afterEach(() => leaks.check());

  /** Three processes in one group: a shell and two sleepers; their pids once they run. */
  async function held(sup: Supervisor, spec: { timeoutMs?: number } = {}) {
    const dir = leaks.trackDir(makeTmp());
    const handle = sup.spawn({
      argv: [
        'sh',
        '-c',
        'sleep 300 & echo $! > "$1/a.pid"; sleep 301 & echo $! > "$1/b.pid"; wait',
        'sh',
        dir,
      ],
      containment: 'process-group',
      graceMs: 300,
      ...spec,
    });
    leaks.track(handle.pid);
    const pids = await waitFor(() => (readPids(dir).size === 2 ? [...readPids(dir).values()] : undefined), {
      what: 'the sleepers',
    });
    for (const pid of pids) leaks.track(pid);
    return { handle, all: [handle.pid as number, ...pids] };
  }

  it("macOS and BSD print lstart in the host's locale: ps is asked in C (and UTC), so the tree is found", async () => {
    // What macOS ps prints under LANG=en_GB.UTF-8 (strftime %c): "Wed  2 Dec", not "Wed Dec  2".
    const runner: CommandRunner = async (file, args, env) => {
      const r = await execRunner(file, args, env);
      if (env?.LC_ALL === 'C') return r;
      return { ...r, stdout: r.stdout.replace(/(\w{3}) (\w{3}) +(\d{1,2}) /g, '$1 $3 $2 ') };
    };
    const sup = new Supervisor({ table: new PsTable(runner) });
    leaks.trackCookie(sup.id);
    const { handle, all } = await held(sup);
    handle.cancel('test');
    const r = await handle.result;
    expect(r.tree.signalled).toBeGreaterThanOrEqual(3);
    expect(r.tree.escaped).toBe(0);
    for (const pid of all) expect(alive(pid), String(pid)).toBe(false);
  });

  it('a TZ changed while the run lives does not make its members look like other processes', async () => {
    const sup = new Supervisor({ table: new PsTable() });
    leaks.trackCookie(sup.id);
    const before = process.env.TZ;
    try {
      const { handle, all } = await held(sup);
      process.env.TZ = 'Asia/Kolkata'; // the real ps prints lstart in local time
      handle.cancel('test');
      const r = await handle.result;
      expect(r.tree.signalled).toBeGreaterThanOrEqual(3);
      for (const pid of all) expect(alive(pid), String(pid)).toBe(false);
    } finally {
      if (before === undefined) delete process.env.TZ;
      else process.env.TZ = before;
    }
  });

  it('output no row of which can be read is a failed read, not an empty table', async () => {
    const { runner } = recorded(() => ({
      code: 0,
      stdout: '  PID  PPID  PGID STARTED\n  12 1 12 2.12.2026 S sh\n',
    }));
    await expect(new PsTable(runner).list()).rejects.toThrow(/no line of its output could be read/);
  });

  it('a ps that fails during the termination: the group and the command are still killed, and the result says so', async () => {
    let failing = false;
    const runner: CommandRunner = async (file, args, env) =>
      failing
        ? { code: 1, stdout: '', stderr: 'ps: sysctl: Cannot allocate memory' }
        : execRunner(file, args, env);
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const sup = new Supervisor({ table: new PsTable(runner), stateDir, watchdog: false });
    leaks.trackCookie(sup.id);
    const { handle, all } = await held(sup);
    failing = true;
    handle.cancel('test');
    const r = await handle.result;
    expect(r.reason).toBe('cancelled');
    expect(r.notes.join('\n')).toContain('the termination could not read the process table');
    expect(r.notes.join('\n')).toContain('Cannot allocate memory');
    for (const pid of all) await waitFor(() => !alive(pid), { what: `${pid} gone` });
    // What else the run left is not known: its record stays for a reap, which clears it once a
    // table that works finds nothing.
    expect(journalFiles(stateDir)).toHaveLength(2); // the record, and its rewrite with the pid
    await sup.shutdown();
    const report = await reap({ stateDir, table: hostGone(new PsTable()) });
    expect(report.runs.map((run) => run.action)).toEqual(['reaped']);
    expect(journalFiles(stateDir)).toEqual([]);
  });
});

describe('platformTable', () => {
  it('picks procfs on Linux, ps on macOS and the BSDs, and refuses the rest with a typed error', () => {
    expect(platformTable('linux').name).toBe('procfs');
    expect(platformTable('darwin').name).toBe('ps');
    expect(platformTable('freebsd').name).toBe('ps');
    let error: unknown;
    try {
      platformTable('haiku' as NodeJS.Platform);
    } catch (e) {
      error = e;
    }
    expect((error as ProcwardenError).code).toBe('UNSUPPORTED_PLATFORM');
  });

  it('hands its runner to the ps backend', async () => {
    const { runner, calls } = recorded(() => ({ code: 0, stdout: MACOS }));
    await platformTable('darwin', runner).list();
    expect(calls).toHaveLength(1);
  });
});

/** `real`, whose every read fails while `failing()` says so. */
function failingWhen(real: ProcessTable, failing: () => boolean): ProcessTable {
  return new Proxy(real, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (failing()) throw new Error('EIO: the table failed (test)');
        return value.apply(target, args);
      };
    },
  });
}

/**
 * `real`, in which this host looks dead: a reap then treats its records as a crash's. (The table
 * must be of the supervisor's kind: ps and procfs give start times in different forms.)
 */
function hostGone(real: ProcessTable): ProcessTable {
  return new Proxy(real, {
    get(target, key) {
      if (key === 'get')
        return (pid: number) => (pid === process.pid ? Promise.resolve(null) : target.get(pid));
      const value = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('a process table that fails the end of a run', () => {
  const leaks = new LeakGuard();
  afterEach(() => leaks.check());

  it('the look for leftovers fails: nothing is signalled, and the record stays for a reap', async () => {
    let failing = false;
    const table = failingWhen(new ProcfsTable(), () => failing);
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const dir = leaks.trackDir(makeTmp());
    const sup = new Supervisor({ table, stateDir, watchdog: false });
    leaks.trackCookie(sup.id);
    // The command leaves a sleeper in its group and exits once told to (a file appears).
    const handle = sup.spawn({
      argv: [
        'sh',
        '-c',
        'sleep 300 & echo $! > "$1/a.pid"; while [ ! -e "$1/go" ]; do sleep 0.02; done',
        'sh',
        dir,
      ],
      containment: 'process-group',
    });
    leaks.track(handle.pid);
    const [leftover] = await waitFor(
      () => (readPids(dir).size === 1 ? [...readPids(dir).values()] : undefined),
      {
        what: 'the sleeper',
      },
    );
    leaks.track(leftover as number);
    failing = true;
    writeFileSync(join(dir, 'go'), '');
    const r = await handle.result;
    expect(r.reason).toBe('exit');
    expect(r.notes.join('\n')).toContain('whether the command left processes behind is not known');
    expect(alive(leftover as number)).toBe(true);
    expect(journalFiles(stateDir)).toHaveLength(2); // the record, and its rewrite with the pid
    await sup.shutdown();
    expect((await reap({ stateDir, table: new ProcfsTable() })).runs.map((run) => run.action)).toEqual([
      'supervisor-alive',
    ]);
    const report = await reap({ stateDir, table: hostGone(new ProcfsTable()) });
    expect(report.runs.map((run) => run.action)).toEqual(['reaped']);
    await waitFor(() => !alive(leftover as number), { what: 'the leftover ended by the reap' });
    expect(journalFiles(stateDir)).toEqual([]);
  });
});
