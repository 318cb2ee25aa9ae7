import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor } from '../src/index.js';
import { BlindTable, procfsProblem } from '../src/tree/index.js';
import { CLI, startCli } from './helpers/cli.js';
import { journalFiles } from './helpers/host.js';
import { alive, exists, fixture, killEach, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** The watchdog a CLI process started, once it listens (it names itself then). */
function watchdogOf(pid: number): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('\0procwarden-guard\0'))
        return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

describe('procwarden timeout SIGKILLed', () => {
  it('the command receives the -s signal (USR1), as under coreutils timeout, and the journal is emptied', async () => {
    const dir = leaks.trackDir(makeTmp('pw-tk-'));
    const stateDir = leaks.trackDir(makeTmp('pw-tk-state-'));
    const script =
      'trap \'echo usr1 > "$1/usr1.done"; exit 0\' USR1; echo $$ > "$1/main.pid"; while :; do sleep 0.05; done';
    const cli = startCli(['timeout', '-s', 'USR1', '25', 'bash', '-c', script, 'cmd', dir], {
      env: { PROCWARDEN_STATE_DIR: stateDir },
    });
    const pid = cli.child.pid as number;
    leaks.track(pid);
    const watchdog = await waitFor(() => watchdogOf(pid), { what: 'the watchdog listening' });
    leaks.track(watchdog);
    await waitFor(() => readPids(dir).get('main'), { what: 'the command running' });
    cli.child.kill('SIGKILL');
    await waitFor(() => exists(join(dir, 'usr1.done')), { timeoutMs: 20_000, what: 'USR1 delivered' });
    await waitFor(() => !alive(readPids(dir).get('main') as number), { what: 'the command gone' });
    await waitFor(() => !alive(watchdog), { timeoutMs: 20_000, what: 'the watchdog gone' });
    expect(journalFiles(stateDir)).toEqual([]);
  });
});

describe('procwarden timeout without -k, SIGKILLed', () => {
  it('a command that ignores the signal gets the default grace from the watchdog, then SIGKILL', async () => {
    // timeout(1) never SIGKILLs without -k while it lives; after its crash nobody could end that
    // wait, and the watchdog would live as long as the tree.
    const dir = leaks.trackDir(makeTmp('pw-tk-'));
    const stateDir = leaks.trackDir(makeTmp('pw-tk-state-'));
    // The pid after the trap: the test kills the host once the pid file is there.
    const script = 'trap "" TERM; echo $$ > "$1/main.pid"; while :; do sleep 0.05; done';
    const cli = startCli(['timeout', '40', 'bash', '-c', script, 'cmd', dir], {
      env: { PROCWARDEN_STATE_DIR: stateDir },
    });
    const pid = cli.child.pid as number;
    leaks.track(pid);
    const watchdog = await waitFor(() => watchdogOf(pid), { what: 'the watchdog listening' });
    leaks.track(watchdog);
    const main = await waitFor(() => readPids(dir).get('main'), { what: 'the command running' });
    const killedAt = Date.now();
    cli.child.kill('SIGKILL');
    await waitFor(() => !alive(main), { timeoutMs: 20_000, what: 'the command gone' });
    // The default grace (5 s), and not much more; it was never, before.
    expect(Date.now() - killedAt).toBeGreaterThan(4000);
    await waitFor(() => !alive(watchdog), { timeoutMs: 20_000, what: 'the watchdog gone' });
    expect(journalFiles(stateDir)).toEqual([]);
  }, 40_000);
});

describe('a /proc that is not ours', () => {
  it('is detected: missing, of another PID namespace', () => {
    const root = makeTmp('pw-fakeproc-');
    try {
      expect(procfsProblem(join(root, 'nothing'))).toMatch(/not usable \(ENOENT\)/);
      mkdirSync(join(root, 'proc'));
      symlinkSync('12', join(root, 'proc', 'self'));
      expect(procfsProblem(join(root, 'proc'), 1)).toMatch(
        /another PID namespace \(.*self is 12, this process is 1\)/,
      );
      expect(procfsProblem()).toBeNull();
    } finally {
      spawnSync('rm', ['-rf', root]);
    }
  });

  it('with no table to trust, a run is held by its group and its child, ends in bounded time, and says so', async () => {
    const dir = leaks.trackDir(makeTmp('pw-blind-'));
    const sup = new Supervisor({ table: new BlindTable('test: /proc is foreign'), journal: false });
    const script = 'sleep 300 & echo $! > "$1/sleeper.pid"; echo $$ > "$1/shell.pid"; wait';
    const handle = sup.spawn({ argv: ['sh', '-c', script, 'sh', dir], graceMs: 1000 });
    const pids = await waitFor(() => readPids(dir).size === 2 && readPids(dir), { what: 'the tree up' });
    handle.cancel();
    const result = await handle.result;
    expect(result.reason).toBe('cancelled');
    expect(result.containment).toBe('process-group');
    expect(result.containmentFallback).toMatch(
      /test: \/proc is foreign: the run is held by its process group/,
    );
    for (const pid of pids.values()) expect(alive(pid)).toBe(false);
  });
});

