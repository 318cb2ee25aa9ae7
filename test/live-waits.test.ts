// Live sessions where a caller waits: for a close, for room, for a process to start, for a slow
// consumer. Each case was found by a hostile review and fails on the code before its fix.
import { getEventListeners } from 'node:events';
import { chmodSync, copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type LiveSession, LiveSessionPool, type RunSpec, Supervisor } from '../src/index.js';
import { specFingerprint } from '../src/live/fingerprint.js';
import { agentSpec, Transcript } from './helpers/live.js';
import { ManualClock } from './helpers/manual-clock.js';
import { alive, fixture, LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

/** Resolves what `promise` gives within `ms`, else the string 'pending'. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'pending'>((resolve) => {
    timer = setTimeout(() => resolve('pending'), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Echoes each line of its stdin back as `got <line>`, and prints `ready` first. */
const ECHO: RunSpec = {
  argv: [
    process.execPath,
    '-e',
    "console.log('ready'); require('readline').createInterface({ input: process.stdin }).on('line', (l) => console.log('got ' + l));",
  ],
};

function lines(session: LiveSession): string[] {
  const seen: string[] = [];
  session.on('line', (line) => seen.push(line));
  return seen;
}

describe('close()', () => {
  it('a detail that is not a string is INVALID_OPTION, and the session stays open and closable', async () => {
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
    const session = await pool.acquire('k', ECHO);
    leaks.track(session.pid);
    await expect(session.close('abort', Symbol('x') as never)).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
    expect(session.state).toBe('open');
    const seen = lines(session);
    session.write('still here\n');
    await waitFor(() => seen.includes('got still here'), { what: 'the echo' });
    expect(await within(session.close('abort'), 10_000)).toBe('closed');
    expect(alive(session.pid ?? 0)).toBe(false);
  });

  it("close('abort') after the process exited on its own does not wait for a stalled onData", async () => {
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
    let stalls = 0;
    const session = await pool.acquire('k', {
      argv: [process.execPath, '-e', "process.stdout.write('x'.repeat(200000)); process.exit(0)"],
      // A consumer that never catches up: the run waits for it after a natural end.
      output: { onData: () => new Promise<void>(() => stalls++) },
    });
    leaks.track(session.pid);
    await waitFor(() => session.state === 'closing' && stalls > 0, { what: 'the exit heard' });
    expect(await within(session.close('abort', 'give up'), 10_000)).toBe('closed');
    expect((await session.closed).reason).toBe('error');
    expect(await within(pool.shutdown(), 10_000)).toBeUndefined();
    expect(pool.size).toBe(0);
  });
});

describe('acquire() waits that its signal ends', () => {
  it('an acquire behind a restart drain rejects as soon as its signal aborts', async () => {
    const dir = leaks.trackDir(makeTmp());
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
    const first = await pool.acquire('k', agentSpec(dir), { fingerprint: 'v1' });
    leaks.track(first.pid);
    const agent = new Transcript(first);
    await agent.wait('ready');
    const child = first.attachChild('worker');
    const controller = new AbortController();
    // A new fingerprint: waits for the drain, which the manual clock never caps.
    const second = pool.acquire('k', { ...agentSpec(dir), signal: controller.signal }, { fingerprint: 'v2' });
    const third = pool.acquire('k', agentSpec(dir), { fingerprint: 'v2' });
    await waitFor(() => first.state === 'draining', { what: 'the restart drain' });
    controller.abort(new Error('the user went away'));
    expect(
      await within(
        second.catch((error) => error.code),
        5_000,
      ),
    ).toBe('LIVE_SESSION_CLOSED');
    // The key's next acquire still waits for the drain: the order holds.
    expect(await within(third, 200)).toBe('pending');
    child.release();
    const fresh = await third;
    leaks.track(fresh.pid);
    expect(fresh.fingerprint).toBe('v2');
    await pool.shutdown();
  });

  it('an acquire waiting for room at the limit rejects as soon as its signal aborts', async () => {
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {}, maxSessions: 1 });
    // Ignores SIGTERM: its close takes the whole grace, and the slot stays taken meanwhile.
    const stubborn = await pool.acquire('a', {
      argv: [
        process.execPath,
        '-e',
        "process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1000);",
      ],
      graceMs: 1500,
    });
    leaks.track(stubborn.pid);
    const said = lines(stubborn);
    await waitFor(() => said.includes('ready'), { what: 'ready' });
    void stubborn.close('abort');
    const controller = new AbortController();
    const waiting = pool.acquire('b', { ...ECHO, signal: controller.signal });
    expect(await within(waiting, 200)).toBe('pending');
    expect(stubborn.state).toBe('closing');
    controller.abort();
    expect(
      await within(
        waiting.catch((error) => error.code),
        500,
      ),
    ).toBe('LIVE_SESSION_CLOSED');
    expect(stubborn.state).toBe('closing');
    await stubborn.closed;
    await pool.shutdown();
  });
});

