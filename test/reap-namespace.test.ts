import { spawn, spawnSync } from 'node:child_process';
import { existsSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { reap } from '../src/index.js';
import { cgroupSkipReason } from './helpers/cgroups.js';
import { CLI } from './helpers/cli.js';
import { journalFiles, startHost } from './helpers/host.js';
import {
  alive,
  fixture,
  killEach,
  LeakGuard,
  makeTmp,
  readPids,
  startTime,
  waitFor,
} from './helpers/procs.js';
import { deadRecord } from './helpers/reap.js';

const leaks = new LeakGuard();
const madeCgroups: string[] = [];
afterEach(async () => {
  // Whatever happened, cgroups the hosts made go (their processes first): none may leak.
  for (const dir of madeCgroups.splice(0).flatMap((d) => [d, dirname(d)])) {
    try {
      writeFileSync(join(dir, 'cgroup.kill'), '1');
    } catch {
      // gone already
    }
    try {
      rmdirSync(dir);
    } catch {
      // gone already
    }
  }
  await leaks.check();
});

/** Loose: catches a reap or watchdog that never acts. */
const BOUND = 20_000;

function unshareSkipReason(): string | null {
  if (process.getuid?.() !== 0) return 'not root: unshare --pid needs it';
  const probe = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { timeout: 10_000 });
  return probe.status === 0 ? null : `unshare --pid does not work here: ${probe.stderr}`;
}
const noUnshare = unshareSkipReason();

const modes: [string, string | null][] = [
  ['process-group', noUnshare],
  ['cgroup', noUnshare ?? cgroupSkipReason()],
];

describe('reap from another pid namespace', () => {
  for (const [containment, skip] of modes) {
    for (const mountProc of [true, false]) {
      it.skipIf(skip !== null)(
        `${containment}: ${mountProc ? 'with its own /proc' : 'with the host\u2019s /proc (foreign)'}, it judges nothing, says so, exits 1, and the live supervisor's records stay for its watchdog`,
        async () => {
          const dir = leaks.trackDir(makeTmp('pw-ns-'));
          const stateDir = leaks.trackDir(makeTmp('pw-ns-state-'));
          const host = startHost('host-one-run.mjs', [dir, stateDir, containment, 'on']);
          leaks.track(host.child.pid);
          const ready = JSON.parse(await host.line('ready')) as {
            watchdogPid: number;
            cgroup: string | null;
          };
          leaks.track(ready.watchdogPid);
          if (ready.cgroup) madeCgroups.push(ready.cgroup);
          const sleeper = readPids(dir).get('sleep') as number;
          const records = journalFiles(stateDir).sort();
          expect(records.length).toBeGreaterThan(0);

          const r = spawnSync(
            'unshare',
            ['--pid', '--fork', ...(mountProc ? ['--mount-proc'] : []), process.execPath, CLI, 'reap'],
            { encoding: 'utf8', timeout: 30_000, env: { ...process.env, PROCWARDEN_STATE_DIR: stateDir } },
          );
          // The live supervisor's records and run are untouched, and the reaper says it could not judge.
          expect(journalFiles(stateDir).sort(), r.stdout).toEqual(records);
          expect(alive(sleeper)).toBe(true);
          expect(r.status, r.stdout + r.stderr).toBe(1);
          expect(r.stdout).toContain('NOT JUDGED');
          expect(r.stdout).toMatch(mountProc ? /pid namespace pid:\[\d+\]/ : /\/proc\/self/);

          // The records were worth keeping: the host's death now leaves the run to its watchdog.
          host.child.kill('SIGKILL');
          await waitFor(() => !alive(sleeper), { timeoutMs: BOUND, what: 'the run ended by the watchdog' });
          await waitFor(() => journalFiles(stateDir).length === 0, {
            timeoutMs: BOUND,
            what: 'journal emptied',
          });
          if (ready.cgroup)
            await waitFor(() => !existsSync(ready.cgroup as string), { what: 'cgroup removed' });
        },
      );
    }
  }
});

function timeNamespaceSkipReason(): string | null {
  if (process.getuid?.() !== 0) return 'not root: unshare --time needs it';
  const probe = spawnSync('unshare', ['--time', '--boottime', '1000', '--fork', 'true'], { timeout: 10_000 });
  return probe.status === 0
    ? null
    : `unshare --time does not work here (no time namespaces?): ${probe.stderr}`;
}
const noTimeNamespace = timeNamespaceSkipReason();

