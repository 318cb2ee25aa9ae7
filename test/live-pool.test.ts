import { afterEach, describe, expect, it } from 'vitest';
import { type LivePoolOptions, LiveSessionPool, Supervisor, type WarningEvent } from '../src/index.js';
import { agentSpec, Transcript } from './helpers/live.js';
import { ManualClock } from './helpers/manual-clock.js';
import { alive, LeakGuard, makeTmp } from './helpers/procs.js';

const MIN = 60_000;
const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

function pool(options: LivePoolOptions = {}) {
  const clock = new ManualClock();
  const warnings: WarningEvent[] = [];
  const p = new LiveSessionPool({ supervisor: sup, clock, env: {}, ...options });
  p.on('warning', (w) => warnings.push(w));
  return { clock, pool: p, warnings };
}

async function open(p: LiveSessionPool, key: string, fingerprint = 'v1', extra = {}) {
  const dir = leaks.trackDir(makeTmp());
  const session = await p.acquire(key, agentSpec(dir), { fingerprint, ...extra });
  leaks.track(session.pid);
  const agent = new Transcript(session);
  await agent.wait('ready');
  return { session, agent, dir };
}

describe('acquire', () => {
  it('reuses the session of a key while the fingerprint is equal', async () => {
    const { pool: p } = pool();
    const [a, b] = await Promise.all([
      p.acquire('k', agentSpec(leaks.trackDir(makeTmp())), { fingerprint: 'v1' }),
      p.acquire('k', agentSpec(leaks.trackDir(makeTmp())), { fingerprint: 'v1' }),
    ]);
    leaks.track(a.pid);
    expect(b).toBe(a);
    const again = await p.acquire('k', agentSpec('/unused'), { fingerprint: 'v1' });
    expect(again).toBe(a);
    expect(p.size).toBe(1);
    await p.shutdown();
  });

  it('derives a fingerprint from the spec when none is given', async () => {
    const { pool: p } = pool();
    const dir = leaks.trackDir(makeTmp());
    const a = await p.acquire('k', agentSpec(dir));
    leaks.track(a.pid);
    expect(await p.acquire('k', agentSpec(dir))).toBe(a);
    const b = await p.acquire('k', { ...agentSpec(dir), env: { MODEL: 'other' } });
    leaks.track(b.pid);
    expect(b).not.toBe(a);
    expect((await a.closed).reason).toBe('restart');
    await p.shutdown();
  });

  it('a fingerprint change restarts the session after its children drained', async () => {
    const { pool: p } = pool();
    const { session: old, agent } = await open(p, 'k', 'v1');
    const childPid = await agent.spawnChild('subagent', 500);
    const child = old.attachChild('subagent');
    const deferred: string[] = [];
    p.on('close-deferred', (e) => deferred.push(`${e.key}:${e.reason}`));

    let next: Awaited<ReturnType<typeof p.acquire>> | undefined;
    const acquiring = p
      .acquire('k', agentSpec(leaks.trackDir(makeTmp())), { fingerprint: 'v2' })
      .then((s) => {
        next = s;
        leaks.track(s.pid);
        return s;
      });
    await new Promise((r) => setTimeout(r, 100));
    expect(deferred).toEqual(['k:restart']);
    expect(next).toBeUndefined();
    expect(alive(old.pid ?? 0)).toBe(true);
    expect(alive(childPid)).toBe(true);

    await agent.wait('child-done', { name: 'subagent' });
    child.release();
    const fresh = await acquiring;
    expect(await old.closed).toMatchObject({
      reason: 'restart',
      drained: true,
      detail: 'fingerprint changed',
    });
    expect(fresh).not.toBe(old);
    expect(fresh.fingerprint).toBe('v2');
    expect(fresh.pid).not.toBe(old.pid);
    expect(alive(old.pid ?? 0)).toBe(false);
    expect(p.get('k')).toBe(fresh);
    await p.shutdown();
  });

  it('a fingerprint change during an active turn fails with LIVE_TURN_ACTIVE', async () => {
    const { pool: p } = pool();
    const { session } = await open(p, 'k', 'v1');
    session.beginTurn();
    await expect(p.acquire('k', agentSpec('/unused'), { fingerprint: 'v2' })).rejects.toMatchObject({
      code: 'LIVE_TURN_ACTIVE',
    });
    expect(session.state).toBe('open');
    await p.shutdown();
  });

  it('a session restarting after closeOnRunEnd is replaced by a new process once drained', async () => {
    const { pool: p } = pool({ closeOnRunEnd: true });
    const { session, agent } = await open(p, 'k');
    const turn = session.beginTurn();
    await agent.spawnChild('c', 300);
    const child = session.attachChild('c');
    turn.end();
    const next = p.acquire('k', agentSpec(leaks.trackDir(makeTmp())), { fingerprint: 'v1' });
    await agent.wait('child-done', { name: 'c' });
    child.release();
    const fresh = await next;
    leaks.track(fresh.pid);
    expect(fresh).not.toBe(session);
    expect((await session.closed).reason).toBe('restart');
    await p.shutdown();
  });
});

