import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CgroupHost } from '../src/containment/index.js';
import { type RunSpec, reap, Supervisor } from '../src/index.js';
import { cgroupOf, cgroupSkipReason, parentCgroup, sweepCgroups } from './helpers/cgroups.js';
import { startHost } from './helpers/host.js';
import {
  alive,
  cookieHolders,
  fixture,
  LeakGuard,
  makeTmp,
  spawnedStart,
  startTime,
  waitFor,
} from './helpers/procs.js';
import { deadRecord, writableCgroupMount } from './helpers/reap.js';

/**
 * procwarden's parent cgroup `procwarden-<pid>-<start>` goes with the last run, and so does what a
 * (root) member made or moved into it: alive, after a crash (watchdog, reap), and a run's own
 * cgroup is named by its record before it exists (a host killed meanwhile leaves nothing unnamed).
 */
const skip = cgroupSkipReason();
const mount = writableCgroupMount();
const leaks = new LeakGuard();
/** Hosts these tests start and kill: what they made must go even when an assertion failed. */
const hosts: { pid: number; start: string }[] = [];
/** Dead-supervisor parents the reap tests make by hand. */
const made: string[] = [];
afterEach(async () => {
  const left: string[] = [];
  for (const host of hosts.splice(0)) left.push(...(await sweepCgroups(host)));
  left.push(...(await sweepCgroups()));
  for (const dir of made.splice(0)) left.push(...(await sweepCgroups(parseParent(dir))));
  await leaks.check();
  if (left.length > 0) throw new Error(`cgroups left behind (now removed): ${left.join(', ')}`);
});

function parseParent(dir: string): { pid: number; start: string } {
  const [, pid, start] = /procwarden-(\d+)-(\d+)$/.exec(dir) as RegExpExecArray;
  return { pid: Number(pid), start: start as string };
}

const readPid = (file: string) =>
  waitFor(() => existsSync(file) && Number(readFileSync(file, 'utf8')), { what: file });
/** A host's parent cgroup, by its pid and start: a pid alone may be another test's host by now. */
const ofHost = (pid: number) =>
  readdirSync(dirname(parentCgroup() as string)).filter(
    (n) => n === `procwarden-${pid}-${spawnedStart(pid)}`,
  );