describe('reap from another time namespace (start times in /proc are shifted there)', () => {
  for (const [containment, skip] of [
    ['process-group', noTimeNamespace],
    ['cgroup', noTimeNamespace ?? cgroupSkipReason()],
  ] as const) {
    it.skipIf(skip !== null)(
      `${containment}: a live supervisor is not judged dead, its run and records stay for its watchdog`,
      async () => {
        const dir = leaks.trackDir(makeTmp('pw-timens-'));
        const stateDir = leaks.trackDir(makeTmp('pw-timens-state-'));
        const host = startHost('host-one-run.mjs', [dir, stateDir, containment, 'on']);
        leaks.track(host.child.pid);
        const ready = JSON.parse(await host.line('ready')) as { watchdogPid: number; cgroup: string | null };
        leaks.track(ready.watchdogPid);
        if (ready.cgroup) madeCgroups.push(ready.cgroup);
        const sleeper = readPids(dir).get('sleep') as number;
        const records = journalFiles(stateDir).sort();
        const r = spawnSync(
          'unshare',
          ['--time', '--boottime', '1000', '--fork', process.execPath, CLI, 'reap', '--grace', '0'],
          { encoding: 'utf8', timeout: 30_000, env: { ...process.env, PROCWARDEN_STATE_DIR: stateDir } },
        );
        expect(alive(sleeper), r.stdout).toBe(true);
        expect(journalFiles(stateDir).sort(), r.stdout).toEqual(records);
        expect(r.status, r.stdout + r.stderr).toBe(1);
        expect(r.stdout).toContain('NOT JUDGED');
        expect(r.stdout).toMatch(/time namespace time:\[\d+\]/);
        host.child.kill('SIGKILL');
        await waitFor(() => !alive(sleeper), { timeoutMs: BOUND, what: 'the run ended by the watchdog' });
        await waitFor(() => journalFiles(stateDir).length === 0, {
          timeoutMs: BOUND,
          what: 'journal emptied',
        });
        if (ready.cgroup)
          await waitFor(() => !existsSync(ready.cgroup as string), { what: 'cgroup removed' });
      },
    );
  }
});

describe('a record that does not say its pid namespace (written by an older procwarden)', () => {
  it('is not judged: its run is left alone, the record kept, and the report says why', async () => {
    const dir = leaks.trackDir(makeTmp('pw-ns-'));
    const stateDir = leaks.trackDir(makeTmp('pw-ns-state-'));
    const cookie = `pwtestold${process.pid}-1`;
    leaks.trackCookie(cookie);
    const child = spawn('sh', ['-c', 'echo $$ > "$0/sleep.pid"; exec sleep 300', dir], {
      detached: true,
      stdio: 'ignore',
      env: { ...process.env, PROCWARDEN_RUN: cookie, FIXTURE_DIR: dir },
    });
    leaks.track(child.pid);
    const pid = await waitFor(() => readPids(dir).get('sleep'), { what: 'sleep' });
    // Its supervisor is dead here (our pid, another start time); whether it was in our namespace is unknown.
    const file = join(stateDir, `${cookie}.pid.json`);
    writeFileSync(
      file,
      deadRecord(cookie, {
        supervisorPidNamespace: undefined,
        pid,
        pidStart: startTime(pid),
        pgid: pid,
        cookie,
      }),
      { mode: 0o600 },
    );
    const report = await reap({ stateDir, graceMs: 500 });
    expect(report.runs.map((r) => r.action)).toEqual(['not-judged']);
    expect(report.runs[0]?.notes.join(' ')).toMatch(/does not say which pid namespace/);
    expect(alive(pid)).toBe(true);
    expect(journalFiles(stateDir)).toEqual([`${cookie}.pid.json`]);
    killEach([pid]);
    await waitFor(() => !alive(pid), { what: 'sleep gone' });
  });
});

describe('a record of an older procwarden whose supervisor is visibly alive', () => {
  it("is left alone as any live supervisor's: supervisor-alive, not a failure", async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-ns-state-'));
    const runId = `pwtestold${process.pid}-2`;
    // Its supervisor is this process, pid and start time: alive here, whatever namespace wrote it.
    writeFileSync(
      join(stateDir, `${runId}.json`),
      deadRecord(runId, {
        supervisorPidNamespace: undefined,
        supervisorStart: startTime(process.pid),
        cookie: runId,
      }),
      { mode: 0o600 },
    );
    const report = await reap({ stateDir });
    expect(report.runs.map((r) => r.action)).toEqual(['supervisor-alive']);
    expect(journalFiles(stateDir)).toEqual([`${runId}.json`]);
  });
});

describe('a supervisor pid reused after a crash in the tick the Supervisor was made', () => {
  it.skipIf(noUnshare !== null)(
    'the launch record carries the start time: the squatter is not taken for the supervisor, the run is reaped (needs root and unshare)',
    () => {
      const stateDir = leaks.trackDir(makeTmp('pw-ns-state-'));
      const library = join(import.meta.dirname, '..', 'dist', 'index.js');
      // Everything started in the namespace dies with its pid 1 (bash) when this returns.
      const r = spawnSync(
        'unshare',
        [
          '--pid',
          '--fork',
          '--mount-proc',
          'bash',
          '-c',
          'node "$0" "$1" "$2"; true',
          fixture('reused-supervisor-pid.mjs'),
          library,
          stateDir,
        ],
        { encoding: 'utf8', timeout: 30_000 },
      );
      const line = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}');
      expect(line.reused, r.stderr).toBe(true);
      expect(line.runSleepFound).toBe(true);
      expect(line.records).toBe(1);
      expect(line.action).toBe('reaped');
      expect(line.runSleepAlive).toBe(false);
      expect(line.squatterAlive).toBe(true);
      expect(journalFiles(stateDir)).toEqual([]);
    },
  );
});