describe('maxSessions', () => {
  it('at the limit, the session idle the longest is evicted', async () => {
    const { pool: p } = pool({ maxSessions: 2 });
    const a = await open(p, 'a');
    const b = await open(p, 'b');
    a.session.beginTurn().end(); // a was used last: b is idle the longest
    const c = await open(p, 'c');
    expect(await b.session.closed).toMatchObject({
      reason: 'idle',
      detail: 'evicted: maxSessions (2) reached',
    });
    expect(alive(b.session.pid ?? 0)).toBe(false);
    expect(a.session.state).toBe('open');
    expect(p.size).toBe(2);
    expect(p.get('c')).toBe(c.session);
    await p.shutdown();
  });

  it('fails with LIVE_SESSION_LIMIT when no session can be evicted (turn active, children live)', async () => {
    const { pool: p } = pool({ maxSessions: 2 });
    const a = await open(p, 'a');
    const b = await open(p, 'b');
    a.session.beginTurn();
    b.session.attachChild('sub');
    await expect(p.acquire('c', agentSpec('/unused'))).rejects.toMatchObject({ code: 'LIVE_SESSION_LIMIT' });
    expect(p.size).toBe(2);
    expect(a.session.state).toBe('open');
    expect(b.session.state).toBe('open');
    await p.shutdown();
  });

  it('shutdown closes every session at once, children or not; acquire fails afterwards', async () => {
    const { pool: p } = pool();
    const a = await open(p, 'a');
    const childPid = await a.agent.spawnChild('worker', 60_000);
    a.session.attachChild('worker');
    await open(p, 'b');
    const closed: string[] = [];
    p.on('closed', (e) => closed.push(`${e.key}:${e.reason}:${e.liveChildren}`));
    await p.shutdown();
    expect(closed.sort()).toEqual(['a:shutdown:1', 'b:shutdown:0']);
    expect(alive(childPid)).toBe(false);
    expect(p.size).toBe(0);
    await expect(p.acquire('a', agentSpec('/unused'))).rejects.toMatchObject({ code: 'LIVE_SESSION_CLOSED' });
  });
});

