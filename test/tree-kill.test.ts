import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ProcwardenError } from '../src/index.js';
import treeKill, { treeKill as named } from '../src/tree-kill.js';
import { alive, exists, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

// The package procwarden/tree-kill replaces, for the comparisons that are safe to run.
const realTreeKill = createRequire(import.meta.url)('tree-kill') as (...a: unknown[]) => unknown;

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** Starts a fixture the way a tree-kill user's program would, and waits until it is ready. */
async function startTree(script: string) {
  const dir = leaks.trackDir(makeTmp());
  const child = spawn(fixture(script), [dir], { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  leaks.track(child.pid);
  await waitFor(() => out.includes('ready'), { what: `${script} ready` });
  return { pid: child.pid ?? 0, dir, pids: [...readPids(dir).values()] };
}

function stateOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
  } catch {
    return undefined;
  }
}

/** Calls treeKill with a callback; resolves with what the callback got and how often it was called. */
function callTreeKill(...args: [number, (string | number)?]) {
  return new Promise<{ error: Error | undefined; calls: number }>((resolve) => {
    let calls = 0;
    const callback = (error?: Error) => {
      calls++;
      // A second call would arrive after this; the wait lets it count.
      setTimeout(() => resolve({ error, calls }), 50);
    };
    if (args.length === 1) treeKill(args[0], callback);
    else treeKill(args[0], args[1], callback);
  });
}

describe('procwarden/tree-kill: tree-kill’s call, procwarden’s sequence', () => {
  it('treeKill(pid, callback): SIGTERM to the whole tree, the callback once, when it is extinct', async () => {
    const { pid, dir, pids } = await startTree('parent-exits.sh');
    expect(pids.length).toBe(2);
    const { error, calls } = await callTreeKill(pid);
    expect(error).toBeUndefined();
    expect(calls).toBe(1);
    for (const p of pids) expect(alive(p)).toBe(false);
    // The descendant got the graceful signal (it writes this marker on SIGTERM).
    expect(exists(join(dir, 'child.done'))).toBe(true);
    expect(named).toBe(treeKill);
  });

  it('a descendant that ignores the signal gets SIGKILL after the grace; tree-kill would call back at once and leave it', async () => {
    const { pid, pids } = await startTree('orphan-ignores-term.sh');
    const { error } = await callTreeKill(pid, 'SIGTERM');
    expect(error).toBeUndefined();
    for (const p of pids) expect(alive(p)).toBe(false);
  });

  it('signals by name, short name or number, as tree-kill passes them to process.kill', async () => {
    // A tree of its own for each, all at once.
    await Promise.all(
      ['SIGINT', 'TERM', 15, '', false].map(async (signal) => {
        const { pid, pids } = await startTree('parent-exits.sh');
        const { error } = await callTreeKill(pid, signal as string);
        expect(error).toBeUndefined();
        // Signals that ask a process to end (a falsy one is SIGTERM, as for process.kill): extinct.
        for (const p of pids) expect(alive(p)).toBe(false);
      }),
    );
  });

  it('a signal that does not ask to end (SIGUSR2 to reload, SIGHUP, SIGSTOP, SIGCONT) is delivered once, and the tree lives on', async () => {
    const dir = leaks.trackDir(makeTmp());
    const child = spawn(fixture('record-signals.sh'), [dir, 'stay'], { stdio: ['ignore', 'pipe', 'ignore'] });
    leaks.track(child.pid);
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    await waitFor(() => out.includes('ready'), { what: 'record-signals ready' });
    const pids = [...readPids(dir).values()];
    const pid = child.pid as number;
    const t0 = Date.now();
    for (const signal of ['SIGUSR2', 'SIGHUP'])
      expect((await callTreeKill(pid, signal)).error).toBeUndefined();
    // At once, not after a grace; nobody got SIGKILL.
    expect(Date.now() - t0).toBeLessThan(4000);
    for (const who of ['parent', 'child']) {
      // bash runs pending traps in signal-number order: HUP may be written first.
      const got = () =>
        exists(join(dir, `${who}.sig`))
          ? readFileSync(join(dir, `${who}.sig`), 'utf8')
              .split('\n')
              .filter(Boolean)
              .sort()
          : [];
      await waitFor(() => got().length >= 2, { what: `${who} got USR2 and HUP` });
      expect(got()).toEqual(['HUP', 'USR2']);
    }
    for (const p of pids) expect(alive(p)).toBe(true);
    expect((await callTreeKill(pid, 'SIGSTOP')).error).toBeUndefined();
    await waitFor(() => pids.every((p) => stateOf(p) === 'T'), { what: 'the tree stopped' });
    expect((await callTreeKill(pid, 'SIGCONT')).error).toBeUndefined();
    await waitFor(() => pids.every((p) => stateOf(p) !== 'T'), { what: 'the tree running again' });
    // Signal 0, as process.kill has it: nothing is sent, no error.
    expect((await callTreeKill(pid, 0)).error).toBeUndefined();
    expect((await callTreeKill(pid, 'SIGKILL')).error).toBeUndefined();
    for (const p of pids) expect(alive(p)).toBe(false);
  });

  it('a callback that is not a function, or a pid no platform has, is thrown at once', () => {
    expect(() => treeKill(process.ppid, 'SIGTERM', 'nope' as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
    expect(() => treeKill(2 ** 32)).toThrow(expect.objectContaining({ code: 'INVALID_PID' }));
  });

  it('a falsy callback (null, false, 0, empty) is no callback, as tree-kill tests `if (callback)`', async () => {
    for (const none of [null, false, 0, '']) {
      const { pid, pids } = await startTree('parent-exits.sh');
      expect(() => treeKill(pid, 'SIGKILL', none as never)).not.toThrow();
      await waitFor(() => pids.every((p) => !alive(p)), {
        what: `the tree ended with callback ${String(none)}`,
      });
    }
    // And a pid that is no number, with one of them: thrown, as without a callback.
    expect(() => treeKill('abc' as unknown as number, 'SIGTERM', null as never)).toThrow(
      'pid must be a number',
    );
  });

  it("a pid as tree-kill's parseInt reads it: '0x…' is hexadecimal, '010' is ten", async () => {
    const { pid, pids } = await startTree('parent-exits.sh');
    const { error } = await callTreeKill(`0x${pid.toString(16)}` as unknown as number, 'SIGKILL');
    expect(error).toBeUndefined();
    for (const p of pids) expect(alive(p)).toBe(false);
    // A leading zero is not octal: '0<pid>' is the pid.
    const second = await startTree('parent-exits.sh');
    expect((await callTreeKill(`0${second.pid}` as unknown as number, 'SIGKILL')).error).toBeUndefined();
    for (const p of second.pids) expect(alive(p)).toBe(false);
  });

  it('all went well: the callback is called with no argument, as tree-kill calls it', async () => {
    const { pid } = await startTree('parent-exits.sh');
    const args = await new Promise<unknown[]>((resolve) => treeKill(pid, (...a: unknown[]) => resolve(a)));
    expect(args).toEqual([]);
  });

  it('errors where tree-kill errors: a pid that is not a number, to the callback or thrown', async () => {
    const { error } = await callTreeKill('abc' as unknown as number);
    expect(error?.message).toBe('pid must be a number');
    expect(() => treeKill('abc' as unknown as number)).toThrow('pid must be a number');
  });

  it('when the callback runs, with what: as the real tree-kill 1.2.2 does it', async () => {
    /** Calls `kill`; says whether the callback ran before it returned, with what, and what it returned. */
    const when = async (kill: (...a: unknown[]) => unknown, pid: unknown) => {
      let returned = false;
      let seen: { sync: boolean; error: string | null } | undefined;
      const result = kill(pid, (error?: Error) => {
        seen = { sync: !returned, error: error ? `${error.constructor.name}: ${error.message}` : null };
        return 'from the callback';
      });
      returned = true;
      await waitFor(() => seen !== undefined, { what: `the callback for pid ${String(pid)}` });
      return { ...seen, result: seen?.sync ? result : undefined };
    };
    // Only pids that are no number go to the real one: given 0, -1 or 1.5 it signals a process
    // group, every process (kill(-1)) or PID 1.
    for (const pid of [Number.NaN, 'abc', Number.POSITIVE_INFINITY, undefined, '']) {
      const theirs = await when(realTreeKill, pid);
      expect(theirs).toEqual({
        sync: true,
        error: 'Error: pid must be a number',
        result: 'from the callback',
      });
      expect(await when(treeKill as never, pid)).toEqual(theirs);
      expect(() => treeKill(pid as number)).toThrow('pid must be a number');
    }
    // A pid as a string ('123'): both read the table first, so the callback comes later.
    const { pid } = await startTree('parent-exits.sh');
    expect(await when(treeKill as never, String(pid))).toEqual({
      sync: false,
      error: null,
      result: undefined,
    });
    // Those tree-kill would go on with (it lists children with ps first): later too, as a refusal.
    for (const bad of [0, -1, 1.5]) expect((await when(treeKill as never, bad)).sync).toBe(false);
  });

  it('an unknown signal is an error, before anything is signalled', async () => {
    const { pid, pids } = await startTree('parent-exits.sh');
    const { error } = await callTreeKill(pid, 'SIGNOPE');
    expect((error as ProcwardenError).code).toBe('INVALID_SIGNAL');
    for (const p of pids) expect(alive(p)).toBe(true);
    expect(() => treeKill(pid, 'SIGNOPE')).toThrow(ProcwardenError);
    for (const p of pids) expect(alive(p)).toBe(true);
    await callTreeKill(pid);
  });

  it('a pid that is already gone calls back without an error, as tree-kill does (the tree is extinct)', async () => {
    const child = spawn('true');
    await new Promise((resolve) => child.on('exit', resolve));
    const { error, calls } = await callTreeKill(child.pid ?? 0);
    expect(error).toBeUndefined();
    expect(calls).toBe(1);
  });

  it('refuses what tree-kill would hit: pid ≤ 0 (a process group), PID 1, itself, its parent', async () => {
    expect(() => treeKill(0)).toThrow(ProcwardenError);
    expect(() => treeKill(-1)).toThrow(ProcwardenError);
    expect(() => treeKill(process.pid)).toThrow(ProcwardenError);
    for (const [pid, code] of [
      [0, 'INVALID_PID'],
      [-5, 'INVALID_PID'],
      [1, 'FORBIDDEN_TARGET'],
      [process.pid, 'FORBIDDEN_TARGET'],
      [process.ppid, 'FORBIDDEN_TARGET'],
    ] as const) {
      const { error, calls } = await callTreeKill(pid);
      expect(error).toBeInstanceOf(ProcwardenError);
      expect((error as ProcwardenError).code).toBe(code);
      expect(calls).toBe(1);
    }
    expect(alive(process.ppid)).toBe(true);
  });
});

describe('a root the caller may not signal (EPERM)', () => {
  const dist = join(import.meta.dirname, '..', 'dist', 'tree-kill.js');
  const skip = (() => {
    if (process.getuid?.() !== 0) return 'needs root to run a program as another user';
    const probe = spawnSync(
      process.execPath,
      ['-e', `require('node:fs').accessSync(${JSON.stringify(dist)})`],
      {
        uid: 65534,
        gid: 65534,
        timeout: 30_000,
      },
    );
    return probe.status === 0 ? null : `${process.execPath} or dist/ cannot be used as uid 65534`;
  })();
  it.skipIf(skip !== null)(
    `calls back with Node's own EPERM error, as tree-kill does, and sends nothing${skip ? ` (skipped: ${skip})` : ''}`,
    async () => {
      const target = spawn('sleep', ['60'], { stdio: 'ignore' });
      leaks.track(target.pid);
      try {
        const script = `import(${JSON.stringify(dist)}).then(({ default: kill }) => kill(${target.pid}, (e) => console.log(JSON.stringify({ code: e?.code, syscall: e?.syscall }))))`;
        const r = spawnSync(process.execPath, ['-e', script], {
          uid: 65534,
          gid: 65534,
          encoding: 'utf8',
          timeout: 60_000,
        });
        // Not an error of procwarden's making after retrying SIGKILL for its bound: process.kill's.
        expect(JSON.parse(r.stdout), r.stderr).toEqual({ code: 'EPERM', syscall: 'kill' });
        expect(alive(target.pid ?? 0)).toBe(true);
      } finally {
        target.kill('SIGKILL');
        await new Promise((resolve) => target.once('exit', resolve));
      }
    },
  );
});
