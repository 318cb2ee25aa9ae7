import { spawn, spawnSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, type CliOptions, startCli } from './helpers/cli.js';
import { alive, exists, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const COREUTILS = '/usr/bin/timeout';
const hasCoreutils = existsSync(COREUTILS);

async function timeout(args: string[], options: CliOptions = {}) {
  const cli = startCli(['timeout', ...args], options);
  leaks.track(cli.child.pid);
  const t = Date.now();
  const r = await cli.done;
  return { ...r, ms: Date.now() - t };
}

/**
 * coreutils timeout(1) with the same arguments, C locale (ASCII quotes); its prog name normalised.
 * Settles on exit, not on pipe close: what coreutils leaves alive may hold the pipes forever.
 */
async function coreutils(args: string[]) {
  const child = spawn(COREUTILS, args, {
    env: { ...process.env, LC_ALL: 'C' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  leaks.track(child.pid);
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  // A shell's view of the status: coreutils kills itself along with its group on -s KILL.
  const status = await new Promise<number | null>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0))),
  );
  await Promise.race([new Promise((r) => child.once('close', r)), new Promise((r) => setTimeout(r, 300))]);
  child.stderr?.destroy();
  return { status, stderr: stderr.replaceAll(`${COREUTILS}:`, 'timeout:') };
}

/** Our stderr as coreutils would print it, for comparison. */
const asCoreutils = (stderr: string) =>
  stderr
    .replaceAll('procwarden timeout:', 'timeout:')
    .replaceAll("'procwarden timeout --help'", `'${COREUTILS} --help'`);

describe('procwarden timeout: as timeout(1) documents it', () => {
  it('basic: the command is signalled after DURATION, exit 124', async () => {
    const r = await timeout(['0.3', 'sleep', '30']);
    expect(r.status).toBe(124);
    expect(r.ms).toBeLessThan(20_000);
    expect(r.stderr).toBe('');
  });

  it('0 disables the timeout', async () => {
    expect((await timeout(['0', 'sh', '-c', 'sleep 0.3; exit 4'])).status).toBe(4);
  });

  it('suffixes s m h d and floating point forms', async () => {
    expect((await timeout(['0.005m', 'sleep', '30'])).status).toBe(124);
    expect((await timeout(['.3s', 'sleep', '30'])).status).toBe(124);
    expect((await timeout(['3e-1', 'sleep', '30'])).status).toBe(124);
    expect((await timeout(['1h', 'true'])).status).toBe(0);
    // Longer than Node's 24.8-day timer limit, which would otherwise fire after 1 ms.
    expect((await timeout(['30d', 'sh', '-c', 'sleep 0.5; exit 5'])).status).toBe(5);
  });

  it("exit status propagation: the command's code, 128+N when it died of signal N", async () => {
    expect((await timeout(['5', 'sh', '-c', 'exit 3'])).status).toBe(3);
    expect((await timeout(['5', 'sh', '-c', 'kill -USR1 $$'])).status).toBe(138);
  });

  it('--preserve-status: the status of the timed-out command', async () => {
    expect((await timeout(['--preserve-status', '0.2', 'sleep', '30'])).status).toBe(143);
    expect((await timeout(['--preserve-status', '-s', 'INT', '0.2', 'sleep', '30'])).status).toBe(130);
    const dir = leaks.trackDir(makeTmp());
    expect((await timeout(['--preserve-status', '1', fixture('trap-cleanup.sh'), dir])).status).toBe(0);
  });

  it('-s: the signal to send; KILL gives 137', async () => {
    expect((await timeout(['-s', 'KILL', '0.2', 'sleep', '30'])).status).toBe(137);
    expect((await timeout(['-s9', '0.2', 'sleep', '30'])).status).toBe(137);
    expect((await timeout(['--signal=HUP', '--preserve-status', '0.2', 'sleep', '30'])).status).toBe(129);
  });

  it('-k: SIGKILL after the kill-after delay when SIGTERM is ignored, exit 137', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await timeout(['-k', '0.5', '1', fixture('ignore-term.sh'), dir]);
    expect(r.status).toBe(137);
    expect(r.ms).toBeGreaterThanOrEqual(1500);
    expect(alive(readPids(dir).get('main') ?? 0)).toBe(false);
  });

  it('a command that handles the signal and exits still gives 124', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await timeout(['1', fixture('trap-cleanup.sh'), dir]);
    expect(r.status).toBe(124);
    expect(r.stdout.toString()).toContain('cleanup done');
    expect(exists(join(dir, 'cleanup.done'))).toBe(true);
  });

  it('-v says which signal it sends, as timeout(1) does', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await timeout(['-v', '-k', '0.3', '1', fixture('ignore-term.sh'), dir]);
    expect(r.status).toBe(137);
    const own = r.stderr.split('\n').filter((l) => l.startsWith('procwarden timeout'));
    expect(own).toEqual([
      `procwarden timeout: sending signal TERM to command '${fixture('ignore-term.sh')}'`,
      `procwarden timeout: sending signal KILL to command '${fixture('ignore-term.sh')}'`,
    ]);
  });

  it.skipIf(!hasCoreutils)('-v lines are the ones coreutils prints (compared live)', async () => {
    for (const args of [
      ['-v', '0.2', 'sleep', '30'],
      ['-v', '-s', 'HUP', '0.2', 'sleep', '30'],
      ['-v', '-s', '9', '0.2', 'sleep', '30'],
    ]) {
      const ours = await timeout(args);
      const theirs = await coreutils(args);
      expect({ status: ours.status, stderr: asCoreutils(ours.stderr) }).toEqual(theirs);
    }
  });

  it('--foreground: only the command is signalled; its children are not timed out (as in timeout(1))', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await timeout(['--foreground', '1', fixture('parent-exits.sh'), dir]);
    expect(r.status).toBe(124);
    const child = readPids(dir).get('child') ?? 0;
    expect(alive(readPids(dir).get('parent') ?? 0)).toBe(false);
    expect(alive(child)).toBe(true);
    expect(exists(join(dir, 'child.done'))).toBe(false);
    process.kill(child, 'SIGKILL');
    await waitFor(() => !alive(child), { what: 'child gone' });
  });

  it('--foreground with -k: SIGKILL to the command, exit 137', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await timeout(['--foreground', '-k', '0.2', '1', fixture('ignore-term.sh'), dir]);
    expect(r.status).toBe(137);
  });

  it('stdin and stdout are the caller’s own', async () => {
    const r = await timeout(['5', 'tr', 'a-z', 'A-Z'], { input: 'abc\n' });
    expect(r.stdout.toString()).toBe('ABC\n');
  });

  it.skipIf(!existsSync('/usr/bin/script'))('the command sees the caller’s TTY', () => {
    const r = spawnSync(
      '/usr/bin/script',
      ['-qec', `${process.execPath} ${CLI} timeout 5 sh -c 'test -t 1 && test -t 2'`, '/dev/null'],
      {
        encoding: 'utf8',
      },
    );
    expect(r.status).toBe(0);
  });
});

