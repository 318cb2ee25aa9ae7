import { existsSync, readdirSync, readFileSync, readlinkSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cgroupSkipReason } from './helpers/cgroups.js';
import { type Host, journalFiles, startHost } from './helpers/host.js';
import { alive, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';
import { ptySkipReason } from './helpers/pty.js';

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
      // gone already, or its parent still holds another run's
    }
  }
  await leaks.check();
});

const GRACE = 500;
/** Loose: catches a watchdog that never acts; the real figures are in bench/watchdog.mjs. */
const BOUND = GRACE + 15_000;

interface Ready {
  supervisorId: string;
  watchdogPid: number;
  cgroups: (string | null)[];
  containment: string[];
}

/** A host with its three runs up (its guard exists before the first run's process does). */
async function hostWithRuns(mode: string, how: string, env: Record<string, string> = {}) {
  const dir = leaks.trackDir(makeTmp('pw-wd-'));
  const stateDir = leaks.trackDir(makeTmp('pw-wd-state-'));
  const host: Host = startHost('host-dies.mjs', [dir, stateDir, mode, how, String(GRACE)], env);
  leaks.track(host.child.pid);
  const ready = JSON.parse(await host.line('ready')) as Ready;
  leaks.trackCookie(ready.supervisorId);
  leaks.track(ready.watchdogPid);
  for (const c of ready.cgroups) if (c) madeCgroups.push(c);
  expect(cmdline(ready.watchdogPid)).toContain('\0procwarden-guard\0');
  return { dir, stateDir, host, ready, members: [...readAllPids(dir).values()] };
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

/** `<run>/<member>` -> pid, for every pid file under the host's directory. */
function readAllPids(dir: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const run of readdirSync(dir, { withFileTypes: true })) {
    if (!run.isDirectory()) continue;
    for (const [name, pid] of readPids(join(dir, run.name))) out.set(`${run.name}/${name}`, pid);
  }
  return out;
}

function sockets(pid: number): Set<string> {
  const out = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (link.startsWith('socket:')) out.add(link);
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    // gone
  }
  return out;
}

/** Everything the runs started is gone, the journal is empty and no cgroup is left. */
async function expectAllEnded(run: Awaited<ReturnType<typeof hostWithRuns>>): Promise<void> {
  const { members, ready, stateDir } = run;
  await waitFor(() => members.every((p) => !alive(p)), { timeoutMs: BOUND, what: 'every member gone' });
  await waitFor(() => !alive(ready.watchdogPid), { timeoutMs: BOUND, what: 'watchdog gone' });
  expect(journalFiles(stateDir)).toEqual([]);
  for (const c of ready.cgroups) {
    if (c) {
      expect(existsSync(c)).toBe(false);
      expect(existsSync(dirname(c))).toBe(false);
    }
  }
}

/** The trapper got the graceful signal first: its cleanup ran before anything harder came. */
function expectCleanupRan(dir: string, pty: boolean): void {
  if (pty) expect(readFileSync(join(dir, 'trap', 'signals'), 'utf8')).toMatch(/TERM|HUP/);
  else expect(readFileSync(join(dir, 'trap', 'cleanup.done'), 'utf8')).toContain('cleaned');
  expect(readFileSync(join(dir, 'setsid', 'escapee.done'), 'utf8')).toContain('got-term');
}

const modes: [string, string | null][] = [
  ['process-group', null],
  ['cgroup', cgroupSkipReason()],
  ['pty', ptySkipReason()],
];