describe('a /proc that is not ours, and a group that only a zombie holds', () => {
  // Without a /proc of our own, kill(-pgid, 0) is all there is, and it answers for a zombie too (as
  // for the orphans PID 1 of a namespace does not reap). Here the zombie's parent lives on outside
  // the group, so the group stays held after SIGKILL for as long as the test wants.
  it('SIGKILL is said once, and the report says the group may be zombies', async () => {
    const dir = leaks.trackDir(makeTmp('pw-blind-'));
    const sup = new Supervisor({ table: new BlindTable('test: /proc is foreign'), journal: false });
    const handle = sup.spawn({
      argv: ['/usr/bin/perl', fixture('zombie-in-group.pl'), dir],
      graceMs: 200,
    });
    const text = await waitFor(
      () => exists(join(dir, 'zombie.pids')) && readFileSync(join(dir, 'zombie.pids'), 'utf8'),
      {
        what: 'the zombie in the group',
      },
    );
    const [parent, zombie] = text.trim().split(' ').map(Number) as [number, number];
    leaks.track(parent);
    handle.cancel();
    const result = await handle.result;
    expect(readFileSync(`/proc/${zombie}/stat`, 'utf8')).toMatch(/\) Z /);
    const kills = result.tree.report?.members[0]?.signals.filter((s) => s.signal === 'SIGKILL') ?? [];
    expect(kills).toHaveLength(1);
    expect(result.tree.notes.join('\n')).toMatch(/still has members after SIGKILL: they may be zombies/);
    process.kill(parent, 'SIGKILL');
    await waitFor(() => !alive(parent), { what: 'the zombie parent gone' });
  }, 30_000);
});

/** Why `unshare` with these options cannot run here, or null. */
function unshareSkip(options: string[]): string | null {
  const probe = spawnSync('unshare', [...options, 'true'], { encoding: 'utf8', timeout: 10_000 });
  if (probe.error) return `unshare unavailable: ${probe.error.message}`;
  return probe.status === 0 ? null : `unshare ${options.join(' ')} fails here: ${probe.stderr.trim()}`;
}

/**
 * The CLI as the first process of a new PID namespace. Pids inside are not ours to read, so what
 * it leaves is found by a marker in its environment, and the leak check kills by host pid.
 */
async function inNamespace(options: string[], args: string[]) {
  const mark = makeTmp('pw-ns-');
  const started = Date.now();
  const child = spawn('unshare', [...options, process.execPath, CLI, ...args], {
    env: { ...process.env, PW_NS_MARK: mark, PROCWARDEN_STATE_DIR: join(mark, 'state') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  leaks.track(child.pid);
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString('utf8');
  });
  const status = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const elapsed = Date.now() - started;
  const left = marked(mark);
  killEach(left);
  spawnSync('rm', ['-rf', mark]);
  return { status, elapsed, left, stderr };
}

function marked(mark: string): number[] {
  const needle = `PW_NS_MARK=${mark}\0`;
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => {
      try {
        return alive(pid) && readFileSync(`/proc/${pid}/environ`, 'utf8').includes(needle);
      } catch {
        return false;
      }
    });
}

const FOREIGN = ['--pid', '--fork', '--map-root-user'];
const PID1 = ['--pid', '--fork', '--mount-proc'];

for (const [title, options] of [
  ['a PID namespace without its own /proc (unshare --pid --fork --map-root-user)', FOREIGN],
  ['procwarden as PID 1 with its own /proc (unshare --pid --fork --mount-proc)', PID1],
] as const) {
  const skip = unshareSkip([...options]);
  describe.skipIf(skip !== null)(`${title}${skip ? ` (skipped: ${skip})` : ''}`, () => {
    it('run -- true exits 0, in seconds, leaving nothing', async () => {
      const r = await inNamespace([...options], ['run', '--', 'true']);
      expect(r.status, r.stderr).toBe(0);
      expect(r.elapsed).toBeLessThan(30_000);
      expect(r.left).toEqual([]);
    });

    it('timeout .1 sleep 60 exits 124, in seconds, leaving nothing', async () => {
      const r = await inNamespace([...options], ['timeout', '.1', 'sleep', '60']);
      expect(r.status, r.stderr).toBe(124);
      expect(r.elapsed).toBeLessThan(30_000);
      expect(r.left).toEqual([]);
    });
  });
}
