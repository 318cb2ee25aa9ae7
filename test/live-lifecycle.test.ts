// A session's process that ends is noticed when its exit is heard, not when its run settles; pool
// listeners are called each on its own; acquire() starts from the spec it checked; a session is
// never constructed half-way with its process running.
import { afterEach, describe, expect, it } from 'vitest';
import {
  type LivePoolOptions,
  type LiveSession,
  LiveSessionPool,
  type ProcwardenError,
  type RunSpec,
  Supervisor,
  type WarningEvent,
} from '../src/index.js';
import { ManualClock } from './helpers/manual-clock.js';
import { cookieHolders, LeakGuard, waitFor } from './helpers/procs.js';

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

function pool(options: LivePoolOptions = {}) {
  return new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {}, ...options });
}

/**
 * Exits 7 on its first line of input, leaving a child that ignores SIGTERM: its run then takes the
 * whole grace to settle, the window in which the session used to stay open.
 */
const exitsLeavingStubbornChild = (): RunSpec => ({
  argv: ['sh', '-c', '(trap "" TERM; sleep 30) & read x; exit 7'],
  graceMs: 1500,
});

async function acquired(p: LiveSessionPool, key: string, spec: RunSpec): Promise<LiveSession> {
  const session = await p.acquire(key, spec);
  leaks.track(session.pid);
  return session;
}

/** Until the supervisor has heard the command exit (its run is still settling). */
function exitHeard(session: LiveSession) {
  const pid = session.pid;
  return waitFor(() => sup.list().find((r) => r.pid === pid && r.reason === 'exit'), {
    what: `the exit of ${session.id}`,
  });
}

async function rejection(promise: Promise<unknown>): Promise<ProcwardenError> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: ProcwardenError) => error,
  );
}

describe('a process that ended is noticed at once', () => {
  it('an exit closes the session with error as soon as it is heard: turn ended, never reused', async () => {
    const p = pool();
    const spec = exitsLeavingStubbornChild();
    const first = await acquired(p, 'k', spec);
    const turn = first.beginTurn();
    first.write('go\n');
    await exitHeard(first);
    // The run is still ending the stubborn child (up to graceMs): the session is not open meanwhile.
    expect(first.state).toBe('closing');
    expect(first.isIdle).toBe(false);
    expect(turn.active).toBe(false);
    expect((await turn.ended).outcome).toBe('session-closed');
    expect(() => first.beginTurn()).toThrow(expect.objectContaining({ code: 'LIVE_SESSION_CLOSED' }));
    const second = await acquired(p, 'k', spec);
    expect(second).not.toBe(first);
    expect(second.state).toBe('open');
    expect(await first.closed).toMatchObject({ reason: 'error', detail: expect.stringContaining('code 7') });
    await p.shutdown();
  });

  it('a restart or an eviction asked for after the exit was heard records error and the exit code', async () => {
    const p = pool({ maxSessions: 1 });
    const first = await acquired(p, 'k', exitsLeavingStubbornChild());
    first.write('go\n');
    await exitHeard(first);
    expect(await first.close('restart', 'caller')).toBe('closed');
    expect(await first.closed).toMatchObject({ reason: 'error', detail: expect.stringContaining('code 7') });

    const victim = await acquired(p, 'k', exitsLeavingStubbornChild());
    victim.write('go\n');
    await exitHeard(victim);
    await acquired(p, 'other', { argv: ['cat'] }); // maxSessions 1: would evict an idle 'k'
    expect(await victim.closed).toMatchObject({ reason: 'error', detail: expect.stringContaining('code 7') });
    await p.shutdown();
  });

  it("the spec's signal closes the session with abort at once, while its tree takes the grace", async () => {
    const p = pool();
    const controller = new AbortController();
    // The command itself ignores SIGTERM: its run ends only at the grace's SIGKILL.
    const spec: RunSpec = {
      argv: ['sh', '-c', 'trap "" TERM; read x'],
      graceMs: 1500,
      signal: controller.signal,
    };
    const session = await acquired(p, 'k', spec);
    await waitFor(() => sup.list().find((r) => r.pid === session.pid && r.state === 'running'));
    controller.abort();
    expect(session.state).toBe('closing');
    const next = await acquired(p, 'k', { argv: ['sh', '-c', 'trap "" TERM; read x'], graceMs: 1500 });
    expect(next).not.toBe(session);
    expect(await session.closed).toMatchObject({ reason: 'abort' });
    await p.shutdown();
  });

  it('acquire with an already-aborted signal rejects, starts nothing and evicts nothing', async () => {
    const p = pool({ maxSessions: 1 });
    const idle = await acquired(p, 'a', { argv: ['cat'] });
    const controller = new AbortController();
    controller.abort();
    const error = await rejection(p.acquire('b', { argv: ['cat'], signal: controller.signal }));
    expect(error.code).toBe('LIVE_SESSION_CLOSED');
    expect(error.message).toContain('already aborted');
    expect(idle.state).toBe('open');
    expect(p.size).toBe(1);
    expect(cookieHolders(sup.id)).toEqual([idle.pid]);
    await p.shutdown();
  });
});

