import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { describeReap } from '../src/cli/reap.js';
import { type ReapReport, reap, Supervisor } from '../src/index.js';
import { type EnvQuery, type ProcessTable, ProcfsTable, type Sweep } from '../src/tree/index.js';
import { sweepCgroups } from './helpers/cgroups.js';
import { journalFiles, startHost } from './helpers/host.js';
import {
  alive,
  fixture,
  LeakGuard,
  makeTmp,
  readPids,
  spawnedStart,
  startTime,
  waitFor,
} from './helpers/procs.js';
import { deadRecord, writableCgroupMount } from './helpers/reap.js';

const leaks = new LeakGuard();
/** Hosts these tests start and kill: what they made must go even when an assertion failed. */
const hosts: { pid: number; start: string }[] = [];
afterEach(async () => {
  const left: string[] = [];
  for (const host of hosts.splice(0)) left.push(...(await sweepCgroups(host)));
  left.push(...(await sweepCgroups())); // and those of this process's own supervisors
  await leaks.check();
  if (left.length > 0) throw new Error(`cgroups left behind (now removed): ${left.join(', ')}`);
});

const cgroups = writableCgroupMount();

/**
 * The parent cgroup a (dead) host's supervisor made, `procwarden-<pid>-<start>` beside ours: by
 * its start too, as a pid number may be another test's host by now.
 */
function hostCgroups(hostPid: number | undefined): string[] {
  const own = readFileSync('/proc/self/cgroup', 'utf8').match(/^0::(.*)$/m)?.[1];
  if (typeof cgroups !== 'string' || own === undefined || !hostPid) return [];
  const name = `procwarden-${hostPid}-${spawnedStart(hostPid)}`;
  try {
    return readdirSync(join(cgroups, own)).filter((n) => n === name);
  } catch {
    return [];
  }
}

/** The pids a host's runs wrote, by "<run dir>/<name>", each dir tracked by the leak guard. */
function hostPids(dir: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const sub of readdirSync(dir)) {
    leaks.trackDir(join(dir, sub));
    for (const [name, pid] of readPids(join(dir, sub))) out.set(`${sub}/${name}`, pid);
  }
  return out;
}

async function startRunsHost() {
  const dir = makeTmp('pw-host-');
  const stateDir = leaks.trackDir(makeTmp('pw-state-'));
  const host = startHost('host-runs.mjs', [dir, stateDir]);
  leaks.track(host.child.pid);
  hosts.push({ pid: host.child.pid as number, start: startTime(host.child.pid as number) as string });
  const ready = JSON.parse(await host.line('ready')) as {
    supervisorId: string;
    runs: string[];
    cgroup: string;
  };
  leaks.trackCookie(ready.supervisorId);
  const pids = hostPids(dir);
  leaks.trackDir(dir);
  return { host, dir, stateDir, ready, pids };
}