describe.skipIf(skip !== null)(
  `a cgroup a member makes beside its run's${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const sibling = (dir: string, mode: string, name = 'evil'): RunSpec['argv'] => [
      'sh',
      fixture('sibling-escape.sh'),
      mount as string,
      join(dir, 'evil.pid'),
      mode,
      name,
    ];

    it("the review's repro: the member in it is ended by the run's own termination (its cookie and parent link), the cgroup and the parent are removed", async () => {
      const dir = leaks.trackDir(makeTmp('pw-sib-'));
      const sup = new Supervisor({ journal: false });
      const run = sup.spawn({ argv: sibling(dir, 'child'), containment: 'cgroup', graceMs: 2000 });
      leaks.track(run.pid);
      const evil = await readPid(join(dir, 'evil.pid'));
      leaks.track(evil);
      const parent = dirname(sup.get(run.id)?.cgroupPath as string);
      await waitFor(() => cgroupOf(evil)?.endsWith('/evil'), { what: 'member in the sibling cgroup' });
      await new Promise((r) => setTimeout(r, 800));
      run.cancel();
      const result = await run.result;
      await sup.shutdown();
      // Why it was already ended: the termination's scan found it (a descendant, with the cookie).
      expect(result.tree.report?.members.map((m) => m.pid)).toContain(evil);
      expect(alive(evil)).toBe(false);
      expect(existsSync(join(parent, 'evil'))).toBe(false);
      expect(existsSync(parent)).toBe(false);
      expect(result.tree.notes.join('\n')).toMatch(/removed cgroup\(s\) a member made in .*: evil/);
    }, 30_000);

    it('one that left every other tie to the run (env -i, setsid, re-parented) is killed with the parent, and said so', async () => {
      const dir = leaks.trackDir(makeTmp('pw-sib-'));
      const sup = new Supervisor({ journal: false });
      const run = sup.spawn({ argv: sibling(dir, 'envi'), containment: 'cgroup', graceMs: 2000 });
      leaks.track(run.pid);
      const evil = await readPid(join(dir, 'evil.pid'));
      leaks.track(evil);
      const parent = dirname(sup.get(run.id)?.cgroupPath as string);
      await waitFor(() => cgroupOf(evil)?.endsWith('/evil'), { what: 'escapee in the sibling cgroup' });
      await new Promise((r) => setTimeout(r, 500));
      run.cancel();
      const result = await run.result;
      await sup.shutdown();
      // The run's termination cannot see it: nothing but the cgroup ties it to the run.
      expect(result.tree.report?.members.map((m) => m.pid)).not.toContain(evil);
      await waitFor(() => !alive(evil), { timeoutMs: 3000, what: 'escapee gone' });
      expect(existsSync(parent)).toBe(false);
      expect(result.tree.notes.join('\n')).toMatch(
        new RegExp(`outside every live run's cgroup \\(${evil} in .*/evil\\).*killed`),
      );
    }, 30_000);

    it.each([
      ['pwevil-1', 'pwevil-1'],
      ["its own run's supervisor", '@own'],
    ])(
      "one in a cgroup it named like a run's (%s) is killed with the parent all the same (review)",
      async (_, name) => {
        const dir = leaks.trackDir(makeTmp('pw-sib-'));
        const sup = new Supervisor({ journal: false });
        const run = sup.spawn({ argv: sibling(dir, 'envi', name), containment: 'cgroup', graceMs: 2000 });
        leaks.track(run.pid);
        const evil = await readPid(join(dir, 'evil.pid'));
        leaks.track(evil);
        const parent = dirname(sup.get(run.id)?.cgroupPath as string);
        const cgroup = name === '@own' ? `${sup.id}-999` : name;
        await waitFor(() => cgroupOf(evil)?.endsWith(`/${cgroup}`), {
          what: 'escapee in the sibling cgroup',
        });
        await new Promise((r) => setTimeout(r, 500));
        run.cancel();
        const result = await run.result;
        await sup.shutdown();
        // Taken for another realm's run before: nothing was cleared, the parent stayed.
        await waitFor(() => !alive(evil), { timeoutMs: 3000, what: 'escapee gone' });
        expect(existsSync(parent)).toBe(false);
        expect(result.tree.notes.join('\n')).toMatch(
          new RegExp(`outside every live run's cgroup \\(${evil} in .*/${cgroup}\\).*killed`),
        );
      },
      30_000,
    );

    it("with leftovers 'keep' and a normal exit, what a member put there is moved out, not killed; the parent still goes", async () => {
      const dir = leaks.trackDir(makeTmp('pw-sib-'));
      const sup = new Supervisor({ journal: false });
      // The command returns at once: the escapee is a leftover the caller keeps.
      const argv: RunSpec['argv'] = [
        'sh',
        '-c',
        `${sibling(dir, 'envi')
          .map((a) => `'${a}'`)
          .join(' ')} & sleep 1; exit 0`,
      ];
      const run = sup.spawn({ argv, containment: 'cgroup', leftovers: 'keep' });
      const evil = await readPid(join(dir, 'evil.pid'));
      leaks.track(evil);
      const parent = dirname(sup.get(run.id)?.cgroupPath as string);
      const result = await run.result;
      await sup.shutdown();
      expect(result.reason).toBe('exit');
      expect(alive(evil)).toBe(true);
      expect(cgroupOf(evil)).toBe(readFileSync('/proc/self/cgroup', 'utf8').match(/^0::(.*)$/m)?.[1]);
      expect(existsSync(parent)).toBe(false);
      expect(result.tree.notes.join('\n')).toMatch(/a leftover the run keeps: moved to/);
      // The kept leftovers: the escapee, and the script's own `sleep 303` (it carries the cookie).
      const kept = [evil, ...cookieHolders(run.id)];
      for (const pid of kept) process.kill(pid, 'SIGKILL');
      await waitFor(() => !kept.some(alive), { what: 'kept leftovers gone' });
      leaks.trackCookie(run.id);
    }, 30_000);

    it("another realm's runs (a worker thread's) share the parent: the main thread's last run leaves them alone", async () => {
      // Each realm has a registry of its own; the parent's name is the process's. The main thread's
      // last run took the worker's live run cgroup for a stale one and killed its command.
      const r = spawnSync(process.execPath, [fixture('worker-cgroup.mjs')], {
        encoding: 'utf8',
        timeout: 30_000,
      });
      const out = JSON.parse(r.stdout || '{}');
      if (out.pid) leaks.track(out.pid);
      expect(out, r.stderr).toMatchObject({
        aliveAfter: true,
        mine: [],
        theirs: { reason: 'exit', exitCode: 0 },
      });
    });

    /** A host whose run put a member in a sibling cgroup, SIGKILLed: what its watchdog leaves. */
    async function crashWithSibling(scenario: string, cgroup: string) {
      const dir = leaks.trackDir(makeTmp('pw-sib-'));
      const stateDir = leaks.trackDir(makeTmp('pw-sib-state-'));
      const host = startHost('host-cgroup-crash.mjs', [stateDir, dir, mount as string, scenario]);
      leaks.track(host.child.pid);
      hosts.push({ pid: host.child.pid as number, start: startTime(host.child.pid as number) as string });
      const ready = JSON.parse(await host.line('ready')) as {
        supervisorId: string;
        watchdogPid: number;
        parent: string;
      };
      leaks.trackCookie(ready.supervisorId);
      leaks.track(ready.watchdogPid);
      const evil = await readPid(join(dir, 'evil.pid'));
      leaks.track(evil);
      await waitFor(() => cgroupOf(evil)?.endsWith(`/${cgroup}`), { what: 'member in the sibling cgroup' });
      host.child.kill('SIGKILL');
      await waitFor(() => !alive(ready.watchdogPid), { timeoutMs: 20_000, what: 'watchdog done' });
      return {
        evilAlive: alive(evil),
        left: ofHost(host.child.pid as number),
        records: readdirSync(stateDir),
      };
    }

    it('a host SIGKILLed with a member in a sibling cgroup: the watchdog removes it and the parent', async () => {
      expect(await crashWithSibling('sibling', 'evil')).toEqual({ evilAlive: false, left: [], records: [] });
    }, 40_000);

    it("a host SIGKILLed with a member in a sibling cgroup named like a run's: the watchdog removes it too (review)", async () => {
      // Its name made the watchdog take it for another supervisor's run: left, with the parent.
      expect(await crashWithSibling('sibling-named', 'pwevil-1')).toEqual({
        evilAlive: false,
        left: [],
        records: [],
      });
    }, 40_000);
  },
);

