import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { signalTree, terminateTree } from '../src/kill/index.js';
import { BlindTable } from '../src/tree/index.js';
import { CLI } from './helpers/cli.js';
import { alive, LeakGuard, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const REASON = 'test: /proc is foreign';

// A blind table (a /proc of another PID namespace) lists nothing: a tree read through it is empty,
// and "0 processes signalled, all gone" was said of a process left running.
describe('terminateTree and signalTree refuse a blind process table', () => {
  it('they throw PROCESS_TABLE_UNAVAILABLE with the reason, and signal nothing', async () => {
    const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' });
    leaks.track(sleeper.pid);
    const pid = sleeper.pid ?? 0;
    const sent: number[] = [];
    const send = (target: number) => {
      sent.push(target);
    };
    try {
      for (const attempt of [
        () => terminateTree(pid, { table: new BlindTable(REASON), graceMs: 100, send }),
        () => signalTree(pid, 'SIGUSR1', { table: new BlindTable(REASON), send }),
      ]) {
        const error = await attempt().catch((e: unknown) => e);
        expect(error).toMatchObject({ code: 'PROCESS_TABLE_UNAVAILABLE' });
        expect((error as Error).message).toContain(REASON);
        expect((error as Error).message).toContain('nothing was signalled');
      }
      expect(sent).toEqual([]);
      expect(alive(pid)).toBe(true);
    } finally {
      sleeper.kill('SIGKILL');
      await waitFor(() => !alive(pid), { what: 'the sleeper gone' });
    }
  });
});

const FOREIGN = ['--pid', '--fork', '--map-root-user'];
const probe = spawnSync('unshare', [...FOREIGN, 'true'], { encoding: 'utf8', timeout: 10_000 });
const skip = probe.error || probe.status !== 0 ? `unshare ${FOREIGN.join(' ')} fails here` : null;

// Inside, the target is a child of the namespace's first process: when that one exits, the kernel
// ends everything in the namespace, so nothing outlives the test.
const SCRIPT = `
sleep 30 & S=$!
node "$0" kill --grace 300ms $S; echo "kill=$?"
node "$0" tree $S; echo "tree=$?"
node "$0" tree > /dev/null; echo "tree-all=$?"
node -e 'import(process.argv[1]).then((m) => m.default(Number(process.argv[2]), (e) => console.log("tree-kill:", e?.code)))' "$1" $S
kill -0 $S && echo "alive=yes"
kill -9 $S
`;

describe.skipIf(skip !== null)(
  `a PID namespace without its own /proc${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    it('kill and tree print the reason and exit 1; tree-kill calls back with the error; nothing is signalled', async () => {
      const treeKill = join(CLI, '..', '..', 'tree-kill.js');
      const child = spawn('unshare', [...FOREIGN, 'bash', '-c', SCRIPT, CLI, treeKill], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      leaks.track(child.pid);
      let out = '';
      let err = '';
      child.stdout?.on('data', (c: Buffer) => {
        out += c.toString();
      });
      child.stderr?.on('data', (c: Buffer) => {
        err += c.toString();
      });
      await new Promise((resolve) => child.once('close', resolve));
      expect(out).toContain('kill=1\n');
      expect(out).toContain('tree=1\n');
      expect(out).toContain('tree-all=1\n');
      expect(out).toContain('tree-kill: PROCESS_TABLE_UNAVAILABLE\n');
      expect(out).toContain('alive=yes\n');
      expect(err).toMatch(
        /^pid \d+: cannot end the tree of pid \d+: \/proc describes another PID namespace .*; nothing was signalled\./m,
      );
      expect(err).toMatch(
        /^procwarden tree: cannot show the process tree: \/proc describes another PID namespace/m,
      );
    }, 30_000);
  },
);