describe('the watchdog ends the trees of a host that died', () => {
  for (const [mode, skip] of modes) {
    it.skipIf(skip !== null)(
      `SIGKILL of the host, ${mode}${skip ? ` (skipped: ${skip})` : ''}: trapper, TERM ignorer and setsid escapee all end, the trapper cleaned up, journal and cgroups gone`,
      async () => {
        const run = await hostWithRuns(mode, 'wait');
        if (mode === 'cgroup') expect(run.ready.containment).toEqual(['cgroup', 'cgroup', 'cgroup']);
        // No run holds the host's end of the watchdog's pipe (else its EOF would wait for them).
        const hostSockets = sockets(run.host.child.pid as number);
        for (const pid of run.members) for (const s of sockets(pid)) expect(hostSockets.has(s)).toBe(false);
        run.host.child.kill('SIGKILL');
        await expectAllEnded(run);
        expectCleanupRan(run.dir, mode === 'pty');
      },
    );
  }

  it('an uncaught exception in the host: the same', async () => {
    const run = await hostWithRuns('process-group', 'throw');
    expect((await run.host.exited).code).toBe(1);
    await expectAllEnded(run);
    expectCleanupRan(run.dir, false);
  });

  it('process.exit(3) in the host without shutdown: the same, gracefully (the exit hook leaves it to the watchdog)', async () => {
    const run = await hostWithRuns('process-group', 'exit');
    expect((await run.host.exited).code).toBe(3);
    await expectAllEnded(run);
    expectCleanupRan(run.dir, false);
  });

  it("starts without the host's NODE_OPTIONS and NODE_EXTRA_CA_CERTS (a debugger port, a TLS bundle are not its)", async () => {
    const certs = join(makeTmp('pw-wd-certs-'), 'none.pem');
    leaks.trackDir(dirname(certs));
    const run = await hostWithRuns('process-group', 'shutdown', {
      NODE_OPTIONS: '--no-deprecation',
      NODE_EXTRA_CA_CERTS: certs,
    });
    const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    expect(environ(run.host.child.pid ?? 0)).toContain(`NODE_EXTRA_CA_CERTS=${certs}`);
    const names = environ(run.ready.watchdogPid).map((e) => e.slice(0, e.indexOf('=')));
    expect(names).not.toContain('NODE_OPTIONS');
    expect(names).not.toContain('NODE_EXTRA_CA_CERTS');
    run.host.child.stdin?.end('go\n');
    expect((await run.host.exited).code).toBe(0);
    await waitFor(() => !alive(run.ready.watchdogPid), { timeoutMs: BOUND, what: 'watchdog gone' });
    const decoy = Number(readFileSync(join(run.dir, 'decoy.pid'), 'utf8'));
    leaks.track(decoy);
    process.kill(decoy, 'SIGKILL');
    await waitFor(() => !alive(decoy), { what: 'decoy gone' });
  });

  it('a normal shutdown: the watchdog exits having signalled nothing, and the host exits by itself', async () => {
    const run = await hostWithRuns('process-group', 'shutdown');
    run.host.child.stdin?.end('go\n');
    expect(await run.host.line('shut')).toBe('3 runs');
    // Neither the watchdog nor its pipe keeps the host's event loop alive.
    expect((await run.host.exited).code).toBe(0);
    await waitFor(() => !alive(run.ready.watchdogPid), { timeoutMs: BOUND, what: 'watchdog gone' });
    // A record of this supervisor names the decoy: a watchdog that reaped would have ended it.
    const decoy = Number(readFileSync(join(run.dir, 'decoy.pid'), 'utf8'));
    leaks.track(decoy);
    expect(alive(decoy)).toBe(true);
    process.kill(decoy, 'SIGKILL');
    await waitFor(() => !alive(decoy), { what: 'decoy gone' });
    expect(journalFiles(run.stateDir)).toEqual([`${run.ready.supervisorId}-decoy.pid.json`]);
  });
});

describe('a host that dies while its run is ending', () => {
  it('the watchdog goes on with that sequence: the same signal, not sent twice, the same deadline', async () => {
    const dir = leaks.trackDir(makeTmp('pw-wd-'));
    const stateDir = leaks.trackDir(makeTmp('pw-wd-state-'));
    const grace = 2000;
    const host = startHost('host-cancels.mjs', [dir, stateDir, 'SIGUSR1', String(grace)]);
    leaks.track(host.child.pid);
    const ready = JSON.parse(await host.line('ready')) as {
      watchdogPid: number;
      cgroup: string | null;
      supervisorId: string;
    };
    leaks.trackCookie(ready.supervisorId);
    leaks.track(ready.watchdogPid);
    if (ready.cgroup) madeCgroups.push(ready.cgroup);
    const members = [...readPids(dir).values()];
    for (const pid of members) leaks.track(pid);
    await host.line('cancelled');
    const cancelled = Date.now();
    // The host dies 1 s into the 2 s grace: a watchdog that started over would give 2 s more.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    host.child.kill('SIGKILL');
    await waitFor(() => members.every((p) => !alive(p)), {
      timeoutMs: BOUND + grace,
      what: 'every member gone',
    });
    const gone = Date.now();
    // Each member got the cancel's USR1 once, from the host; the watchdog did not send the record's
    // SIGTERM, nor USR1 again (a trap's cleanup would start over).
    for (const who of ['parent', 'child']) {
      expect(readFileSync(join(dir, `${who}.sig`), 'utf8'), who).toBe('USR1\n');
    }
    // The members stay for anything but SIGKILL: they lived out the grace the cancel gave them.
    expect(gone - cancelled).toBeGreaterThanOrEqual(grace - 500);
    // SIGKILL at the cancel's deadline, not a whole grace after the crash (3 s and more).
    expect(gone - cancelled).toBeLessThan(2900);
    await waitFor(() => !alive(ready.watchdogPid), { timeoutMs: BOUND, what: 'watchdog gone' });
    expect(journalFiles(stateDir)).toEqual([]);
  });
});
