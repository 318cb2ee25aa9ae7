import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, startCli } from './helpers/cli.js';
import { LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

/**
 * Environment variables the docs name for the CLI, through the built CLI: PROCWARDEN_WATCHDOG=0
 * (docs/crash-recovery.md) and where the journal lives, PROCWARDEN_STATE_DIR, else
 * $XDG_STATE_HOME/procwarden, else ~/.local/state/procwarden.
 */
const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** The command lines of the children of `pid`, from /proc. */
function childrenOf(pid: number): string[] {
  const found: string[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) found.push(readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' '));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

describe.runIf(process.platform === 'linux')('PROCWARDEN_WATCHDOG', () => {
  for (const [value, expected] of [
    [undefined, true],
    ['1', true],
    ['0', false],
  ] as const) {
    it(`${value === undefined ? 'unset' : `=${value}`}: procwarden run ${expected ? 'starts' : 'starts no'} watchdog`, async () => {
      const cli = startCli(['run', '--', 'sh', '-c', 'echo ready; exec sleep 30'], {
        env: { PROCWARDEN_WATCHDOG: value },
      });
      leaks.track(cli.child.pid);
      const pid = cli.child.pid ?? 0;
      await waitFor(() => cli.stdout().includes('ready'), { what: 'the command', timeoutMs: 30_000 });
      // The guard exists before the command does.
      const watchdog = () => childrenOf(pid).find((c) => c.includes(' procwarden-guard '));
      if (expected) await waitFor(watchdog, { what: 'the watchdog' });
      else {
        await new Promise((r) => setTimeout(r, 1000));
        expect(childrenOf(pid).some((c) => c.startsWith('sleep'))).toBe(true);
        expect(watchdog()).toBeUndefined();
      }
      cli.child.kill('SIGTERM');
      expect((await cli.done).status).toBe(143);
    });
  }
});

describe('a PROCWARDEN_* value procwarden cannot use is an error on stderr, not a silent default', () => {
  // `false` or `off` would have meant "on": only 0 turned the guard off.
  for (const [args, status] of [
    [['run', '--'], 125],
    [['timeout', '30s'], 125],
  ] as const) {
    it(`procwarden ${args[0]}: one line, status ${status}, the command never runs`, async () => {
      const dir = leaks.trackDir(makeTmp());
      const marker = join(dir, 'ran');
      const r = await runCli([...args, 'sh', '-c', 'touch "$0"', marker], {
        env: { PROCWARDEN_WATCHDOG: 'false' },
      });
      leaks.track(r.pid);
      expect(r.status).toBe(status);
      expect(r.stderr).toBe(
        `procwarden ${args[0]}: PROCWARDEN_WATCHDOG="false" is neither 0 (no host guard) nor 1 (a host guard, the default); set one of those or unset it.\n`,
      );
      expect(existsSync(marker)).toBe(false);
    });
  }

  it('procwarden proof: one line, the usage status 2, before any case', async () => {
    const r = await runCli(['proof'], { env: { PROCWARDEN_WATCHDOG: 'off' } });
    leaks.track(r.pid);
    expect(r.status).toBe(2);
    expect(r.stdout.toString()).toBe('');
    expect(r.stderr).toMatch(/^procwarden proof: PROCWARDEN_WATCHDOG="off" is neither 0 .*\n$/);
  });
});

describe('where the journal lives', () => {
  // The command lists the journal while it runs: its own record, <run id>.json, is there.
  const list = ['run', '--', 'sh', '-c', 'echo "$PROCWARDEN_RUN"; ls "$0"'];

  it('$XDG_STATE_HOME/procwarden without PROCWARDEN_STATE_DIR; ~/.local/state/procwarden without both', async () => {
    const xdg = leaks.trackDir(makeTmp());
    const home = leaks.trackDir(makeTmp());
    for (const [env, dir] of [
      [{ PROCWARDEN_STATE_DIR: undefined, XDG_STATE_HOME: xdg }, join(xdg, 'procwarden')],
      [
        { PROCWARDEN_STATE_DIR: undefined, XDG_STATE_HOME: undefined, HOME: home },
        join(home, '.local/state/procwarden'),
      ],
      [{ PROCWARDEN_STATE_DIR: join(xdg, 'explicit'), XDG_STATE_HOME: xdg }, join(xdg, 'explicit')],
    ] as const) {
      const r = await runCli([...list, dir], { env });
      expect(r.status).toBe(0);
      const [runId, ...files] = r.stdout.toString().trim().split('\n');
      leaks.trackCookie(runId ?? '');
      expect(files).toContain(`${runId}.json`);
      // The record goes once the tree is extinct; reap reads the same directory by default.
      expect(readdirSync(dir).filter((f) => f.startsWith(runId ?? ''))).toEqual([]);
      const reap = await runCli(['reap', '--json'], { env });
      expect(reap.status).toBe(0);
      expect(JSON.parse(reap.stdout.toString()).stateDir).toBe(dir);
    }
  });
});