describe('the default fingerprint', () => {
  it('tells a spec that removes a variable, or inherits none, from one that keeps them', async () => {
    const argv = ['cat'] as const;
    const kept = specFingerprint({ argv, env: { BAR: '1' } });
    expect(specFingerprint({ argv, env: { BAR: '1', FOO: undefined } })).not.toBe(kept);
    expect(specFingerprint({ argv, env: { BAR: '1' }, extendEnv: false })).not.toBe(kept);
    expect(specFingerprint({ argv, env: { BAR: '1' }, extendEnv: true })).toBe(kept);

    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
    const first = await pool.acquire('k', { ...ECHO, env: { BAR: '1' } });
    leaks.track(first.pid);
    const scrubbed = await pool.acquire('k', { ...ECHO, env: { BAR: '1', HOME: undefined } });
    leaks.track(scrubbed.pid);
    expect(scrubbed).not.toBe(first);
    expect((await first.closed).reason).toBe('restart');
    await pool.shutdown();
  });
});

describe('turn silence', () => {
  it('a process blocked on a slow onData is not silent', async () => {
    // The turn begins once the consumer is already behind, and the consumer holds the output for
    // four silence budgets: no output can reach the session meanwhile, so only the consumer's wait
    // keeps the turn alive. (A turn begun before the process booted measured its boot, not this.)
    const BUDGET_MS = 300;
    let release: (() => void) | undefined;
    const pool = new LiveSessionPool({ supervisor: sup, env: {} });
    const session = await pool.acquire('k', {
      argv: [process.execPath, '-e', "process.stdout.write('y'.repeat(4 << 20) + '\\ndone\\n');"],
      output: {
        onData: () =>
          release === undefined
            ? new Promise<void>((resolve) => {
                release = resolve;
              })
            : undefined,
      },
    });
    leaks.track(session.pid);
    const seen = lines(session);
    await waitFor(() => release !== undefined, { what: 'the first chunk', timeoutMs: 20_000 });
    const turn = session.beginTurn({ noOutputTimeoutMs: BUDGET_MS });
    await new Promise((resolve) => setTimeout(resolve, 4 * BUDGET_MS));
    expect(turn.active).toBe(true);
    // Ended before the rest flows: how soon the process writes again is the machine's to give.
    turn.end();
    expect(await turn.ended).toMatchObject({ outcome: 'completed' });
    release?.();
    await waitFor(() => seen.includes('done'), { what: 'done', timeoutMs: 20_000 });
    await pool.shutdown();
  });
});

describe('eviction', () => {
  it("a child's work counts as activity: the session idle the longest goes", async () => {
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {}, maxSessions: 2 });
    const a = await pool.acquire('a', ECHO);
    leaks.track(a.pid);
    const b = await pool.acquire('b', ECHO);
    leaks.track(b.pid);
    // a's background child worked after b was last used.
    a.attachChild('worker').release();
    const c = await pool.acquire('c', ECHO);
    leaks.track(c.pid);
    expect((await b.closed).reason).toBe('idle');
    expect(a.state).toBe('open');
    await pool.shutdown();
  });
});

