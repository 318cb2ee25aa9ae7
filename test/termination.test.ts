import { type ChildProcess, spawn } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { realClock } from '../src/clock.js';
import { locateOwnCgroup } from '../src/containment/cgroup-fs.js';
import { scanUntilSure } from '../src/containment/index.js';
import { type ContainmentMode, Supervisor } from '../src/index.js';
import { type KillTarget, terminate, unconfirmed } from '../src/kill/index.js';
import { type ProcessInfo, type ProcessTable, ProcfsTable } from '../src/tree/index.js';
import { cgroupOf, cgroupSkipReason } from './helpers/cgroups.js';
import { alive, exists, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

// Every scenario in every containment this host offers: the sequence must hold whichever holds the tree.
const skip = cgroupSkipReason();
const MODES: ContainmentMode[] =
  skip === null ? ['cgroup', 'process-group', 'none'] : ['process-group', 'none'];
if (skip !== null) console.warn(`termination tests: cgroup mode skipped: ${skip}`);

describe.each(MODES)('containment %s', (containment) => {
  const sup = new Supervisor({ defaults: { containment } });
  leaks.trackCookie(sup.id);

  /** Starts a fixture and resolves once it printed `ready`. */
  async function startReady(script: string, extra: Record<string, unknown> = {}, args: string[] = []) {
    const dir = leaks.trackDir(makeTmp());
    let out = '';
    const handle = sup.spawn({
      argv: [fixture(script), dir, ...args],
      output: {
        onData: (t) => {
          out += t;
        },
      },
      ...extra,
    });
    leaks.track(handle.pid);
    await waitFor(() => out.includes('ready'), { what: `${script} ready` });
    return { handle, dir, output: () => out };
  }

  describe('a signal passed on', () => {
    it("a member that ignores it (a shell's background job, SIGINT) gets the run's killSignal instead, in the same step", async () => {
      const { handle, dir } = await startReady('bg-jobs.sh', { graceMs: 20_000 });
      const pids = readPids(dir);
      handle.cancel('Ctrl-C', { signal: 'SIGINT' });
      const r = await handle.result;
      const first = (who: string) =>
        r.tree.report?.members.find((m) => m.pid === pids.get(who))?.signals.map((s) => s.signal);
      expect(first('main')).toEqual(['SIGINT']);
      expect(first('job1')).toEqual(['SIGTERM']);
      expect(first('job2')).toEqual(['SIGTERM']);
      expect(r.escalated).toBe(false);
      for (const pid of pids.values()) expect(alive(pid)).toBe(false);
    });

    it('a member whose parent heeds it waits for that parent: a script that ends its jobs its own way on Ctrl-C is left to (review)', async () => {
      const { handle, dir } = await startReady('bg-jobs.sh', { graceMs: 20_000 }, ['coordinate']);
      const pids = readPids(dir);
      handle.cancel('Ctrl-C', { signal: 'SIGINT' });
      const r = await handle.result;
      expect(readFileSync(join(dir, 'job1.sig'), 'utf8')).toBe('USR1\n');
      expect(r.escalated).toBe(false);
      for (const pid of pids.values()) expect(alive(pid)).toBe(false);
    });

    it("with ifIgnored: 'nothing', a member that ignores it waits out the grace, then SIGKILL", async () => {
      const { handle, dir } = await startReady('bg-jobs.sh', { graceMs: 300 });
      const pids = readPids(dir);
      handle.cancel('Ctrl-C', { signal: 'SIGINT', ifIgnored: 'nothing' });
      const r = await handle.result;
      // No SIGTERM between: SIGINT, then after the grace SIGKILL. What follows is the kill phase's
      // business (job1 forks a sleep every 50 ms: a re-forking tree may be killed again).
      const signals = r.tree.report?.members.find((m) => m.pid === pids.get('job2'))?.signals ?? [];
      expect(signals.slice(0, 2).map((s) => s.signal)).toEqual(['SIGINT', 'SIGKILL']);
      expect(signals.slice(2).every((s) => s.signal === 'SIGKILL')).toBe(true);
      expect(r.escalated).toBe(true);
      for (const pid of pids.values()) expect(alive(pid)).toBe(false);
    });

    for (const when of ['at once', 'once the first went out'] as const) {
      it(`a later cancel with a signal (${when}) sends it to what is left, in the same grace; one without a signal changes nothing`, async () => {
        const dir = leaks.trackDir(makeTmp());
        let out = '';
        // Both ignore SIGHUP (the job inherits the ignored disposition), as a nohup'ed command does.
        const script =
          'trap "" HUP; sleep 300 & echo $! > "$0/job.pid"; echo $$ > "$0/main.pid"; echo ready; wait';
        const handle = sup.spawn({
          argv: ['sh', '-c', script, dir],
          output: {
            onData: (t) => {
              out += t;
            },
          },
          graceMs: 20_000,
        });
        leaks.track(handle.pid);
        await waitFor(() => out.includes('ready'), { what: 'ready' });
        const pids = readPids(dir);
        for (const pid of pids.values()) leaks.track(pid);
        handle.cancel('hang-up', { signal: 'SIGHUP', ifIgnored: 'nothing' });
        handle.cancel('ignored: no signal');
        if (when !== 'at once') await new Promise((r) => setTimeout(r, 300));
        handle.cancel('timer', { signal: 'SIGTERM' });
        const r = await handle.result;
        expect(r.reason).toBe('cancelled');
        expect(r.detail).toBe('hang-up');
        expect(r.escalated).toBe(false);
        for (const name of ['main', 'job']) {
          const member = r.tree.report?.members.find((m) => m.pid === pids.get(name));
          expect(member?.signals.map((s) => s.signal)).toEqual(['SIGHUP', 'SIGTERM']);
          expect(member?.outcome).toBe('exited-in-grace');
        }
        for (const pid of pids.values()) expect(alive(pid)).toBe(false);
      });
    }

    it('a process forked during the grace that a later cancel finds first still gets the graceful signal (review)', async () => {
      let out = '';
      // Its TERM trap forks a sleep and takes 0.6 s to exit: the grace's polls see the parent alive
      // and do not scan, so the later cancel's scan is the first to find the sleep.
      const script =
        'trap "sleep 1000 & echo late=\\$!; sleep 0.6; exit 0" TERM; echo ready; while :; do sleep 0.05; done';
      const handle = sup.spawn({
        argv: ['sh', '-c', script],
        output: {
          onData: (t) => {
            out += t;
          },
        },
        graceMs: 20_000,
      });
      leaks.track(handle.pid);
      await waitFor(() => out.includes('ready'), { what: 'ready' });
      handle.cancel('stop');
      await waitFor(() => /late=\d+/.test(out), { what: 'the late fork' });
      const late = Number(/late=(\d+)/.exec(out)?.[1]);
      leaks.track(late);
      // Until it has exec'd sleep, the fork is a copy of sh with sh's TERM trap: a SIGTERM then runs
      // the trap in the copy (or is lost when dash clears its traps), and the sleep waits out the
      // grace for its SIGKILL. A stress run of the suite saw that once.
      await waitFor(() => commandOf(late) === 'sleep', { what: "the late fork's exec of sleep" });
      // SIGWINCH: ignored by default, it ends nothing itself.
      handle.cancel('again', { signal: 'SIGWINCH' });
      const r = await handle.result;
      const member = r.tree.report?.members.find((m) => m.pid === late);
      // The SIGTERM first (it may be gone before the SIGWINCH that follows it).
      expect(member?.signals[0]?.signal).toBe('SIGTERM');
      // With the report: which member outlived the grace, if one did.
      expect({ escalated: r.escalated, members: r.tree.report?.members }).toMatchObject({ escalated: false });
      expect(alive(late)).toBe(false);
    });

    it('a member that heeds it gets nothing else: the substitute goes to the others by pid, not to their group', async () => {
      const { handle, dir } = await startReady('bg-jobs.sh', { graceMs: 20_000 }, ['record']);
      const pids = readPids(dir);
      handle.cancel('Ctrl-C', { signal: 'SIGINT' });
      const r = await handle.result;
      expect(readFileSync(join(dir, 'main.sig'), 'utf8')).toBe('INT\n');
      expect(r.escalated).toBe(false);
      for (const pid of pids.values()) expect(alive(pid)).toBe(false);
    });
  });

  describe('the three original scenarios', () => {
    it('a child that traps SIGTERM finishes its cleanup and exits 0; no SIGKILL', async () => {
      const dir = leaks.trackDir(makeTmp());
      // The timeout leaves bash ample time to install its trap, even on a loaded machine.
      const handle = sup.spawn({ argv: [fixture('trap-cleanup.sh'), dir], timeoutMs: 2500, graceMs: 5000 });
      const r = await handle.result;
      expect(r.reason).toBe('overall-timeout');
      expect(r.timedOut).toBe(true);
      expect(r.exitCode).toBe(0);
      expect(r.exitSignal).toBeNull();
      expect(r.escalated).toBe(false);
      expect(exists(join(dir, 'cleanup.done'))).toBe(true);
      expect(r.stdout.text).toContain('cleanup done');
      // Settled well before the grace would have ended.
      expect(r.tree.report?.durationMs).toBeLessThan(4500);
      expect(alive(readPids(dir).get('main') ?? 0)).toBe(false);
    });

    it('a child that ignores SIGTERM is SIGKILLed at the end of the grace', async () => {
      const dir = leaks.trackDir(makeTmp());
      const handle = sup.spawn({ argv: [fixture('ignore-term.sh'), dir], timeoutMs: 1500, graceMs: 600 });
      const r = await handle.result;
      expect(r.reason).toBe('overall-timeout');
      expect(r.timedOut).toBe(true);
      expect(r.exitCode).toBeNull();
      expect(r.exitSignal).toBe('SIGKILL');
      expect(r.escalated).toBe(true);
      expect(r.tree.report?.graceUsedMs).toBeGreaterThanOrEqual(590);
      expect(exists(join(dir, 'ignore.done'))).toBe(false);
    });

    it('a parent that exits on SIGTERM: its descendant gets SIGTERM too and is gone', async () => {
      const { handle, dir } = await startReady('parent-exits.sh');
      handle.cancel('test');
      const r = await handle.result;
      expect(r.reason).toBe('cancelled');
      expect(r.detail).toBe('test');
      expect(r.exitCode).toBe(0);
      expect(r.escalated).toBe(false);
      expect(exists(join(dir, 'child.done'))).toBe(true);
      const pids = readPids(dir);
      expect(alive(pids.get('child') ?? 0)).toBe(false);
      expect(alive(pids.get('parent') ?? 0)).toBe(false);
    });
  });

  describe('the whole tree', () => {
    it('a descendant that ignores SIGTERM after its parent exited is killed at grace end', async () => {
      const { handle, dir } = await startReady('orphan-ignores-term.sh', { graceMs: 500 });
      handle.cancel();
      const r = await handle.result;
      expect(r.exitCode).toBe(0);
      expect(r.escalated).toBe(true);
      expect(r.tree.killed).toBeGreaterThanOrEqual(1);
      expect(alive(readPids(dir).get('child') ?? 0)).toBe(false);
    });

    it('a setsid grandchild whose parent lives is caught and gets the graceful signal', async () => {
      const { handle, dir } = await startReady('setsid-child.sh');
      handle.cancel();
      const r = await handle.result;
      expect(r.escalated).toBe(false);
      expect(exists(join(dir, 'escapee.done'))).toBe(true);
      expect(alive(readPids(dir).get('escapee') ?? 0)).toBe(false);
    });

    it('a double-forked daemon left after a normal exit is found by its cookie and killed', async () => {
      const dir = leaks.trackDir(makeTmp());
      const r = await sup.spawn({ argv: [fixture('double-fork.sh'), dir] }).result;
      expect(r.reason).toBe('exit');
      expect(r.exitCode).toBe(0);
      expect(r.tree.leftovers).toBeGreaterThanOrEqual(1);
      expect(alive(readPids(dir).get('daemon') ?? 0)).toBe(false);
    });

    it('kill() sends SIGKILL to the tree now', async () => {
      const { handle, dir } = await startReady('ignore-term.sh', { graceMs: 30_000 });
      const t = Date.now();
      handle.kill();
      const r = await handle.result;
      expect(Date.now() - t).toBeLessThan(5000);
      expect(r.reason).toBe('cancelled');
      expect(r.exitSignal).toBe('SIGKILL');
      expect(r.escalated).toBe(true);
      expect(alive(readPids(dir).get('main') ?? 0)).toBe(false);
    });

    it('kill() during the grace ends the grace at once', async () => {
      const { handle } = await startReady('ignore-term.sh', { graceMs: 30_000 });
      handle.cancel();
      await new Promise((r) => setTimeout(r, 100));
      expect(handle.state).toBe('stopping');
      const t = Date.now();
      handle.kill();
      const r = await handle.result;
      expect(Date.now() - t).toBeLessThan(5000);
      expect(r.reason).toBe('cancelled');
      expect(r.escalated).toBe(true);
    });

    it('a tree that dies at once settles without waiting out the grace', async () => {
      const handle = sup.spawn({ argv: ['sleep', '30'], graceMs: 30_000 });
      leaks.track(handle.pid);
      await waitFor(() => handle.state === 'running');
      const t = performance.now();
      handle.cancel();
      const r = await handle.result;
      expect(r.exitSignal).toBe('SIGTERM');
      expect(r.escalated).toBe(false);
      // Loose on purpose (catches waiting for the grace or a fixed sleep); latency is measured in bench/.
      expect(performance.now() - t).toBeLessThan(10_000);
    });
  });

  describe('reasons', () => {
    it('no-output timeout fires after the output stops, re-armed by every byte', async () => {
      const dir = leaks.trackDir(makeTmp());
      const t = Date.now();
      // Ticks 300 ms apart, the timeout five times that: the gaps (a fork and exec of sleep each,
      // and bash's start before the first) stay well inside it on a loaded machine. Fired at least
      // a timeout after the last tick, so every tick re-armed it.
      const r = await sup.spawn({ argv: [fixture('silent.sh'), dir, '0.3', '4'], noOutputTimeoutMs: 1500 })
        .result;
      expect(r.reason).toBe('no-output-timeout');
      expect(r.timedOut).toBe(true);
      expect(r.stdout.text).toBe('tick 1\ntick 2\ntick 3\ntick 4\n');
      expect(Date.now() - t).toBeGreaterThanOrEqual(3 * 300 + 1500 - 50);
    });

    it('AbortSignal aborts the run gracefully', async () => {
      const controller = new AbortController();
      const { handle, dir } = await startReady('trap-cleanup.sh', { signal: controller.signal });
      controller.abort(new Error('user hit stop'));
      const r = await handle.result;
      expect(r.reason).toBe('aborted');
      expect(r.detail).toBe('user hit stop');
      expect(exists(join(dir, 'cleanup.done'))).toBe(true);
    });

    it('an already aborted signal starts nothing', async () => {
      const handle = sup.spawn({ argv: ['sleep', '30'], signal: AbortSignal.abort() });
      expect(handle.pid).toBeUndefined();
      const r = await handle.result;
      expect(r.reason).toBe('aborted');
      expect(r.exitCode).toBeNull();
    });

    it('many runs on one signal add one listener to it, not one each (no leak warning), and remove it', async () => {
      const warnings: string[] = [];
      const onWarning = (warning: Error) => warnings.push(warning.name);
      process.on('warning', onWarning);
      try {
        const controller = new AbortController();
        // An agent's turn: one signal for every tool command it starts.
        const handles = Array.from({ length: 15 }, () =>
          sup.spawn({ argv: ['sleep', '30'], signal: controller.signal }),
        );
        for (const h of handles) leaks.track(h.pid);
        expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
        const lone = new AbortController();
        const finished = sup.spawn({ argv: ['true'], signal: lone.signal });
        expect((await finished.result).reason).toBe('exit');
        expect(getEventListeners(lone.signal, 'abort')).toHaveLength(0);
        controller.abort(new Error('turn over'));
        const results = await Promise.all(handles.map((h) => h.result));
        expect(results.map((r) => r.reason)).toEqual(handles.map(() => 'aborted'));
        expect(results.map((r) => r.detail)).toEqual(handles.map(() => 'turn over'));
        await new Promise((resolve) => setImmediate(resolve));
        expect(warnings).not.toContain('MaxListenersExceededWarning');
        expect(leaks.survivors()).toEqual([]);
      } finally {
        process.off('warning', onWarning);
      }
    });

    it('cancel while starting', async () => {
      const dir = leaks.trackDir(makeTmp());
      const handle = sup.spawn({ argv: [fixture('parent-exits.sh'), dir] });
      handle.cancel();
      const r = await handle.result;
      expect(r.reason).toBe('cancelled');
      expect(leaks.survivors()).toEqual([]);
    });

    it('a cancel after a timeout does not rewrite the reason', async () => {
      const { handle } = await startReady('ignore-term.sh', { timeoutMs: 1500, graceMs: 800 });
      await waitFor(() => handle.state === 'stopping');
      handle.cancel('late');
      const r = await handle.result;
      expect(r.reason).toBe('overall-timeout');
      expect(r.detail).toBeUndefined();
    });

    it('a cancel after exit keeps the reason and changes nothing', async () => {
      const handle = sup.spawn({ argv: ['sh', '-c', 'exit 3'] });
      const r = await handle.result;
      handle.cancel();
      handle.kill();
      expect(r.reason).toBe('exit');
      expect(r.exitCode).toBe(3);
      expect(handle.state).toBe('exited');
    });

    it('a command killed by a signal from elsewhere reports reason signal', async () => {
      const handle = sup.spawn({ argv: ['sh', '-c', 'kill -USR1 $$'] });
      const r = await handle.result;
      expect(r.reason).toBe('signal');
      expect(r.exitSignal).toBe('SIGUSR1');
    });
  });

  describe('leftovers and the drain', () => {
    it("'keep' with a grandchild holding stdout settles promptly and leaves it alone", async () => {
      const dir = leaks.trackDir(makeTmp());
      const t = Date.now();
      const r = await sup.spawn({ argv: [fixture('hold-stdout.sh'), dir], leftovers: 'keep', drainMs: 300 })
        .result;
      expect(Date.now() - t).toBeLessThan(3000);
      expect(r.reason).toBe('exit');
      expect(r.stdout.text).toContain('started');
      expect(r.tree.leftovers).toBe(1);
      const holder = readPids(dir).get('holder') ?? 0;
      expect(alive(holder)).toBe(true);
      process.kill(holder, 'SIGKILL');
      await waitFor(() => !alive(holder));
    });

    it("'kill' (the default) ends the grandchild that holds stdout", async () => {
      const dir = leaks.trackDir(makeTmp());
      const t = Date.now();
      const r = await sup.spawn({ argv: [fixture('hold-stdout.sh'), dir] }).result;
      expect(Date.now() - t).toBeLessThan(3000);
      expect(r.reason).toBe('exit');
      expect(r.tree.leftovers).toBe(1);
      expect(r.escalated).toBe(false);
      expect(alive(readPids(dir).get('holder') ?? 0)).toBe(false);
    });
  });

  describe('a child tied to the run only by its parent (setsid env -i)', () => {
    // The tree is read before the first signal: once the parent has died of it, the kernel hands
    // the child to PID 1 and nothing would link it to the run any more.
    for (const how of ['kill', 'cancel'] as const) {
      it(`${how}(): it is ended with the rest, and reported`, async () => {
        const { handle, dir } = await startReady('envi-child.sh');
        const child = readPids(dir).get('child') ?? 0;
        leaks.track(child);
        handle[how]();
        const r = await handle.result;
        expect(r.tree.escaped).toBe(0);
        expect(alive(child)).toBe(false);
        expect(r.tree.report?.members.map((m) => m.pid)).toContain(child);
      });
    }
  });

  it('the run reports the containment it used', async () => {
    expect((await sup.spawn({ argv: ['true'] }).result).containment).toBe(containment);
  });
});

describe('kill() reads the tree before its first signal', () => {
  // A child tied to the run only by its parent (envi-child.sh) is out of reach once the parent has
  // died: the kernel hands it to PID 1. So no SIGKILL goes out before a scan has seen the links.
  for (const containment of ['process-group', 'none'] as const) {
    it(`${containment}: one scan, then the SIGKILLs, the child's by pid`, async () => {
      const events: string[] = [];
      const inner = new ProcfsTable();
      const table: ProcessTable = {
        name: inner.name,
        get: (pid) => inner.get(pid),
        list: () => {
          events.push('scan');
          return inner.list();
        },
        findByEnv: (name, value) => inner.findByEnv(name, value),
        sweep: (query) => {
          events.push('scan');
          return inner.sweep(query);
        },
      };
      const send = (pid: number, signal: NodeJS.Signals) => {
        events.push(`${signal} ${pid}`);
        process.kill(pid, signal);
      };
      const sup = new Supervisor({ journal: false, table, send });
      const dir = leaks.trackDir(makeTmp());
      let out = '';
      const handle = sup.spawn({
        argv: [fixture('envi-child.sh'), dir],
        containment,
        output: {
          onData: (t) => {
            out += t;
          },
        },
      });
      leaks.track(handle.pid);
      await waitFor(() => out.includes('ready'), { what: 'envi-child ready' });
      const child = readPids(dir).get('child') ?? 0;
      leaks.track(child);
      events.length = 0;
      handle.kill();
      const r = await handle.result;
      expect(events[0]).toBe('scan');
      expect(events).toContain(`SIGKILL ${child}`);
      expect(r.tree.escaped).toBe(0);
      expect(alive(child)).toBe(false);
    });
  }
});

describe('members signalled one by one', () => {
  /** A supervisor whose SIGTERMs are listed in the order they were sent. */
  const sigtermRecorder = () => {
    const sent: number[] = [];
    const send = (pid: number, signal: NodeJS.Signals) => {
      if (signal === 'SIGTERM') sent.push(pid);
      process.kill(pid, signal);
    };
    return { sup: new Supervisor({ journal: false, send }), sent };
  };

  it('none: a parent gets its signal before the children it forked, as old as they are', async () => {
    // A shell whose foreground child died first would run its next command (here: touch a file)
    // before its own signal came; so would a chain of them.
    const { sup, sent } = sigtermRecorder();
    const dir = leaks.trackDir(makeTmp());
    const after = join(dir, 'went-on');
    let out = '';
    const handle = sup.spawn({
      argv: ['sh', '-c', `sh -c 'sh -c "echo ready; sleep 30"; touch ${after}.2'; touch ${after}.1`],
      containment: 'none',
      output: {
        onData: (t) => {
          out += t;
        },
      },
    });
    const root = handle.pid ?? 0;
    leaks.track(root);
    await waitFor(() => out.includes('ready'), { what: 'the chain started' });
    // Root, child, grandchild, sleep: each the only child of the one before.
    const childOf = (pid: number) => Number(readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim());
    const chain = await waitFor(
      () => {
        const pids = [root];
        for (let pid = childOf(root); pid > 0 && pids.length < 4; pid = childOf(pid)) pids.push(pid);
        return pids.length === 4 && readFileSync(`/proc/${pids[3]}/comm`, 'utf8').startsWith('sleep')
          ? pids
          : undefined;
      },
      { what: 'the chain down to sleep' },
    );
    for (const pid of chain) leaks.track(pid);
    handle.cancel();
    const r = await handle.result;
    expect(sent).toEqual(chain);
    expect(exists(`${after}.1`) || exists(`${after}.2`)).toBe(false);
    expect(r.tree.escaped).toBe(0);
    await sup.shutdown();
  });

  it('a parent before its children where neither start times nor pids say so (one clock tick, pids wrapped)', async () => {
    const at = (pid: number, ppid: number): ProcessInfo => ({
      pid,
      ppid,
      pgid: 32700,
      sid: 32700,
      startTime: '5000',
      state: 'S',
      command: 'sh',
    });
    // Forked within one 10 ms tick, and the pids wrapped in between: the child's number is smaller.
    const root = at(32700, 1);
    const child = at(300, 32700);
    const grandchild = at(301, 300);
    const stranger = at(302, 1);
    const order: number[][] = [];
    let listed = true;
    const target: KillTarget = {
      async members() {
        return listed ? [grandchild, stranger, child, root] : [];
      },
      async signal(_sig, members) {
        order.push(members.map((m) => m.pid));
        listed = false;
        return members;
      },
    };
    await terminate(target, { signal: 'SIGTERM', graceMs: 1000, clock: realClock, table: new ProcfsTable() });
    expect(order[0]).toEqual([32700, 300, 301, 302]);
  });

  it.skipIf(skip !== null)(
    "cgroup: a manager before the worker it moved into a cgroup of its own under the run's",
    async () => {
      // The run's cgroup.procs files are read deepest first, which listed the worker before its
      // manager; a manager that saw its worker die first would start another (here: touch a file).
      const { sup, sent } = sigtermRecorder();
      const dir = leaks.trackDir(makeTmp());
      let out = '';
      const handle = sup.spawn({
        argv: ['sh', '-c', `sleep 30 & echo "ready $!"; wait; touch ${join(dir, 'went-on')}`],
        containment: 'cgroup',
        output: {
          onData: (t) => {
            out += t;
          },
        },
      });
      leaks.track(handle.pid);
      const worker = await waitFor(() => Number(/ready (\d+)/.exec(out)?.[1]) || undefined, {
        what: 'the worker started',
      });
      leaks.track(worker);
      const where = locateOwnCgroup(readFileSync('/proc/self/mountinfo', 'utf8'), `0::${cgroupOf(worker)}\n`);
      if (!('dir' in where)) throw new Error(`no cgroup directory for the worker: ${where.reason}`);
      mkdirSync(join(where.dir, 'workers'));
      writeFileSync(join(where.dir, 'workers', 'cgroup.procs'), String(worker));
      handle.cancel();
      const r = await handle.result;
      expect(sent).toEqual([handle.pid, worker]);
      expect(exists(join(dir, 'went-on'))).toBe(false);
      expect(r.tree.escaped).toBe(0);
      await sup.shutdown();
    },
  );
});

describe('the SIGKILL chase runs out of time', () => {
  it('in a tree that re-forks, members gone before their SIGKILL at the bound are counted as escaped', async () => {
    // A pid-hopper seen from the outside: every scan finds a new generation, gone by the time it is
    // signalled. Pids above pid_max never exist, so every read says "gone". Nothing proves the last
    // one left no successor: that is an escape, never an "escaped: 0".
    let generation = 4_200_000;
    const scans: (boolean | undefined)[] = [];
    const gen = (): ProcessInfo => ({
      pid: generation++,
      ppid: 1,
      pgid: generation,
      sid: generation,
      startTime: '1',
      state: 'R',
      command: 'hopper',
    });
    const target: KillTarget = {
      async members(scan) {
        scans.push(scan?.stopOnSight);
        return [gen()];
      },
      async signal() {
        return [];
      },
    };
    const report = await terminate(target, {
      signal: 'SIGTERM',
      graceMs: 0,
      clock: realClock,
      table: new ProcfsTable(),
      killTimeoutMs: 150,
    });
    expect(report.escaped).toBeGreaterThan(0);
    expect(report.notes.join('\n')).toMatch(/gone before their SIGKILL.*counted as escaped/);
    // The first scans are plain; once the tree is seen re-forking, every scan stops on sight.
    expect(scans[0]).toBeUndefined();
    expect(scans.at(-1)).toBe(true);
  });

  it('a member its last scan found for the first time still gets a SIGKILL before anything is called escaped', async () => {
    // On a loaded host one scan can take most of the kill timeout: here the scan after the first
    // SIGKILL takes longer than all of it, and finds a member nobody has signalled yet.
    const table = new ProcfsTable();
    const start = (): ChildProcess => {
      const child = spawn('sleep', ['30'], { stdio: 'ignore' });
      leaks.track(child.pid);
      return child;
    };
    const [first, late] = [start(), start()];
    const info = (child: ChildProcess): Promise<ProcessInfo> =>
      waitFor(() => table.getSync(child.pid ?? 0) ?? undefined, { what: 'sleep started' });
    const [a, b] = [await info(first), await info(late)];
    let scans = 0;
    const target: KillTarget = {
      async members() {
        scans++;
        if (scans === 1) return [a];
        await new Promise((r) => setTimeout(r, 400)); // slower than the whole bound
        const now = table.getSync(b.pid);
        return now && now.state !== 'Z' && now.startTime === b.startTime ? [now] : [];
      },
      async signal(sig, members) {
        for (const m of members) process.kill(m.pid, sig);
        return members;
      },
    };
    const exited = (child: ChildProcess) =>
      child.exitCode !== null || child.signalCode !== null
        ? Promise.resolve()
        : new Promise((r) => child.once('exit', r));
    const report = await terminate(target, {
      signal: 'SIGKILL',
      graceMs: 0,
      clock: realClock,
      table,
      killTimeoutMs: 200,
    });
    const found = report.members.find((m) => m.pid === b.pid);
    expect(found?.signals.map((s) => s.signal)).toContain('SIGKILL');
    // Whether it had died when the bound was up is the machine's to give (under load a SIGKILLed
    // process took longer to go than the last wait): counted as escaped then, never unsignalled.
    expect(['killed', 'escaped']).toContain(found?.outcome);
    expect(report.escaped).toBe(found?.outcome === 'escaped' ? 1 : 0);
    await Promise.all([exited(first), exited(late)]);
  });

  it('kill() sends each member one SIGKILL, not a second round before it looks again', async () => {
    const table = new ProcfsTable();
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    leaks.track(child.pid);
    const member = await waitFor(() => table.getSync(child.pid ?? 0) ?? undefined, { what: 'sleep started' });
    const sent: string[] = [];
    const target = oneProcess(table, member, sent);
    const exited = new Promise((r) => child.once('exit', r));
    const report = await terminate(target, { signal: 'SIGKILL', graceMs: 0, clock: realClock, table });
    await exited;
    expect(sent).toEqual([`SIGKILL ${member.pid}`]);
    expect(report.killed).toBe(1);
    expect(report.escalated).toBe(true);
  });
});

describe('an empty scan that could not be confirmed', () => {
  const why = 'processes kept vanishing mid-scan faster than they could be read';

  it('is never taken for a gone tree: the scans that stop what they read find the member, which is killed', async () => {
    // A member that re-forks without pause: a plain scan (the grace's) sees its generations vanish
    // and finds no one; a scan that stops on sight catches one. Here a real process ignoring
    // SIGTERM stands in for the caught generation.
    const table = new ProcfsTable();
    const { child, member } = await ignoringTerm(table);
    const scans: (boolean | undefined)[] = [];
    const sent: string[] = [];
    const caught = oneProcess(table, member, sent);
    const target: KillTarget = {
      async members(scan) {
        scans.push(scan?.stopOnSight);
        return scan?.stopOnSight ? caught.members() : unconfirmed(why);
      },
      signal: (sig, members) => caught.signal(sig, members),
    };
    const exited = new Promise((r) => child.once('exit', r));
    const report = await terminate(target, {
      signal: 'SIGTERM',
      graceMs: 50,
      clock: realClock,
      table,
      killTimeoutMs: 2000,
    });
    await exited;
    expect(sent).toContain(`SIGKILL ${member.pid}`);
    expect(report.killed).toBe(1);
    expect(report.escaped).toBe(0);
    // Settled in the end: nothing says it could not be confirmed.
    expect(report.notes.join('\n')).not.toMatch(/could not be confirmed/);
    expect(scans[0]).toBeUndefined();
    expect(scans.at(-1)).toBe(true);
  });

  it('still unconfirmed when the SIGKILL chase runs out of time: one is counted as escaped, and the note says why', async () => {
    const scans: (boolean | undefined)[] = [];
    const target: KillTarget = {
      async members(scan) {
        scans.push(scan?.stopOnSight);
        await new Promise((r) => setImmediate(r)); // a scan that costs (next to) nothing
        return unconfirmed(why);
      },
      async signal() {
        return [];
      },
    };
    const report = await terminate(target, {
      signal: 'SIGTERM',
      graceMs: 30,
      clock: realClock,
      table: new ProcfsTable(),
      killTimeoutMs: 150,
    });
    expect(report.escaped).toBe(1);
    expect(report.escalated).toBe(true);
    expect(report.notes.join('\n')).toMatch(
      /processes kept vanishing mid-scan faster than they could be read when the 150 ms bound ran out: that nothing of the tree is left could not be confirmed; counted as escaped/,
    );
    // The grace kept looking until its end, then every scan stopped what it read.
    expect(scans.filter((s) => s === undefined).length).toBeGreaterThan(1);
    expect(scans.at(-1)).toBe(true);
    // Paced (at least 1 ms apart, 25 ms at most), never scan after scan: back to back, this target
    // was scanned tens of thousands of times in 180 ms.
    expect(scans.length).toBeLessThan(400);
  });

  it('unconfirmed in the grace, then confirmed gone by the SIGKILL stage: no SIGKILL needed, none sent, none escaped', async () => {
    const scans: (boolean | undefined)[] = [];
    const sent: string[] = [];
    const target: KillTarget = {
      async members(scan) {
        scans.push(scan?.stopOnSight);
        // Processes vanished mid-scan while the grace looked; the first scan that stops what it
        // reads finds the tree gone.
        return scan?.stopOnSight ? [] : unconfirmed(why);
      },
      async signal(sig, members) {
        for (const m of members) sent.push(`${sig} ${m.pid}`);
        return members;
      },
    };
    const report = await terminate(target, {
      signal: 'SIGTERM',
      graceMs: 30,
      clock: realClock,
      table: new ProcfsTable(),
      killTimeoutMs: 2000,
    });
    expect(sent).toEqual([]);
    expect(report.escaped).toBe(0);
    expect(report.escalated).toBe(false);
    expect(report.graceUsedMs).toBeNull();
    expect(scans.at(-1)).toBe(true);
  });

  it("the last known member gone at the grace's end: a scan looks for what it forked, which is killed", async () => {
    // No process here: a table and a target that answer as a member would that ignores SIGTERM
    // until the grace's last read, then dies (between that read and the next), having forked a
    // child that nothing has seen yet.
    const info = (pid: number): ProcessInfo => ({
      pid,
      ppid: 1,
      pgid: pid,
      sid: pid,
      startTime: '7',
      state: 'S',
      command: 'fake',
    });
    const [member, child] = [info(4_100_001), info(4_100_002)];
    const sent: string[] = [];
    let memberReads = 0;
    const table: ProcessTable = {
      name: 'fake',
      list: async () => [],
      get: async (pid) => {
        if (pid === member.pid) return memberReads++ === 0 ? member : null;
        return pid === child.pid && !sent.includes(`SIGKILL ${child.pid}`) ? child : null;
      },
    };
    let scans = 0;
    const target: KillTarget = {
      async members() {
        // The first scan, before the signal: the member. Every later one: the child, until killed.
        if (scans++ === 0) return [member];
        return (await table.get(child.pid)) ? [child] : [];
      },
      async signal(sig, members) {
        for (const m of members) sent.push(`${sig} ${m.pid}`);
        return members;
      },
    };
    const report = await terminate(target, { signal: 'SIGTERM', graceMs: 0, clock: realClock, table });
    expect(sent).toEqual([`SIGTERM ${member.pid}`, `SIGKILL ${child.pid}`]);
    expect(report.escaped).toBe(0);
    expect(report.members.find((m) => m.pid === child.pid)?.outcome).toBe('killed');
  });

  describe('the look for leftovers after a normal exit', () => {
    /** procfs, but every sweep says a process vanished mid-read and finds no cookie holder. */
    const vanishing = (): ProcessTable => {
      const inner = new ProcfsTable();
      return {
        ...bound(inner),
        sweep: async (query) => ({ ...(await inner.sweep(query)), holders: new Set(), vanished: 1 }),
        births: () => null, // no proof that nothing was born: every look is a sweep
      };
    };

    it("leftovers 'keep': the result says the look could not be confirmed, and comes", async () => {
      const sup = new Supervisor({ table: vanishing(), journal: false });
      const result = await sup.spawn({ argv: ['true'], containment: 'none', leftovers: 'keep' }).result;
      expect(result.reason).toBe('exit');
      expect(result.tree.leftovers).toBe(0);
      expect(result.tree.escaped).toBe(0);
      expect(result.notes.join('\n')).toMatch(
        /kept vanishing.*: whether the command left processes behind could not be confirmed/,
      );
      await sup.shutdown();
    });

    it("leftovers 'kill': a termination looks until the kill timeout, then counts one as escaped", async () => {
      const sup = new Supervisor({ table: vanishing(), journal: false });
      const result = await sup.spawn({ argv: ['true'], containment: 'none', graceMs: 50 }).result;
      expect(result.reason).toBe('exit');
      expect(result.tree.report).not.toBeNull();
      expect(result.tree.leftovers).toBe(0); // what the termination found
      expect(result.tree.escaped).toBe(1);
      expect(result.notes.join('\n')).toMatch(/could not be confirmed; counted as escaped/);
      await sup.shutdown();
    }, 20_000);
  });

  it('scanUntilSure answers an empty tree it could not believe as unconfirmed, and one it could as empty', async () => {
    const notes: string[] = [];
    const vanishing = await scanUntilSure(
      async () => ({ members: [], vanished: 2, unsettled: 0 }),
      true,
      notes,
    );
    expect([...vanishing]).toEqual([]);
    expect(vanishing.unconfirmed).toBe(why);
    // Said by whoever decides from it (a termination, the look for leftovers), not by every scan.
    expect(notes).toEqual([]);
    let calls = 0;
    const settled = await scanUntilSure(
      async () => ({ members: [], vanished: calls++ === 0 ? 1 : 0, unsettled: 0 }),
      true,
      notes,
    );
    expect(settled.unconfirmed).toBeUndefined();
    expect(calls).toBe(2);
  });
});

describe('the grace ends at once when escalated', () => {
  it('a wait between polls is cut short by the escalation, however long it was to be', async () => {
    // Where every read is a process launch (ps), polls are up to 250 ms apart. Here every wait of
    // 100 ms or more never ends on its own: only the escalation can end it.
    const table = new ProcfsTable();
    const { child, member } = await ignoringTerm(table);
    let stalled = 0;
    const clock = {
      now: realClock.now,
      setTimeout: (fn: () => void, ms: number) => (ms >= 100 ? ++stalled : realClock.setTimeout(fn, ms)),
      clearTimeout: (h: unknown) => (typeof h === 'number' ? undefined : realClock.clearTimeout(h)),
    };
    const launches: ProcessTable = { ...bound(table), batchesReads: true };
    const sent: string[] = [];
    const target = oneProcess(table, member, sent);
    const escalation = new AbortController();
    const exited = new Promise((r) => child.once('exit', r));
    const ending = terminate(target, {
      signal: 'SIGTERM',
      graceMs: 600_000,
      clock,
      table: launches,
      escalate: escalation.signal,
    });
    await waitFor(() => stalled > 0, { what: 'a wait of 100 ms or more', timeoutMs: 15_000 });
    expect(sent).toEqual([`SIGTERM ${member.pid}`]);
    escalation.abort();
    const report = await Promise.race([
      ending,
      new Promise<null>((r) => setTimeout(() => r(null), 10_000).unref()),
    ]);
    expect(report, 'the escalation did not end the wait').not.toBeNull();
    expect(sent[0]).toBe(`SIGTERM ${member.pid}`);
    expect(sent.slice(1)).toContain(`SIGKILL ${member.pid}`);
    expect(report?.killed).toBe(1);
    await exited;
  });
});

/** A `sleep` that ignores SIGTERM, once it runs (its identity read after the exec). */
async function ignoringTerm(table: ProcfsTable): Promise<{ child: ChildProcess; member: ProcessInfo }> {
  const child = spawn('sh', ['-c', "trap '' TERM; exec sleep 30"], { stdio: 'ignore' });
  leaks.track(child.pid);
  const member = await waitFor(
    () => {
      const p = table.getSync(child.pid ?? 0);
      return p?.command === 'sleep' ? p : undefined;
    },
    { what: 'sleep started' },
  );
  return { child, member };
}

/** A target of one process while it is the same one, whose signals are recorded as "SIG pid". */
function oneProcess(table: ProcfsTable, member: ProcessInfo, sent: string[]): KillTarget {
  return {
    async members() {
      const now = table.getSync(member.pid);
      return now && now.state !== 'Z' && now.startTime === member.startTime ? [now] : [];
    },
    async signal(sig, members) {
      for (const m of members) {
        sent.push(`${sig} ${m.pid}`);
        process.kill(m.pid, sig);
      }
      return members;
    },
  };
}

/** A table's methods bound to it, as a plain object a test can extend. */
function bound(table: ProcfsTable): ProcessTable {
  return {
    name: table.name,
    list: () => table.list(),
    get: (pid) => table.get(pid),
    findByEnv: (...a) => table.findByEnv(...a),
    sweep: (q) => table.sweep(q),
    births: () => table.births(),
  };
}

function commandOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return undefined;
  }
}