describe('pool listeners are called each on its own', () => {
  it("a throwing 'closed' listener neither silences the next one nor is blamed on the session", async () => {
    const p = pool();
    const warnings: WarningEvent[] = [];
    p.on('warning', (w) => warnings.push(w));
    let heard = 0;
    p.on('closed', () => {
      throw new Error('first listener');
    });
    p.on('closed', () => heard++);
    const session = await acquired(p, 'k', { argv: ['cat'] });
    const sessionErrors: unknown[] = [];
    session.on('error', (e) => sessionErrors.push(e));
    await session.close('abort');
    expect(heard).toBe(1);
    expect(sessionErrors).toEqual([]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: 'LISTENER_THREW', cause: expect.any(Error) });
    expect(warnings[0]?.message).toContain("'closed' listener threw (first listener)");
    await p.shutdown();
  });

  it("a throwing 'warning' listener fails no acquire and is reported once, as a process warning", async () => {
    const processWarnings: Error[] = [];
    const onWarning = (w: Error) => processWarnings.push(w);
    process.on('warning', onWarning);
    try {
      const p = pool();
      p.on('warning', () => {
        throw new Error('warning listener');
      });
      p.on('closed', () => {
        throw new Error('closed listener');
      });
      const session = await acquired(p, 'k', { argv: ['cat'] });
      expect(session.state).toBe('open');
      await session.close('abort');
      await p.shutdown();
      await new Promise((r) => setImmediate(r)); // process warnings are emitted on the next tick
    } finally {
      process.off('warning', onWarning);
    }
    // The 'closed' listener threw, and its report to the 'warning' listener threw again: that ends
    // as one process warning, never a loop.
    expect(processWarnings.map((w) => (w as ProcwardenError).code)).toEqual(['LISTENER_THREW']);
    for (const w of processWarnings)
      expect(w.message).toContain("'warning' listener threw (warning listener)");
  });
});

describe('acquire starts from the spec it checked', () => {
  it('a spec changed after acquire() returned neither fails the acquire nor evicts for nothing', async () => {
    const p = pool({ maxSessions: 1 });
    const idle = await acquired(p, 'a', { argv: ['cat'] });
    const spec: RunSpec = { argv: ['cat'], env: { A: '1' } };
    const pending = p.acquire('b', spec);
    (spec as unknown as { argv: unknown[] }).argv = ['cat', 42];
    (spec.env as Record<string, unknown>).A = 1;
    const session = await pending;
    leaks.track(session.pid);
    expect(session.state).toBe('open');
    expect((await idle.closed).reason).toBe('idle');
    await p.shutdown();
  });
});

describe('a session is never half-constructed', () => {
  it('a clock that throws when the idle timer is armed fails the acquire with no process started', async () => {
    const clock = new ManualClock();
    clock.setTimeout = () => {
      throw new Error('clock broke');
    };
    const p = new LiveSessionPool({ supervisor: sup, clock, env: {} });
    await expect(p.acquire('k', { argv: ['cat'] })).rejects.toThrow('clock broke');
    expect(p.size).toBe(0);
    expect(cookieHolders(sup.id)).toEqual([]);
  });
});