describe('reap after a supervisor crash', () => {
  it('a SIGKILLed host: reap ends every tree (escapee included) and empties the journal', async () => {
    const { host, stateDir, ready, pids } = await startRunsHost();
    console.info(`run c containment: cgroup ${ready.cgroup}`);
    // Each run: the record written before its spawn, and the one with its pid.
    expect(journalFiles(stateDir).sort()).toEqual(
      ready.runs.flatMap((id) => [`${id}.json`, `${id}.pid.json`]).sort(),
    );
    host.child.kill('SIGKILL');
    await host.exited;
    // The host is dead; its trees are not.
    expect([...pids.entries()].filter(([, pid]) => !alive(pid))).toEqual([]);

    const dry = await reap({ stateDir, dryRun: true });
    expect(dry.runs.map((r) => r.action)).toEqual(['would-reap', 'would-reap', 'would-reap']);
    expect([...pids.values()].every(alive)).toBe(true);
    expect(journalFiles(stateDir)).toHaveLength(6);
    const escapee = pids.get('b/daemon') as number;
    expect(dry.runs.flatMap((r) => r.members.map((m) => m.pid))).toContain(escapee);

    const report = await reap({ stateDir, graceMs: 300 });
    expect(report.runs.map((r) => r.action)).toEqual(['reaped', 'reaped', 'reaped']);
    expect(report.survivors).toBe(0);
    expect(report.skipped).toEqual([]);
    // The stubborn members ignored SIGTERM: the grace ended in SIGKILL for them only.
    expect(report.runs.reduce((n, r) => n + r.killed, 0)).toBeGreaterThanOrEqual(2);
    expect([...pids.entries()].filter(([, pid]) => alive(pid))).toEqual([]);
    expect(journalFiles(stateDir)).toEqual([]);
    expect(hostCgroups(host.child.pid)).toEqual([]); // its supervisor's parent cgroup too
  });

  it('`procwarden reap` from the command line: zero survivors, empty journal', async () => {
    const { host, stateDir, pids } = await startRunsHost();
    host.child.kill('SIGKILL');
    await host.exited;
    const cli = join(import.meta.dirname, '..', 'dist', 'cli', 'main.js');
    // No member depends on the dead host (not even its pipes): all of them outlive it.
    expect([...pids.entries()].filter(([, pid]) => !alive(pid))).toEqual([]);
    const dry = spawnSync(process.execPath, [cli, 'reap', '--dry-run', '--state-dir', stateDir], {
      encoding: 'utf8',
    });
    expect(dry.status, dry.stderr).toBe(0);
    expect(dry.stdout, dry.stdout + dry.stderr).toContain('would reap');
    expect([...pids.entries()].filter(([, pid]) => !alive(pid))).toEqual([]); // a dry run signals nothing
    const real = spawnSync(
      process.execPath,
      [cli, 'reap', '--json', '--grace', '300ms', '--state-dir', stateDir],
      {
        encoding: 'utf8',
      },
    );
    expect(real.status).toBe(0);
    const report = JSON.parse(real.stdout) as ReapReport;
    expect(report.runs.map((r) => r.action)).toEqual(['reaped', 'reaped', 'reaped']);
    expect(report.survivors).toBe(0);
    expect([...pids.entries()].filter(([, pid]) => alive(pid))).toEqual([]);
    expect(journalFiles(stateDir)).toEqual([]);
    const bad = spawnSync(process.execPath, [cli, 'reap', '--grace', 'soon'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr.trim().split('\n')[0]).toMatch(/procwarden reap: .*soon/);
  });

  it('two live supervisors never reap each other', async () => {
    const { host, stateDir, pids } = await startRunsHost();
    const sup = new Supervisor({ stateDir });
    leaks.trackCookie(sup.id);
    const mine = sup.spawn({ argv: ['sleep', '300'] });
    leaks.track(mine.pid);
    await waitFor(() => journalFiles(stateDir).length === 8, { what: 'four runs recorded' });

    // This process reaps while the host lives: the host's runs are not touched.
    const ours = await sup.reconcileOrphans({ graceMs: 300 });
    expect(ours.runs.map((r) => r.action)).toEqual(Array(4).fill('supervisor-alive'));
    // The host reaps while we live: our run is not touched.
    host.child.stdin?.write('reconcile\n');
    const theirs = JSON.parse(await host.line('reconciled')) as ReapReport;
    expect(theirs.runs.map((r) => r.action)).toEqual(Array(4).fill('supervisor-alive'));
    expect([...pids.values()].every(alive)).toBe(true);
    expect(mine.state).toBe('running');
    expect(journalFiles(stateDir)).toHaveLength(8);

    host.child.kill('SIGKILL');
    await host.exited;
    const after = await sup.reconcileOrphans({ graceMs: 300 });
    expect(after.runs.filter((r) => r.action === 'reaped')).toHaveLength(3);
    expect(after.runs.filter((r) => r.action === 'supervisor-alive').map((r) => r.runId)).toEqual([mine.id]);
    expect([...pids.values()].filter(alive)).toEqual([]);
    mine.cancel();
    expect((await mine.result).reason).toBe('cancelled');
    expect(journalFiles(stateDir)).toEqual([]);
  });

  it('corrupt and foreign files are reported and left alone; a valid record is still reaped', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    writeFileSync(join(stateDir, 'broken.json'), '{"format": "procwarden.run/1", "runId": ');
    writeFileSync(join(stateDir, 'other.json'), JSON.stringify({ format: 'someone-else/3', pid: 1 }));
    writeFileSync(join(stateDir, 'bad-fields.json'), JSON.stringify({ format: 'procwarden.run/1', pid: -4 }));
    writeFileSync(join(stateDir, 'notes.txt'), 'hello');
    // A record written before its spawn (no pid yet) by a supervisor that is dead: our pid with a
    // start time that is not ours. Only the cookie can find its command.
    const cookie = `pwtestdead${process.pid}-1`;
    const orphan = spawn('sleep', ['300'], {
      detached: true,
      stdio: 'ignore',
      env: { ...process.env, PROCWARDEN_RUN: cookie },
    });
    leaks.track(orphan.pid);
    await waitFor(() => startTime(orphan.pid as number), { what: 'orphan started' });
    writeFileSync(join(stateDir, `${cookie}.json`), deadRecord(cookie, { cookie, command: 'sleep 300' }));

    const report = await reap({ stateDir });
    expect(report.skipped.map((s) => s.file).sort()).toEqual([
      'bad-fields.json',
      'broken.json',
      'notes.txt',
      'other.json',
    ]);
    expect(report.skipped.find((s) => s.file === 'bad-fields.json')?.problem).toMatch(/pid/);
    expect(report.runs).toHaveLength(1);
    expect(report.runs[0]?.action).toBe('reaped');
    expect(report.runs[0]?.members.map((m) => m.pid)).toEqual([orphan.pid]);
    await waitFor(() => !alive(orphan.pid as number), { what: 'orphan gone' });
    expect(journalFiles(stateDir).sort()).toEqual([
      'bad-fields.json',
      'broken.json',
      'notes.txt',
      'other.json',
    ]);
  });

  it('a host that exits with live runs: the exit hook SIGKILLs their group; reconcileOnStart clears the records', async () => {
    const dir = leaks.trackDir(makeTmp('pw-host-'));
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const host = startHost('host-exit.mjs', [dir, stateDir]);
    const hostStart = startTime(host.child.pid as number);
    if (hostStart) hosts.push({ pid: host.child.pid as number, start: hostStart });
    const id = await host.line('ready');
    leaks.trackCookie(id);
    expect((await host.exited).code).toBe(0);
    const pids = readPids(dir);
    expect(pids.size).toBe(2);
    // Synchronous at exit: gone by the time the exit is seen, give or take the kernel's delivery.
    await waitFor(() => [...pids.values()].every((p) => !alive(p)), { timeoutMs: 2000, what: 'tree gone' });
    // The launch record at least: this host exits in the same tick as its spawn, before the
    // record with the pid is written (the cookie covers that window).
    expect(journalFiles(stateDir)).toContain(`${id}-1.json`);

    const sup = new Supervisor({ stateDir, reconcileOnStart: true });
    const report = (await sup.reconciled) as ReapReport;
    expect(report.runs.map((r) => [r.action, r.members.length])).toEqual([['reaped', 0]]);
    expect(journalFiles(stateDir)).toEqual([]);
    expect(hostCgroups(host.child.pid)).toEqual([]);
  });

  for (const how of ['untrusted', 'killed', 'stopped'] as const) {
    const what = {
      untrusted: 'its records could not be written (a state directory anyone may write)',
      killed: 'its watchdog was SIGKILLed and the host never heard of it',
      stopped: 'its watchdog is stopped (SIGSTOP)',
    }[how];
    it(`a host that exits when ${what}: the exit hook kills the run itself`, async () => {
      const dir = leaks.trackDir(makeTmp('pw-host-'));
      const stateDir = leaks.trackDir(makeTmp('pw-state-'));
      if (how === 'untrusted') chmodSync(stateDir, 0o777);
      const host = startHost('host-unguarded.mjs', [dir, stateDir, how]);
      leaks.track(host.child.pid);
      const hostStart = startTime(host.child.pid as number);
      if (hostStart) hosts.push({ pid: host.child.pid as number, start: hostStart });
      const watchdog = Number(await host.line('ready'));
      leaks.track(watchdog);
      expect((await host.exited).code).toBe(0);
      const pids = readPids(dir);
      for (const pid of pids.values()) leaks.track(pid);
      expect(pids.size).toBe(2);
      // Before the fix: left to a watchdog that had no record to go by, or was dead or stopped.
      await waitFor(() => [...pids.values()].every((p) => !alive(p)), { timeoutMs: 3000, what: 'tree gone' });
      if (how === 'stopped') process.kill(watchdog, 'SIGKILL');
      await waitFor(() => !alive(watchdog), { timeoutMs: 5000, what: 'the watchdog gone' });
      chmodSync(stateDir, 0o700);
    });
  }

  it('a cgroup path that is not below a cgroup2 mount is refused: what it lists is left alone', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const fake = leaks.trackDir(makeTmp('pw-fake-cgroup-'));
    const bystander = spawn('sleep', ['300'], { stdio: 'ignore' });
    leaks.track(bystander.pid);
    // Named as procwarden names its cgroups, so that only the mount check refuses it.
    const cgroupPath = join(fake, `procwarden-${process.pid}-1`, 'run');
    mkdirSync(cgroupPath, { recursive: true });
    writeFileSync(join(cgroupPath, 'cgroup.procs'), `${bystander.pid}\n`);
    const record = deadRecord('pwtestdead-9', { cgroupPath, supervisorStart: '1' });
    writeFileSync(join(stateDir, 'pwtestdead-9.json'), record);
    const report = await reap({ stateDir, graceMs: 200 });
    expect(report.runs[0]).toMatchObject({ action: 'refused', members: [] });
    expect(report.runs[0]?.refused.join(' ')).toMatch(/not below a cgroup2 mount/);
    expect(journalFiles(stateDir)).toEqual(['pwtestdead-9.json']); // kept: a person must look at it
    expect(alive(bystander.pid as number)).toBe(true);
    const gone = new Promise((resolve) => bystander.once('exit', resolve));
    bystander.kill('SIGKILL');
    await gone;
  });

  describe.skipIf(typeof cgroups !== 'string')(
    `a cgroup run (${typeof cgroups === 'string' ? 'cgroup v2 available' : `skipped: ${cgroups.why}`})`,
    () => {
      const dirs: string[] = [];
      afterEach(() => {
        // Whatever happened, the cgroups this test made go away (their processes first).
        for (const d of dirs.reverse()) {
          try {
            writeFileSync(join(d, 'cgroup.kill'), '1');
          } catch {}
        }
        for (const d of dirs) {
          for (let i = 0; i < 100 && existsSync(d); i++) {
            try {
              rmdirSync(d);
            } catch {
              Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
            }
          }
        }
        dirs.length = 0;
      });

      it('reap finds its members through the cgroup (nested ones too), kills them and removes the cgroup', async () => {
        const stateDir = leaks.trackDir(makeTmp('pw-state-'));
        // Named as a dead supervisor's run cgroup: our pid with a start time that is not ours.
        const parent = join(cgroups as string, `procwarden-${process.pid}-1`);
        const cg = join(parent, `pw-reap-test-${Date.now()}`);
        const inner = join(cg, 'inner');
        mkdirSync(inner, { recursive: true });
        dirs.push(parent, cg, inner);
        // No cookie, no recorded pid: only the cgroup ties these to the run. One ignores SIGTERM.
        const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
        const plain = spawn('sleep', ['300'], { stdio: 'ignore', detached: true, env });
        const stubborn = spawn('/bin/sh', ['-c', 'trap "" TERM; while :; do sleep 0.05; done'], {
          stdio: 'ignore',
          detached: true,
          env,
        });
        leaks.track(plain.pid);
        leaks.track(stubborn.pid);
        writeFileSync(join(cg, 'cgroup.procs'), String(plain.pid));
        writeFileSync(join(inner, 'cgroup.procs'), String(stubborn.pid));
        const record = deadRecord('pwtestdead-7', { cgroupPath: cg, supervisorStart: '1' });
        writeFileSync(join(stateDir, 'pwtestdead-7.json'), record);

        const report = await reap({ stateDir, graceMs: 300 });
        expect(report.runs[0]?.action).toBe('reaped');
        expect(report.runs[0]?.members.map((m) => m.pid)).toEqual(
          expect.arrayContaining([plain.pid, stubborn.pid]),
        );
        expect(report.runs[0]?.killed).toBeGreaterThanOrEqual(1);
        expect(alive(plain.pid as number)).toBe(false);
        expect(alive(stubborn.pid as number)).toBe(false);
        expect(existsSync(cg)).toBe(false);
        expect(existsSync(parent)).toBe(false); // the dead supervisor's parent cgroup too
        expect(journalFiles(stateDir)).toEqual([]);
      });
    },
  );
});