describe('procwarden timeout: failures, with coreutils’ messages', () => {
  const cases: Array<[string, string[], number, string]> = [
    [
      'not found',
      ['1', '/no/such/command'],
      127,
      "procwarden timeout: failed to run command '/no/such/command': No such file or directory\n",
    ],
    [
      'cannot execute',
      ['1', '/etc/passwd'],
      126,
      "procwarden timeout: failed to run command '/etc/passwd': Permission denied\n",
    ],
    [
      'invalid duration',
      ['42D', 'true'],
      125,
      "procwarden timeout: invalid time interval '42D'\nTry 'procwarden timeout --help' for more information.\n",
    ],
    [
      'word duration',
      ['invalid', 'true'],
      125,
      "procwarden timeout: invalid time interval 'invalid'\nTry 'procwarden timeout --help' for more information.\n",
    ],
    [
      'negative duration',
      ['--', '-1', 'true'],
      125,
      "procwarden timeout: invalid time interval '-1'\nTry 'procwarden timeout --help' for more information.\n",
    ],
    [
      'bad -k',
      ['-k', 'x', '1', 'true'],
      125,
      "procwarden timeout: invalid time interval 'x'\nTry 'procwarden timeout --help' for more information.\n",
    ],
    [
      'unknown signal',
      ['-s', 'FOO', '1', 'true'],
      125,
      "procwarden timeout: 'FOO': invalid signal\nTry 'procwarden timeout --help' for more information.\n",
    ],
    [
      'unknown long option',
      ['--bogus', '1', 'true'],
      125,
      "procwarden timeout: unrecognized option '--bogus'\nTry 'procwarden timeout --help' for more information.\n",
    ],
    [
      'unknown short option',
      ['-x', '1', 'true'],
      125,
      "procwarden timeout: invalid option -- 'x'\nTry 'procwarden timeout --help' for more information.\n",
    ],
    [
      'missing everything',
      [],
      125,
      "procwarden timeout: missing operand\nTry 'procwarden timeout --help' for more information.\n",
    ],
    [
      'missing command',
      ['1'],
      125,
      "procwarden timeout: missing operand after '1'\nTry 'procwarden timeout --help' for more information.\n",
    ],
  ];
  for (const [what, args, status, stderr] of cases) {
    it(`${what}: ${status}`, async () => {
      const r = await timeout(args);
      expect(r.status).toBe(status);
      expect(r.stderr).toBe(stderr);
    });
  }

  it.skipIf(!hasCoreutils)('statuses and first lines match coreutils (compared live)', async () => {
    for (const [, args] of cases) {
      if (args.length < 2) continue; // coreutils 9.1 prints no "missing operand" line
      const ours = await timeout(args);
      const theirs = await coreutils(args);
      expect(ours.status).toBe(theirs.status);
      expect(asCoreutils(ours.stderr).split('\n')[0]).toBe(theirs.stderr.split('\n')[0]);
    }
  });
});