describe('a process that has not started yet', () => {
  it('takes what is written before it starts (replaceScope), in order', async () => {
    const dir = leaks.trackDir(makeTmp());
    // The run it replaces takes 0.2 s to clean up after its SIGTERM.
    const old = sup.spawn({ argv: [fixture('trap-cleanup.sh'), dir], scope: 'ws' });
    leaks.track(old.pid);
    await waitFor(() => old.pid !== undefined && alive(old.pid), { what: 'the old run' });
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
    const session = await pool.acquire('k', { ...ECHO, scope: 'ws', replaceScope: true });
    expect(session.pid).toBeUndefined();
    const seen = lines(session);
    expect(session.write('first\n')).toBe(true);
    expect(() => session.write(42 as never)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
    expect(session.write('second\n')).toBe(true);
    await waitFor(() => seen.includes('got second'), { what: 'both lines' });
    leaks.track(session.pid);
    expect(seen).toEqual(['ready', 'got first', 'got second']);
    expect((await old.result).reason).toBe('cancelled');
    await pool.shutdown();
  });

  it("a plain run's stdin exists while it waits; end() and a run that never starts behave", async () => {
    const old = sup.spawn({ argv: ['sleep', '30'], scope: 'plain', graceMs: 300 });
    leaks.track(old.pid);
    const handle = sup.spawn({ argv: ['cat'], stdin: 'pipe', scope: 'plain', replaceScope: true });
    expect(handle.state).toBe('starting');
    const stdin = handle.stdin;
    expect(stdin?.writable).toBe(true);
    stdin?.write('early ');
    const bytes = Buffer.from('bytes');
    stdin?.write(bytes);
    bytes.fill(0x21); // reused by the caller: what was written is what arrives
    stdin?.end();
    expect(stdin?.writable).toBe(false);
    const result = await handle.result;
    leaks.track(handle.pid);
    expect(result.stdout.text).toBe('early bytes');

    // Cancelled before it starts: the input is dropped and a writer waiting for 'drain' goes on.
    const old2 = sup.spawn({ argv: ['sleep', '30'], scope: 'never' });
    leaks.track(old2.pid);
    const never = sup.spawn({ argv: ['cat'], stdin: 'pipe', scope: 'never', replaceScope: true });
    const input = never.stdin;
    if (!input) throw new Error('no stdin while starting');
    expect(input.write('z'.repeat(200_000))).toBe(false);
    const drained = new Promise<void>((resolve) => input.once('drain', resolve));
    never.cancel('not wanted');
    await within(drained, 5_000);
    expect(input.writable).toBe(false);
    expect((await never.result).reason).toBe('cancelled');
    old2.cancel();
    await old2.result;
  });
});

describe('a command that cannot start', () => {
  it('is refused before anything is evicted for it', async () => {
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {}, maxSessions: 1 });
    const idle = await pool.acquire('a', ECHO);
    leaks.track(idle.pid);
    await expect(pool.acquire('b', { argv: ['/nonexistent/agent-cli'] })).rejects.toMatchObject({
      code: 'INVALID_ARGV',
    });
    await expect(
      pool.acquire('b', { argv: ['no-such-agent-cli-here'], env: { PATH: '/usr/bin:/bin' } }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGV', message: expect.stringContaining("run's PATH") });
    const dir = leaks.trackDir(makeTmp());
    const plain = join(dir, 'not-executable');
    writeFileSync(plain, 'echo hi\n');
    await expect(pool.acquire('b', { argv: [plain] })).rejects.toMatchObject({ code: 'INVALID_ARGV' });
    expect(idle.state).toBe('open');
    expect(pool.get('a')).toBe(idle);
    // Executable now, and named relative to the run's cwd: accepted.
    chmodSync(plain, 0o755);
    await expect(pool.acquire('a', { argv: ['./not-executable'], cwd: dir })).resolves.toBeDefined();
    await pool.shutdown();
  });

  it('is not checked when the open session is reused: a program removed since does not refuse it', async () => {
    const dir = leaks.trackDir(makeTmp());
    const copy = join(dir, 'my-cat');
    copyFileSync('/bin/cat', copy);
    chmodSync(copy, 0o755);
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
    const first = await pool.acquire('k', { argv: [copy] });
    leaks.track(first.pid);
    rmSync(copy); // a package upgraded, a build directory cleaned
    expect(await pool.acquire('k', { argv: [copy] })).toBe(first);
    await pool.shutdown();
  });

  it('many acquires waiting with one signal add one listener to it, not one each (no leak warning)', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
      const first = await pool.acquire('k', ECHO, { fingerprint: 'v1' });
      leaks.track(first.pid);
      first.attachChild();
      const controller = new AbortController();
      const waits = Array.from({ length: 16 }, () =>
        pool.acquire('k', { ...ECHO, signal: controller.signal }, { fingerprint: 'v2' }).catch((e) => e.code),
      );
      await waitFor(() => first.state === 'draining', { what: 'the restart drain' });
      controller.abort();
      expect(new Set(await Promise.all(waits))).toEqual(new Set(['LIVE_SESSION_CLOSED']));
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
      await pool.shutdown();
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('many sessions on one signal add one listener to it, and an abort closes every one', async () => {
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
    const controller = new AbortController();
    const sessions = [];
    for (let i = 0; i < 12; i++) {
      const session = await pool.acquire(`k${i}`, { ...ECHO, signal: controller.signal });
      leaks.track(session.pid);
      sessions.push(session);
    }
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort();
    const events = await Promise.all(sessions.map((s) => s.closed));
    expect(events.map((e) => e.reason)).toEqual(sessions.map(() => 'abort'));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    await pool.shutdown();
  });

  it('one that passes the check and still fails to start closes its session with error', async () => {
    const dir = leaks.trackDir(makeTmp());
    const script = join(dir, 'bad-interpreter');
    writeFileSync(script, '#!/nonexistent/interpreter\n');
    chmodSync(script, 0o755);
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
    const session = await pool.acquire('k', { argv: [script] });
    const event = await session.closed;
    expect(event.reason).toBe('error');
    expect(pool.size).toBe(0);
  });
});