describe('reap of a run that was ending when its supervisor died (a stop record)', () => {
  /**
   * record-signals.sh: a parent and a child that record every signal; in `stay` mode only SIGKILL
   * ends them, else they exit once they recorded one.
   */
  /** A fixture's tree, as a dead host's run would have left it; ready once it wrote `count` pids. */
  async function deadRunTree(cookie: string, script: string, args: string[], count: number) {
    const dir = leaks.trackDir(makeTmp('pw-stop-'));
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const tree = spawn(fixture(script), [dir, ...args], {
      detached: true,
      stdio: 'ignore',
      env: { ...process.env, PROCWARDEN_RUN: cookie },
    });
    leaks.track(tree.pid);
    await waitFor(() => readPids(dir).size === count, { what: `${script} up` });
    for (const pid of readPids(dir).values()) leaks.track(pid);
    const pid = tree.pid as number;
    return { dir, stateDir, pid };
  }

  const recordingTree = (cookie: string, stay = true) =>
    deadRunTree(cookie, 'record-signals.sh', stay ? ['stay'] : [], 2);

  function writeRecords(
    stateDir: string,
    runId: string,
    pid: number,
    stopping: Record<string, unknown>,
  ): void {
    const fields = { pid, pidStart: startTime(pid), pgid: pid, cookie: runId, graceMs: 5000 };
    writeFileSync(join(stateDir, `${runId}.pid.json`), deadRecord(runId, fields), { mode: 0o600 });
    const stop = deadRecord(runId, { ...fields, stopping });
    writeFileSync(join(stateDir, `${runId}.stop.json`), stop, { mode: 0o600 });
  }

  it('what was signalled before is not signalled again, and SIGKILL comes at the recorded deadline', async () => {
    const runId = 'pwtestdead-stop-1';
    const { dir, stateDir, pid } = await recordingTree(runId);
    // Stopped 4 s ago with a 5 s grace: 1 s is left, not 5. Both members got the signal then.
    const signalled = [...readPids(dir).values()].map((p) => `${p}@${startTime(p)}`);
    const atMs = Date.now() - 4000;
    writeRecords(stateDir, runId, pid, { signal: 'SIGUSR1', atMs, graceMs: 5000, signalled });
    const t0 = Date.now();
    const report = await reap({ stateDir });
    const end = Date.now();
    expect(report.runs.map((r) => r.action)).toEqual(['reaped']);
    expect(report.runs[0]?.killed).toBeGreaterThanOrEqual(2);
    expect(report.runs[0]?.notes.join('\n')).toContain('its sequence was taken over');
    // SIGKILL at the recorded deadline, not before (clock granularity aside)...
    expect(end).toBeGreaterThanOrEqual(atMs + 5000 - 20);
    expect(end - t0).toBeLessThan(4000); // ...and not after a whole grace again (5 s)
    // Neither USR1 (sent by the dead host) nor the record's SIGTERM reached them from reap.
    expect(existsSync(join(dir, 'parent.sig')) || existsSync(join(dir, 'child.sig'))).toBe(false);
    expect(journalFiles(stateDir)).toEqual([]);
  });

  it("members the first signal did not reach get the recorded signal, not the record's own", async () => {
    const runId = 'pwtestdead-stop-2';
    // They exit once they recorded it: what is left of the grace (4 s) is time to record it, on a
    // loaded machine too, and costs nothing.
    const { dir, stateDir, pid } = await recordingTree(runId, false);
    writeRecords(stateDir, runId, pid, {
      signal: 'SIGUSR1',
      atMs: Date.now() - 1000,
      graceMs: 5000,
      signalled: [],
    });
    const report = await reap({ stateDir });
    expect(report.runs.map((r) => r.action)).toEqual(['reaped']);
    for (const who of ['parent', 'child'])
      expect(readFileSync(join(dir, `${who}.sig`), 'utf8'), who).toBe('USR1\n');
  });

  it("a taken-over SIGINT: members that ignore it (a script's background jobs) get the record's killSignal", async () => {
    const runId = 'pwtestdead-stop-int';
    const { dir, stateDir, pid } = await deadRunTree(runId, 'bg-jobs.sh', [], 3);
    writeRecords(stateDir, runId, pid, {
      signal: 'SIGINT',
      atMs: Date.now(),
      graceMs: 20_000,
      signalled: [],
    });
    const report = await reap({ stateDir });
    expect(report.runs.map((r) => r.action)).toEqual(['reaped']);
    expect(report.runs[0]?.killed).toBe(0);
    expect(readFileSync(join(dir, 'job1.sig'), 'utf8')).toBe('TERM\n');
    for (const pid of readPids(dir).values()) expect(alive(pid)).toBe(false);
  });

  it('a record dated in the future (a clock stepped back since) does not put SIGKILL off', async () => {
    const runId = 'pwtestdead-stop-3';
    const { stateDir, pid } = await recordingTree(runId);
    writeRecords(stateDir, runId, pid, {
      signal: 'SIGUSR1',
      atMs: Date.now() + 3_600_000,
      graceMs: 1000,
      signalled: [],
    });
    const t0 = Date.now();
    const report = await reap({ stateDir });
    expect(report.runs.map((r) => r.action)).toEqual(['reaped']);
    // At most the whole grace (1 s), not an hour and a second.
    expect(Date.now() - t0).toBeLessThan(5000);
  });
});