describe.skipIf(skip !== null)(`a run's cgroup and its record${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('a host SIGKILLed while a replaceScope run waits: its cgroup is named by a record, and reaped', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-rep-state-'));
    const dir = leaks.trackDir(makeTmp('pw-rep-'));
    const host = startHost('host-cgroup-crash.mjs', [stateDir, dir, mount as string, 'replace']);
    leaks.track(host.child.pid);
    hosts.push({ pid: host.child.pid as number, start: startTime(host.child.pid as number) as string });
    const ready = JSON.parse(await host.line('ready')) as {
      supervisorId: string;
      watchdogPid: number;
      parent: string;
    };
    leaks.trackCookie(ready.supervisorId);
    leaks.track(ready.watchdogPid);
    // B waits for A's grace: its record names its cgroup already.
    const b = `${ready.supervisorId}-2`;
    const record = JSON.parse(readFileSync(join(stateDir, `${b}.json`), 'utf8')) as { cgroupPath: string };
    expect(record.cgroupPath).toBe(join(ready.parent, b));
    host.child.kill('SIGKILL');
    await waitFor(() => !alive(ready.watchdogPid), { timeoutMs: 20_000, what: 'watchdog done' });
    expect(ofHost(host.child.pid as number)).toEqual([]);
    expect(readdirSync(stateDir)).toEqual([]);
  }, 40_000);

  it("a host SIGKILLed with two journals: one watchdog's clearing of the parent leaves the other's run its grace (review)", async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-two-state-'));
    leaks.trackDir(`${stateDir}-b`);
    const dir = leaks.trackDir(makeTmp('pw-two-'));
    const host = startHost('host-cgroup-crash.mjs', [stateDir, dir, mount as string, 'two-journals']);
    leaks.track(host.child.pid);
    hosts.push({ pid: host.child.pid as number, start: startTime(host.child.pid as number) as string });
    const ready = JSON.parse(await host.line('ready')) as {
      supervisorId: string;
      watchdogPid: number;
      otherSupervisorId: string;
      otherWatchdogPid: number;
    };
    for (const id of [ready.supervisorId, ready.otherSupervisorId]) leaks.trackCookie(id);
    for (const pid of [ready.watchdogPid, ready.otherWatchdogPid]) leaks.track(pid);
    host.child.kill('SIGKILL');
    await waitFor(() => !alive(ready.watchdogPid) && !alive(ready.otherWatchdogPid), {
      timeoutMs: 20_000,
      what: 'both watchdogs done',
    });
    // The first watchdog took the other's live run cgroup for a remain and killed it mid-grace.
    expect(existsSync(join(dir, 'cleaned'))).toBe(true);
    expect(ofHost(host.child.pid as number)).toEqual([]);
  }, 40_000);

  it('a run whose cgroup cannot be made is not started, and the record written before the mkdir goes', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-rep-state-'));
    class NestedHost extends CgroupHost {
      // A directory below one that does not exist: the mkdir fails after the record was written.
      override createRun(name: string, before?: (dir: string) => void): string {
        return super.createRun(`missing/${name}`, before);
      }
    }
    const sup = new Supervisor({ stateDir, watchdog: false, cgroups: new NestedHost() });
    expect(() => sup.spawn({ argv: ['true'], containment: 'cgroup' })).toThrow(/cannot create .*missing/);
    expect(readdirSync(stateDir)).toEqual([]);
    expect(sup.journalProblems).toEqual([]);
  });

  it("reap clears a dead supervisor's parent: a stale run cgroup with no record, a member's cgroup and one it named like a run's, their processes killed; another supervisor's run cgroup, journalled elsewhere, is left", async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-rep-state-'));
    const otherStateDir = leaks.trackDir(makeTmp('pw-rep-state-'));
    // Supervisor ids of this (dead-to-be) process, as its guard's reap finds them by name.
    const DEAD = `pw${process.pid.toString(36)}dead00`;
    const OTHER = `pw${process.pid.toString(36)}0c0c0c`;
    // A dead supervisor's parent beside ours: our pid with a start time that is not ours.
    const parent = join(dirname(parentCgroup() as string), `procwarden-${process.pid}-1`);
    made.push(parent);
    const run = join(parent, `${DEAD}-1`);
    const stale = join(parent, `${DEAD}-2`);
    const evil = join(parent, 'evil', 'deeper');
    const other = join(parent, `${OTHER}-1`);
    // Named like a run's by a member: no record names it (review).
    const forged = join(parent, 'pwevil-1');
    for (const d of [run, stale, evil, other, forged]) mkdirSync(d, { recursive: true });
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
    const start = (where: string) => {
      const child = spawn('sleep', ['300'], { stdio: 'ignore', detached: true, env });
      leaks.track(child.pid);
      writeFileSync(join(where, 'cgroup.procs'), String(child.pid));
      return child.pid as number;
    };
    const inStale = start(stale);
    const inEvil = start(evil);
    const inOther = start(other);
    const inForged = start(forged);
    writeFileSync(
      join(stateDir, `${DEAD}-1.json`),
      deadRecord(`${DEAD}-1`, { supervisorId: DEAD, cgroupPath: run, supervisorStart: '1' }),
    );
    // The other supervisor of the dead process journals elsewhere: the guard's reap of that
    // directory ends it, in its own grace.
    const otherRecord = join(otherStateDir, `${OTHER}-1.json`);
    writeFileSync(
      otherRecord,
      deadRecord(`${OTHER}-1`, {
        supervisorId: OTHER,
        cgroupPath: other,
        supervisorStart: '1',
      }),
    );
    // As the dead host's guard does, one state directory at a time.
    const report = await reap({
      stateDir,
      graceMs: 300,
      deadHost: { pid: process.pid, start: null },
    });
    expect(report.runs[0]?.action).toBe('reaped');
    await waitFor(() => !alive(inStale) && !alive(inEvil) && !alive(inForged), {
      timeoutMs: 3000,
      what: 'remains killed',
    });
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(join(parent, 'evil'))).toBe(false);
    expect(existsSync(forged)).toBe(false);
    expect(report.runs[0]?.notes.join('\n')).toMatch(/held 3 process\(es\)/);
    rmSync(otherRecord);
    // Another supervisor of the dead process: its own reap ends it; the parent stays for it.
    expect(alive(inOther)).toBe(true);
    expect(existsSync(other)).toBe(true);
    expect(existsSync(parent)).toBe(true);
    process.kill(inOther, 'SIGKILL');
    await waitFor(() => !alive(inOther), { what: 'other gone' });
    // That reap's part, done by hand here: none of this test's cgroups may be left.
    await waitFor(() => !/populated 1/.test(readFileSync(join(other, 'cgroup.events'), 'utf8')), {
      what: 'other empty',
    });
    rmdirSync(other);
    rmdirSync(parent);
  }, 30_000);
});
