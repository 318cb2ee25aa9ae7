import { existsSync, readFileSync, readlinkSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { reap, Supervisor } from '../src/index.js';
import { cgroupSkipReason } from './helpers/cgroups.js';
import { CLI, startCli } from './helpers/cli.js';
import { journalFiles, startHost } from './helpers/host.js';
import { alive, exists, LeakGuard, makeTmp, readPids, startTime, waitFor } from './helpers/procs.js';

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

/** Loose: catches a reaper that never acts. */
const BOUND = 20_000;

interface Ready {
  supervisorId: string;
  watchdogPid: number | null;
  cgroup: string | null;
}

async function hostWithRun(
  containment: string,
  watchdog: 'on' | 'off',
  script: (dir: string, stateDir: string) => string,
) {
  const dir = leaks.trackDir(makeTmp('pw-claim-'));
  const stateDir = leaks.trackDir(makeTmp('pw-claim-state-'));
  const host = startHost('host-one-run.mjs', [dir, stateDir, containment, watchdog, script(dir, stateDir)]);
  leaks.track(host.child.pid);
  const ready = JSON.parse(await host.line('ready')) as Ready;
  leaks.trackCookie(ready.supervisorId);
  if (ready.watchdogPid) leaks.track(ready.watchdogPid);
  if (ready.cgroup) madeCgroups.push(ready.cgroup);
  const pids = await waitFor(() => (readPids(dir).size === 2 ? readPids(dir) : undefined), {
    what: 'pid files',
  });
  return { dir, stateDir, host, ready, pids };
}

/** A claim as a reaper writes it (src/journal/claim.ts), in our pid namespace. */
function claimBy(pid: number, start: string | null): string {
  return JSON.stringify({
    format: 'procwarden.reap/1',
    pid,
    start,
    pidNamespace: readlinkSync('/proc/self/ns/pid'),
  });
}

describe('concurrent reapers', () => {
  it('the watchdog and a reconcileOnStart find the same orphaned run: its graceful signal is sent once', async () => {
    // A trap whose cleanup takes a while: a second TERM during it is seen in its log.
    const { dir, stateDir, host, ready, pids } = await hostWithRun(
      'process-group',
      'on',
      () =>
        'trap \'echo "TERM $(date +%s.%N)"; sleep 1.5; echo done\' TERM; sleep 300 & echo $! > "$0/sleep.pid"; echo $$ > "$0/sh.pid"; wait; wait',
    );
    host.child.kill('SIGKILL');
    await host.exited;
    const sup = new Supervisor({ stateDir, reconcileOnStart: true, watchdog: false });
    const report = await sup.reconciled;
    await sup.shutdown();
    // Either reaper may win; the other leaves the run to it.
    expect(report?.runs.map((r) => r.action)).toEqual([expect.stringMatching(/^(reaped|claimed)$/)]);
    await waitFor(() => ![...pids.values()].some(alive), { timeoutMs: BOUND, what: 'the run ended' });
    await waitFor(() => ready.watchdogPid === null || !alive(ready.watchdogPid), {
      timeoutMs: BOUND,
      what: 'the watchdog done',
    });
    await waitFor(() => journalFiles(stateDir).length === 0, { timeoutMs: BOUND, what: 'journal emptied' });
    const log = readFileSync(join(dir, 'out'), 'utf8');
    expect(log.match(/^TERM /gm)?.length, log).toBe(1);
    expect(log).toContain('done');
  });

  it('a claim held by a live reaper is left to it; one whose reaper died is taken over', async () => {
    const { stateDir, host, pids } = await hostWithRun('process-group', 'off', () => {
      return 'echo $$ > "$0/sh.pid"; sleep 300 & echo $! > "$0/sleep.pid"; wait';
    });
    host.child.kill('SIGKILL');
    await host.exited;
    const runId = (journalFiles(stateDir).find((f) => f.endsWith('.pid.json')) as string).slice(
      0,
      -'.pid.json'.length,
    );
    const claim = join(stateDir, `${runId}.reap`);
    // A live reaper's claim (our parent stands for one: any live process would do) is respected.
    writeFileSync(claim, claimBy(process.ppid, startTime(process.ppid)), { mode: 0o600 });
    const held = await reap({ stateDir, graceMs: 1000 });
    expect(held.runs.map((r) => r.action)).toEqual(['claimed']);
    expect([...pids.values()].every(alive)).toBe(true);
    expect(exists(claim)).toBe(true);

    // A dead reaper's: its pid now names another process (this one, started at another time).
    writeFileSync(claim, claimBy(process.pid, `${startTime(process.pid)}0`), { mode: 0o600 });
    const taken = await reap({ stateDir, graceMs: 1000 });
    expect(taken.runs.map((r) => r.action)).toEqual(['reaped']);
    await waitFor(() => ![...pids.values()].some(alive), { timeoutMs: BOUND, what: 'the run ended' });
    expect(journalFiles(stateDir)).toEqual([]);
  });
});

describe('a reaper that dies mid-sequence', () => {
  it('the next one takes its claim over and goes on with its sequence: the graceful signal is not sent again', async () => {
    const { dir, stateDir, host, pids } = await hostWithRun(
      'process-group',
      'off',
      () =>
        'trap \'echo "TERM $(date +%s.%N)"; sleep 2; echo done\' TERM; sleep 300 & echo $! > "$0/sleep.pid"; echo $$ > "$0/sh.pid"; wait; wait',
    );
    host.child.kill('SIGKILL');
    await host.exited;
    const runId = (journalFiles(stateDir).find((f) => f.endsWith('.pid.json')) as string).slice(
      0,
      -'.pid.json'.length,
    );
    // A long grace: the first reaper is still in it when it is SIGKILLed.
    const first = startCli(['reap', '--state-dir', stateDir, '--grace', '60s']);
    leaks.track(first.child.pid);
    const log = join(dir, 'out');
    await waitFor(() => exists(log) && readFileSync(log, 'utf8').includes('TERM '), {
      timeoutMs: BOUND,
      what: 'TERM',
    });
    await waitFor(() => existsSync(join(stateDir, `${runId}.stop.json`)), {
      timeoutMs: BOUND,
      what: 'stop record',
    });
    first.child.kill('SIGKILL');
    await first.done;
    expect(existsSync(join(stateDir, `${runId}.reap`))).toBe(true);
    const second = await reap({ stateDir });
    expect(second.runs.map((r) => r.action)).toEqual(['reaped']);
    expect([...pids.values()].some(alive)).toBe(false);
    expect(journalFiles(stateDir)).toEqual([]);
    const text = readFileSync(log, 'utf8');
    expect(text.match(/^TERM /gm)?.length, text).toBe(1);
    expect(text).toContain('done');
  });
});

/**
 * A reap started from inside a run's tree after its host died: the shell that started it is the
 * run's root and the reaper's parent, which a reap never signals. The run is not over: exit 1,
 * INCOMPLETE, the records kept; once that shell is gone, a later reap ends the rest.
 */
async function reapFromInside(containment: 'cgroup' | 'process-group') {
  const { dir, stateDir, host, ready, pids } = await hostWithRun(
    containment,
    'off',
    (d, s) =>
      `(sleep 300) & echo $! > "$0/sleep.pid"; echo $$ > "$0/sh.pid"; while [ ! -e "$0/go" ]; do sleep 0.05; done; "${process.execPath}" "${CLI}" reap --state-dir "${s}" > "${d}/inner.out" 2>&1; echo $? > "$0/inner.status"`,
  );
  host.child.kill('SIGKILL');
  await host.exited;
  const records = journalFiles(stateDir).sort();
  writeFileSync(join(dir, 'go'), '');
  const status = await waitFor(
    () => (exists(join(dir, 'inner.status')) ? readFileSync(join(dir, 'inner.status'), 'utf8').trim() : null),
    { timeoutMs: BOUND, what: 'the inner reap' },
  );
  const inner = readFileSync(join(dir, 'inner.out'), 'utf8');
  // (With the inner reaper's stop record beside them: its signal went out.)
  expect(journalFiles(stateDir), inner).toEqual(expect.arrayContaining(records));
  expect(status, inner).toBe('1');
  expect(inner).toMatch(/INCOMPLETE/);
  expect(inner).toMatch(/is the run's, but it is this reaper's ancestor/);
  await waitFor(() => !alive(pids.get('sh') as number), {
    timeoutMs: BOUND,
    what: 'the run shell exits',
  });
  const later = await reap({ stateDir, graceMs: 1000 });
  expect(later.runs.map((r) => r.action)).toEqual(['reaped']);
  expect([...pids.values()].some(alive)).toBe(false);
  expect(journalFiles(stateDir)).toEqual([]);
  if (ready.cgroup) expect(existsSync(ready.cgroup)).toBe(false);
}

describe('a reap from inside the run (its own ancestors are spared)', () => {
  const skip = cgroupSkipReason();
  it.skipIf(skip !== null)(
    'cgroup: incomplete, exit 1, records kept; a later reap ends it and removes the cgroup',
    () => reapFromInside('cgroup'),
  );
  it('process group: incomplete, exit 1, records kept (not "reaped" with the root alive); a later reap ends it', () =>
    reapFromInside('process-group'));
});