describe("reap's scans", () => {
  // A forker's SIGTERM handler starts a late child and exits: re-parented away at once, the child
  // is tied to the run by its cookie only, and a scan that reads it during its exec sees no
  // environment at all. The zero-survivor fuzz met it (a host SIGKILLed, its watchdog left the late
  // child alive, 5 cases in 240); here the table shows the holder that way to the first sweeps.
  it('a cookie holder caught between two execs is waited for, not taken for nothing left', async () => {
    const runId = 'pwtestdead-exec-1';
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const holder = spawn('sleep', ['30'], {
      detached: true,
      stdio: 'ignore',
      env: { ...process.env, PROCWARDEN_RUN: runId },
    });
    leaks.track(holder.pid);
    const pid = holder.pid as number;
    await waitFor(() => readFileSync(`/proc/${pid}/environ`, 'utf8').includes(runId), {
      what: 'holder exec done',
    });
    writeFileSync(join(stateDir, `${runId}.json`), deadRecord(runId, { cookie: runId }), { mode: 0o600 });
    const inner = new ProcfsTable();
    let hidden = 2;
    const table: ProcessTable = {
      name: 'procfs',
      list: () => inner.list(),
      get: (p) => inner.get(p),
      findByEnv: (name, value, listName) => inner.findByEnv(name, value, listName),
      births: () => inner.births(),
      sweep: async (query: EnvQuery): Promise<Sweep> => {
        const sweep = await inner.sweep(query);
        if (hidden <= 0 || !sweep.holders.has(pid)) return sweep;
        hidden--;
        const holders = new Set([...sweep.holders].filter((p) => p !== pid));
        return { ...sweep, holders, unsettled: (sweep.unsettled ?? 0) + 1 };
      },
    };
    const report = await reap({ stateDir, table });
    expect(report.runs.map((r) => r.action)).toEqual(['reaped']);
    expect(report.runs[0]?.members.map((m) => m.pid)).toEqual([pid]);
    await waitFor(() => !alive(pid), { what: 'holder gone' });
    expect(hidden).toBe(0);
  });
});

describe("procwarden reap's text report", () => {
  it('prints what a member could name (its command, a cgroup in a note) without control or format characters (review)', () => {
    const evil = '\u001b[2J\u001b]0;PWNED\u0007\nfake row\u202e';
    const report: ReapReport = {
      stateDir: '/state',
      dryRun: false,
      skipped: [],
      survivors: 0,
      runs: [
        {
          runId: 'pwx-1',
          files: [],
          supervisorId: 'pwx',
          supervisorPid: 42,
          command: 'x',
          action: 'reaped',
          members: [{ pid: 7, command: evil }],
          signalled: 1,
          killed: 0,
          escaped: 0,
          cgroupPath: null,
          notes: [`removed cgroup(s) a member made in /p: ${evil}`],
          refused: [`pid 8 (${evil})`],
        },
      ],
    };
    const text = describeReap(report);
    expect([...text].filter((c) => c !== '\n' && /[\p{Cc}\p{Cf}]/u.test(c))).toEqual([]);
    // One line per member, note and refusal: no row a member's name could add.
    expect(text.split('\n')).toHaveLength(6);
  });
});