describe('procwarden timeout: the whole tree', () => {
  it('a setsid descendant is ended on timeout', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await timeout(['1', fixture('setsid-child.sh'), dir]);
    expect(r.status).toBe(124);
    expect(exists(join(dir, 'escapee.done'))).toBe(true);
    expect(alive(readPids(dir).get('escapee') ?? 0)).toBe(false);
  });

  it.skipIf(!hasCoreutils)('…which coreutils timeout(1) leaves alive', async () => {
    const dir = leaks.trackDir(makeTmp());
    expect((await coreutils(['1', fixture('setsid-child.sh'), dir])).status).toBe(124);
    const escapee = readPids(dir).get('escapee') ?? 0;
    expect(alive(escapee)).toBe(true);
    process.kill(escapee, 'SIGKILL');
    await waitFor(() => !alive(escapee), { what: 'escapee gone' });
  });

  it('without -k, a descendant that ignores the signal is killed once the command has exited', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await timeout(['1', fixture('orphan-ignores-term.sh'), dir]);
    expect(r.status).toBe(124);
    expect(alive(readPids(dir).get('child') ?? 0)).toBe(false);
  });

  it('what the command leaves behind after a normal exit is not touched (as in timeout(1))', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await timeout(['5', fixture('double-fork.sh'), dir]);
    expect(r.status).toBe(0);
    const daemon = readPids(dir).get('daemon') ?? 0;
    expect(alive(daemon)).toBe(true);
    process.kill(daemon, 'SIGKILL');
    await waitFor(() => !alive(daemon), { what: 'daemon gone' });
  });

  it('SIGTERM to procwarden ends the tree and exits 143', async () => {
    const dir = leaks.trackDir(makeTmp());
    const cli = startCli(['timeout', '60', fixture('parent-exits.sh'), dir]);
    leaks.track(cli.child.pid);
    await waitFor(() => cli.stdout().includes('ready'), { what: 'fixture ready', timeoutMs: 30_000 });
    cli.child.kill('SIGTERM');
    const r = await cli.done;
    expect(r.status).toBe(143);
    expect(exists(join(dir, 'child.done'))).toBe(true);
    expect(alive(readPids(dir).get('child') ?? 0)).toBe(false);
  });
});

describe('procwarden timeout: the command line', () => {
  it('a link named timeout is timeout mode', async () => {
    const dir = leaks.trackDir(makeTmp());
    const link = join(dir, 'timeout');
    symlinkSync(CLI, link);
    const bad = startCli(['42D', 'true'], { script: link });
    leaks.track(bad.child.pid);
    const r = await bad.done;
    expect(r.status).toBe(125);
    expect(r.stderr).toBe(
      "timeout: invalid time interval '42D'\nTry 'timeout --help' for more information.\n",
    );
    const cli = startCli(['-v', '0.2', 'sleep', '30'], { script: link });
    leaks.track(cli.child.pid);
    const ok = await cli.done;
    expect(ok.status).toBe(124);
    expect(ok.stderr).toBe("timeout: sending signal TERM to command 'sleep'\n");
  });

  it('--help and --version', async () => {
    const help = await timeout(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout.toString()).toContain('Usage: procwarden timeout [OPTION] DURATION COMMAND [ARG]...');
    const version = await timeout(['--version']);
    expect(version.stdout.toString()).toMatch(/^timeout \(procwarden\) \d+\.\d+\.\d+\n$/);
  });
});
