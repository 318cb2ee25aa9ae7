import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isProcwardenError, reap, Supervisor } from '../src/index.js';
import { HostGuard } from '../src/watchdog/guard.js';
import { cgroupSkipReason, hostCgroups } from './helpers/cgroups.js';
import { startCli } from './helpers/cli.js';
import { journalFiles, startHost } from './helpers/host.js';
import { alive, cookieHolders, LeakGuard, makeTmp, readPids, startTime, waitFor } from './helpers/procs.js';
import { ptySkipReason } from './helpers/pty.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** Loose: catches a guard that never acts (a grace of 2 s, a Node start-up, a loaded machine). */
const BOUND = 25_000;

interface Ready {
  supervisorId: string;
  guardPid: number;
  hostPid: number;
  runPid: number | null;
  cgroup: string | null;
}

const modes: [string, string | null][] = [
  ['process-group', null],
  ['cgroup', cgroupSkipReason()],
  ['pty', ptySkipReason()],
];

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

function status(pid: number, field: string): string {
  try {
    return (
      new RegExp(`^${field}:\\s*(.*)$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? ''
    );
  } catch {
    return '';
  }
}

function start(scenario: string, args: string[], env: Record<string, string> = {}) {
  const dir = leaks.trackDir(makeTmp('pw-guard-'));
  const stateDir = leaks.trackDir(makeTmp('pw-guard-state-'));
  const host = startHost('host-guard.mjs', [scenario, dir, stateDir, ...args], env);
  leaks.track(host.child.pid);
  return { dir, stateDir, host };
}

async function ready(host: ReturnType<typeof startHost>, line = 'ready'): Promise<Ready> {
  const r = JSON.parse(await host.line(line)) as Ready;
  leaks.trackCookie(r.supervisorId);
  leaks.track(r.guardPid);
  return r;
}

/** Nothing of the host's runs is left: no member, no cookie holder, no record, no cgroup. */
async function expectNothingLeft(r: Ready, dir: string, stateDir: string): Promise<void> {
  await waitFor(() => !alive(r.guardPid), { timeoutMs: BOUND, what: 'the guard done' });
  for (const pid of readPids(dir).values()) expect(alive(pid), `pid ${pid}`).toBe(false);
  expect(cookieHolders(r.supervisorId)).toEqual([]);
  expect(leaks.survivors()).toEqual([]);
  expect(journalFiles(stateDir)).toEqual([]);
  expect(await hostCgroups(r.hostPid)).toEqual([]);
}

describe('no window: a host SIGKILLed at any moment after spawn() returns leaves nothing', () => {
  for (const [mode, skip] of modes) {
    for (const delay of [0, 5, 10, 20]) {
      it.skipIf(skip !== null)(
        `${mode}, ${delay} ms after spawn()${skip ? ` (skipped: ${skip})` : ''}`,
        async () => {
          const { dir, stateDir, host } = start('window', [mode, String(delay)]);
          const r = await ready(host);
          expect(r.guardPid).toBeGreaterThan(1);
          expect((await host.exited).signal).toBe('SIGKILL');
          await expectNothingLeft(r, dir, stateDir);
        },
      );
    }
  }
});

describe('one light guard per host process', () => {
  it('20 supervisors share one guard, a shell of a few MiB, that exists before the first run does', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-guard-state-'));
    const sups = Array.from({ length: 20 }, () => new Supervisor({ stateDir }));
    const runs = sups.map((sup) => sup.spawn({ argv: ['sleep', '30'], containment: 'process-group' }));
    for (const run of runs) leaks.track(run.pid);
    const guards = new Set(sups.map((sup) => sup.watchdogPid));
    expect(guards.size).toBe(1);
    const guard = [...guards][0] as number;
    expect(cmdline(guard).split('\0')).toContain('procwarden-guard');
    // Older than every run's process: it was there first.
    for (const run of runs)
      expect(BigInt(startTime(guard) ?? 'x') <= BigInt(startTime(run.pid as number) ?? '0')).toBe(true);
    const rssKiB = Number(/^(\d+) kB$/.exec(status(guard, 'VmRSS'))?.[1]);
    expect(rssKiB).toBeGreaterThan(0);
    expect(rssKiB).toBeLessThanOrEqual(4 * 1024);
    await Promise.all(sups.map((sup) => sup.shutdown({ graceMs: 0 })));
    expect(sups.flatMap((sup) => sup.problems)).toEqual([]);
  });
});

describe('never lost silently', () => {
  for (const how of ['SIGKILL', 'SIGSTOP'] as const) {
    it(`a guard ${how === 'SIGKILL' ? 'killed' : 'stopped'} while runs are in flight is replaced at once, and the new one ends the runs when the host dies`, async () => {
      const { dir, stateDir, host } = start('hold', ['process-group']);
      const r = await ready(host);
      process.kill(r.guardPid, how);
      const next = JSON.parse(await host.line('guard')) as { pid: number; problems: string[] };
      leaks.track(next.pid);
      expect(next.pid).not.toBe(r.guardPid);
      expect(next.problems.join('\n')).toMatch(/guard lost/);
      // The stopped one is not left to be continued into a second reaper.
      await waitFor(() => !alive(r.guardPid), { what: 'the old guard gone' });
      host.child.kill('SIGKILL');
      await expectNothingLeft({ ...r, guardPid: next.pid }, dir, stateDir);
      expect(readFileSync(join(dir, 'cleanup.done'), 'utf8')).toContain('cleaned');
    });
  }

  it('a guard that cannot be had: spawn() throws GUARD_UNAVAILABLE and starts nothing; watchdog: false runs unguarded', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-guard-state-'));
    const sup = new Supervisor({ stateDir, guard: new HostGuard('/nonexistent/sh') } as never);
    let thrown: unknown;
    try {
      sup.spawn({ argv: ['sleep', '30'] });
    } catch (error) {
      thrown = error;
    }
    expect(isProcwardenError(thrown) && thrown.code).toBe('GUARD_UNAVAILABLE');
    expect((thrown as Error).message).toMatch(/watchdog: false/);
    expect(sup.list()).toEqual([]);
    expect(journalFiles(stateDir)).toEqual([]);
    const unguarded = new Supervisor({ stateDir, watchdog: false });
    const run = unguarded.spawn({ argv: ['true'] });
    expect((await run.result).reason).toBe('exit');
    expect(unguarded.watchdogPid).toBeUndefined();
  });

  it('the CLI says so in one line and runs nothing (exit 125) when its guard cannot be had', async () => {
    // A copy of the built package without its reaper: the guard would have nothing to start.
    const root = leaks.trackDir(makeTmp('pw-guard-pkg-'));
    const dist = join(process.cwd(), 'dist');
    const copy = spawn('cp', ['-r', dist, join(root, 'dist')]);
    await new Promise((r) => copy.once('exit', r));
    writeFileSync(join(root, 'package.json'), readFileSync(join(process.cwd(), 'package.json')));
    rmSync(join(root, 'dist', 'watchdog', 'main.cjs'));
    const dir = leaks.trackDir(makeTmp('pw-guard-'));
    const child = spawn(
      process.execPath,
      [join(root, 'dist', 'cli', 'main.js'), 'run', '--', 'sh', '-c', 'echo $$ > "$0/ran"', dir],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    leaks.track(child.pid);
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const code = await new Promise((r) => child.once('exit', r));
    expect(code).toBe(125);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/guard/);
    expect(existsSync(join(dir, 'ran'))).toBe(false);
  });
});

describe('signal-proof', () => {
  it('TERM, INT, HUP and QUIT to the guard leave it as it was; SIGTERM to host and guard together: the guard ends the runs', async () => {
    const { dir, stateDir, host } = start('hold', ['process-group']);
    const r = await ready(host);
    for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'] as const) process.kill(r.guardPid, sig);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(alive(r.guardPid)).toBe(true);
    expect(host.lines.some((l) => l.startsWith('guard '))).toBe(false);
    process.kill(r.hostPid, 'SIGTERM');
    process.kill(r.guardPid, 'SIGTERM');
    expect((await host.exited).signal).toBe('SIGTERM');
    await expectNothingLeft(r, dir, stateDir);
    // Gracefully: the trapper's cleanup ran.
    expect(readFileSync(join(dir, 'cleanup.done'), 'utf8')).toContain('cleaned');
  });
});

describe('the reaper, started after the host died', () => {
  it("a SIGTERM sprayed at the guard's process group while its reaper starts (before it can ignore it) does not stop the reaping", async () => {
    const { dir, stateDir, host } = start('hold', ['process-group']);
    const r = await ready(host);
    host.child.kill('SIGKILL');
    // The guard leads its own group: only it and its reaper are in there.
    const until = Date.now() + 300;
    while (Date.now() < until) {
      try {
        process.kill(-r.guardPid, 'SIGTERM');
      } catch {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await expectNothingLeft(r, dir, stateDir);
  });
});

describe('a guard killed again and again', () => {
  it('is not replaced in a loop: past 5 losses in 2 s the host stops forking, says so, and replaces it once that stops', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-guard-state-'));
    const guard = new HostGuard();
    const sup = new Supervisor({ stateDir, guard } as never);
    const run = sup.spawn({ argv: ['sleep', '30'], containment: 'process-group' });
    leaks.track(run.pid);
    const started = guard.started;
    // Each guard killed as soon as it is there: the replacements come within far less than 2 s.
    for (let i = 0; i < 10 && sup.watchdogPid !== undefined; i++) {
      const pid = sup.watchdogPid;
      process.kill(pid, 'SIGKILL');
      await waitFor(() => sup.watchdogPid !== pid, { what: 'the loss seen' });
    }
    expect(sup.watchdogPid).toBeUndefined();
    expect(guard.started - started).toBeLessThanOrEqual(5);
    expect(sup.problems.join('\n')).toMatch(/something keeps ending it/);
    // Once the losses are older than the window, the check replaces it.
    await waitFor(() => sup.watchdogPid !== undefined && alive(sup.watchdogPid), {
      timeoutMs: 10_000,
      what: 'a guard again',
    });
    await sup.shutdown({ graceMs: 0 });
    // A guard of its own: this test ends it (the process's shared one lives as long as the process).
    process.kill(sup.watchdogPid as number, 'SIGKILL');
  });
});

describe('no usable state directory', () => {
  it('records fall back to $XDG_RUNTIME_DIR/procwarden, the guard reads them there, problems say so', async () => {
    const runtime = leaks.trackDir(makeTmp('pw-guard-runtime-'));
    const dir = leaks.trackDir(makeTmp('pw-guard-'));
    // A state directory below a file: ENOTDIR, for root too (a read-only mode is not, for root).
    const host = startHost('host-guard.mjs', ['hold', dir, '/dev/null/state', 'process-group'], {
      XDG_RUNTIME_DIR: runtime,
    });
    leaks.track(host.child.pid);
    const r = await ready(host);
    expect(readdirSync(join(runtime, 'procwarden')).some((f) => f.startsWith(r.supervisorId))).toBe(true);
    host.child.kill('SIGKILL');
    await expectNothingLeft(r, dir, join(runtime, 'procwarden'));
  });

  it('procwarden reap names a fallback directory that holds records', async () => {
    const runtime = leaks.trackDir(makeTmp('pw-guard-runtime-'));
    mkdirSync(join(runtime, 'procwarden'), { mode: 0o700 });
    writeFileSync(join(runtime, 'procwarden', 'pwx000000-1.json'), '{}', { mode: 0o600 });
    const stateDir = leaks.trackDir(makeTmp('pw-guard-state-'));
    const r = await startCli(['reap', '--dry-run'], {
      env: { XDG_RUNTIME_DIR: runtime, PROCWARDEN_STATE_DIR: stateDir },
    }).done;
    expect(r.stderr).toBe(
      `procwarden reap: records also in ${runtime}/procwarden: procwarden reap --state-dir ${runtime}/procwarden\n`,
    );
  });

  it('none at all, from the CLI: the command runs, and one stderr line says it is unguarded', async () => {
    const r = await startCli(['run', '--', 'sh', '-c', 'echo ran'], {
      env: {
        PROCWARDEN_STATE_DIR: '/dev/null/state',
        XDG_RUNTIME_DIR: '/dev/null/runtime',
        TMPDIR: '/dev/null/tmp',
      },
    }).done;
    expect(r.status).toBe(0);
    expect(r.stdout.toString()).toBe('ran\n');
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^procwarden run: warning: run \S+: not journalled anywhere .*crash/);
  });

  it('none at all: the run starts, problems and a NOT_JOURNALLED warning say it is unguarded', async () => {
    const sup = new Supervisor({ stateDir: '/dev/null/state' });
    const saved = { runtime: process.env.XDG_RUNTIME_DIR, tmp: process.env.TMPDIR };
    process.env.XDG_RUNTIME_DIR = '/dev/null/runtime';
    process.env.TMPDIR = '/dev/null/tmp';
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const sup2 = new Supervisor({ stateDir: '/dev/null/state' });
      const run = sup2.spawn({ argv: ['true'] });
      expect((await run.result).reason).toBe('exit');
      expect(sup2.problems.join('\n')).toMatch(/not journalled anywhere/);
      await waitFor(() => warnings.length > 0, { what: 'the warning' });
      expect((warnings[0] as { code?: string }).code).toBe('NOT_JOURNALLED');
    } finally {
      process.off('warning', onWarning);
      process.env.XDG_RUNTIME_DIR = saved.runtime;
      process.env.TMPDIR = saved.tmp;
      if (saved.runtime === undefined) delete process.env.XDG_RUNTIME_DIR;
      if (saved.tmp === undefined) delete process.env.TMPDIR;
      await sup.shutdown();
    }
  });
});

describe('own records only', () => {
  it("a dead host's reap reads and touches only that host's records, however many others there are", async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-guard-state-'));
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    const record = (supervisorId: string, supervisorPid: number, n: number) => ({
      format: 'procwarden.run/1',
      supervisorId,
      supervisorPid,
      supervisorStart: '1',
      runId: `${supervisorId}-${n}`,
      pid: null,
      pidStart: null,
      pgid: null,
      cookie: `${supervisorId}-${n}`,
      cgroupPath: null,
      startedAt: Date.now(),
      killSignal: 'SIGTERM',
      graceMs: 100,
      command: 'none',
    });
    // 2000 records of other dead supervisors (pids no process has), one of the dead host's own.
    for (let i = 0; i < 2000; i++) {
      const id = `pw${(4_000_000 + i).toString(36)}abcdef`;
      writeFileSync(join(stateDir, `${id}-1.json`), JSON.stringify(record(id, 4_000_000 + i, 1)), {
        mode: 0o600,
      });
    }
    const host = 4_100_000;
    const own = `pw${host.toString(36)}012345`;
    writeFileSync(join(stateDir, `${own}-7.json`), JSON.stringify(record(own, host, 7)), { mode: 0o600 });
    const report = await reap({ stateDir, deadHost: { pid: host, start: '1' } });
    expect(report.runs.map((run) => run.runId)).toEqual([`${own}-7`]);
    expect(report.runs[0]?.action).toBe('reaped');
    expect(journalFiles(stateDir)).toHaveLength(2000);
  });
});

describe("a write cut by the host's death", () => {
  it("the dead host's broken temporary record goes at once; another writer's young one stays", async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-guard-state-'));
    const host = 4_100_001; // no process has it: the host is gone, and nobody writes under its name
    const own = `pw${host.toString(36)}012345-3.pid.json.tmp`;
    const other = `pw${(4_100_002).toString(36)}012345-3.pid.json.tmp`;
    for (const name of [own, other]) writeFileSync(join(stateDir, name), '{"runId": "pw', { mode: 0o600 });
    await reap({ stateDir, deadHost: { pid: host, start: '1' } });
    expect(journalFiles(stateDir)).toEqual([other]);
  });
});

describe('inheritFds', () => {
  it("refuses the host's end of the guard's pipe, and starts nothing", async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-guard-state-'));
    const sup = new Supervisor({ stateDir });
    const first = sup.spawn({ argv: ['sleep', '30'], containment: 'process-group' });
    leaks.track(first.pid);
    // Node's stdio pipes are socket pairs: the host's end is one of this process's sockets.
    const sockets = readdirSync('/proc/self/fd')
      .map(Number)
      .filter((n) => {
        try {
          return n > 2 && readlinkSync(`/proc/self/fd/${n}`).startsWith('socket:');
        } catch {
          return false;
        }
      });
    let thrown: unknown;
    for (const fd of sockets) {
      try {
        const run = sup.spawn({ argv: ['true'], inheritFds: [fd], containment: 'process-group' });
        await run.result;
      } catch (error) {
        thrown = error;
        break;
      }
    }
    expect(isProcwardenError(thrown) && thrown.code).toBe('INVALID_OPTION');
    expect((thrown as Error).message).toMatch(/guard/);
    expect(alive(first.pid as number)).toBe(true);
    await sup.shutdown({ graceMs: 0 });
  });
});

describe('takeover keeps the host rules', () => {
  for (const [mode, skip] of modes.filter(([m]) => m !== 'pty')) {
    it.skipIf(skip !== null)(
      `${mode}: what a TERM trap forked after the first signal gets no TERM from the guard either; the grace's end takes it${skip ? ` (skipped: ${skip})` : ''}`,
      async () => {
        const { dir, stateDir, host } = start('late', ['1500', mode]);
        const r = await ready(host, 'cancelled');
        // The host dies in the grace, with the late fork running its cleanup.
        host.child.kill('SIGKILL');
        const late = await waitFor(() => readPids(dir).get('late'), { what: 'the late fork' });
        await waitFor(() => !alive(late), { timeoutMs: BOUND, what: 'the late fork ended' });
        expect(existsSync(join(dir, 'late.sig')) ? readFileSync(join(dir, 'late.sig'), 'utf8') : '').toBe('');
        await expectNothingLeft(r, dir, stateDir);
      },
    );
  }
});