describe('the idle timeout: option, environment, default', () => {
  async function idleAfter(p: LiveSessionPool, clock: ManualClock, extra = {}) {
    const { session } = await open(p, `k${Math.random()}`, 'v1', extra);
    return { session, closesAt: (ms: number) => expectIdleCloseAt(session, clock, ms) };
  }

  async function expectIdleCloseAt(
    session: Awaited<ReturnType<LiveSessionPool['acquire']>>,
    clock: ManualClock,
    ms: number,
  ) {
    const before = clock.now();
    clock.advance(ms - 1);
    expect(session.state).toBe('open');
    clock.advance(1);
    expect(clock.now() - before).toBe(ms);
    expect((await session.closed).reason).toBe('idle');
  }

  it('defaults to 10 minutes', async () => {
    const { pool: p, clock, warnings } = pool();
    await (await idleAfter(p, clock)).closesAt(10 * MIN);
    expect(warnings).toEqual([]);
  });

  it('PROCWARDEN_LIVE_IDLE_TIMEOUT_MS overrides the default', async () => {
    const { pool: p, clock, warnings } = pool({ env: { PROCWARDEN_LIVE_IDLE_TIMEOUT_MS: '5000' } });
    await (await idleAfter(p, clock)).closesAt(5000);
    expect(warnings).toEqual([]);
  });

  it('is read from process.env when no env is given', async () => {
    process.env.PROCWARDEN_LIVE_IDLE_TIMEOUT_MS = '7000';
    try {
      const clock = new ManualClock();
      const p = new LiveSessionPool({ supervisor: sup, clock });
      await (await idleAfter(p, clock)).closesAt(7000);
    } finally {
      delete process.env.PROCWARDEN_LIVE_IDLE_TIMEOUT_MS;
    }
  });

  it("takes the CLI's duration syntax: PROCWARDEN_LIVE_IDLE_TIMEOUT_MS=10s is 10 seconds", async () => {
    const { pool: p, clock, warnings } = pool({ env: { PROCWARDEN_LIVE_IDLE_TIMEOUT_MS: '10s' } });
    await (await idleAfter(p, clock)).closesAt(10_000);
    expect(warnings).toEqual([]);
  });

  it('an unusable value fails every acquire that needs it with INVALID_ENV, before anything starts', async () => {
    const env = { PROCWARDEN_LIVE_IDLE_TIMEOUT_MS: '10 minutes' };
    const { pool: p, warnings } = pool({ env });
    const dir = leaks.trackDir(makeTmp());
    const runsBefore = sup.list().map((r) => r.id);
    for (let i = 0; i < 2; i++) {
      await expect(p.acquire('k', agentSpec(dir))).rejects.toMatchObject({
        name: 'ProcwardenError',
        code: 'INVALID_ENV',
        message: expect.stringContaining('PROCWARDEN_LIVE_IDLE_TIMEOUT_MS="10 minutes" is not a duration'),
      });
    }
    expect(p.size).toBe(0);
    expect(sup.list().map((r) => r.id)).toEqual(runsBefore); // no process was started
    expect(warnings).toEqual([]);
    // Fixed, it is read again: the next acquire starts.
    env.PROCWARDEN_LIVE_IDLE_TIMEOUT_MS = '5s';
    const session = await p.acquire('k', agentSpec(dir));
    leaks.track(session.pid);
    expect(session.state).toBe('open');
    await p.shutdown();
  });

  it('a value that is not a string (env given as an object) is INVALID_ENV too, not a TypeError', async () => {
    const env = { PROCWARDEN_LIVE_IDLE_TIMEOUT_MS: 5 } as unknown as Record<string, string>;
    const { pool: p } = pool({ env });
    await expect(p.acquire('k', agentSpec(leaks.trackDir(makeTmp())))).rejects.toMatchObject({
      code: 'INVALID_ENV',
      message: expect.stringContaining('PROCWARDEN_LIVE_IDLE_TIMEOUT_MS=5 is not'),
    });
    expect(p.size).toBe(0);
  });

  it('an explicit option beats the environment; an acquire option beats the pool option', async () => {
    const env = { PROCWARDEN_LIVE_IDLE_TIMEOUT_MS: 'not a number' };
    const { pool: p, clock, warnings } = pool({ env, idleTimeoutMs: 2000 });
    await (await idleAfter(p, clock)).closesAt(2000);
    await (await idleAfter(p, clock, { idleTimeoutMs: 3000 })).closesAt(3000);
    expect(warnings).toEqual([]); // the environment was never consulted
  });

  it('0 disables the idle close', async () => {
    const { pool: p, clock } = pool({ env: { PROCWARDEN_LIVE_IDLE_TIMEOUT_MS: '0' } });
    const { session } = await idleAfter(p, clock);
    clock.advance(1000 * MIN);
    expect(session.state).toBe('open');
    expect(clock.pending).toBe(0);
    await p.shutdown();
  });
});
