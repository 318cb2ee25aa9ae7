// Live children that cannot pin a session for ever (issue 44, item 4): a handle is released by its
// process's exit (identity-checked) or its timeout; a closeOnRunEnd close waits a moment for a
// child reported after the answer; an acquire that reuses a session cancels its pending idle close.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ChildReleasedEvent,
  type CloseCancelledEvent,
  type CloseDeferredEvent,
  DEFAULT_CHILD_TIMEOUT_MS,
  DEFAULT_RUN_END_SETTLE_MS,
  isProcwardenError,
  type LiveChild,
  type LivePoolOptions,
  type LiveSession,
  LiveSessionPool,
  type ProcwardenError,
  Supervisor,
} from '../src/index.js';
import { EXIT_POLL_MS } from '../src/live/exit-watch.js';
import { agentSpec, Transcript } from './helpers/live.js';
import { ManualClock } from './helpers/manual-clock.js';
import { pidReuseSkipReason, spawnAtPid } from './helpers/pid-reuse.js';
import { alive, exists, killAndWait, LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

const MIN = 60_000;
const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

/** A pool on a manual clock unless `realTime` (then the pool's timers run on the real clock). */
function pool(options: LivePoolOptions = {}, realTime = false) {
  const clock = new ManualClock();
  const p = new LiveSessionPool({ supervisor: sup, env: {}, ...(realTime ? {} : { clock }), ...options });
  return { clock, pool: p };
}

async function open(p: LiveSessionPool, key: string) {
  const dir = leaks.trackDir(makeTmp());
  const session = await p.acquire(key, agentSpec(dir), { fingerprint: 'v1' });
  leaks.track(session.pid);
  const agent = new Transcript(session);
  await agent.wait('ready');
  return { session, agent, dir };
}

/** Starts a background child whose 'child-done' report is never written; its pid, tracked. */
async function quietChild(agent: Transcript, name: string, ms: number): Promise<number> {
  agent.send({ cmd: 'spawn', name, ms, quiet: true });
  const pid = (await agent.wait('child-started', { name })).pid as number;
  leaks.track(pid);
  return pid;
}

/** The next 'child-released' event of `session`, or a rejection after a loose bound (a hang). */
function nextRelease(session: LiveSession, boundMs = 15_000): Promise<ChildReleasedEvent> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no child-released within ${boundMs} ms`)), boundMs);
    session.once('child-released', (event) => {
      clearTimeout(timer);
      resolve(event);
    });
  });
}

/** Resolves what `promise` gives within `ms`, else the string 'pending'. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'pending'>((resolve) => {
    timer = setTimeout(() => resolve('pending'), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return isProcwardenError(error) ? error.code : `not a ProcwardenError: ${error}`;
  }
  return undefined;
}

/** Lets the reads and callbacks a clock advance started run (the table's reads are promises). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('a child whose report is lost does not pin its session (maxSessions: 1)', () => {
  it('attached with its pid, it is released when that process exits, and the next acquire evicts the session', async () => {
    const { pool: p } = pool({ maxSessions: 1 }, true);
    const a = await open(p, 'a');
    const childPid = await quietChild(a.agent, 'sub', 3000);
    const released = nextRelease(a.session);
    const child = a.session.attachChild('sub', { pid: childPid });
    expect(child.pid).toBe(childPid);
    // While it works, it holds the session, as before: no room for another key.
    await expect(p.acquire('b', agentSpec('/unused'))).rejects.toMatchObject({ code: 'LIVE_SESSION_LIMIT' });

    const event = await released;
    expect(event).toMatchObject({ childId: child.id, label: 'sub', pid: childPid, releasedBy: 'exit' });
    expect(event.liveChildren).toBe(0);
    expect(child.releasedBy).toBe('exit');
    expect(alive(childPid)).toBe(false);
    expect(exists(join(a.dir, 'sub.done'))).toBe(true); // it ended by itself, its work done
    expect(a.agent.has('child-done')).toBe(false); // and nobody was told: the report was lost

    const b = await open(p, 'b');
    expect(await a.session.closed).toMatchObject({
      reason: 'idle',
      detail: 'evicted: maxSessions (1) reached',
    });
    expect(p.get('b')).toBe(b.session);
    await p.shutdown();
  });

  it('attached with timeoutMs, it is released after that long (releasedBy timeout), though it still runs', async () => {
    const { pool: p } = pool({ maxSessions: 1 }, true);
    const a = await open(p, 'a');
    const childPid = await quietChild(a.agent, 'sub', 60_000);
    const released = nextRelease(a.session);
    const child = a.session.attachChild('sub', { timeoutMs: 2000 });
    expect(child.pid).toBeUndefined();
    await expect(p.acquire('b', agentSpec('/unused'))).rejects.toMatchObject({ code: 'LIVE_SESSION_LIMIT' });

    expect(await released).toMatchObject({ releasedBy: 'timeout', liveChildren: 0, pid: undefined });
    expect(child.released).toBe(true);
    expect(child.release()).toBe(false);
    // The timeout lets go of the handle only: the child is not signalled for it.
    expect(alive(childPid)).toBe(true);

    // The session is evictable now; its tree (the child with it) ends as it closes.
    await open(p, 'b');
    expect((await a.session.closed).reason).toBe('idle');
    expect(alive(childPid)).toBe(false);
    await p.shutdown();
  });

  it("the pool's childTimeoutMs applies to a child attached with no options; then the idle timer runs", async () => {
    const { clock, pool: p } = pool({ childTimeoutMs: 5000, idleTimeoutMs: 1000 });
    const { session, agent } = await open(p, 'k');
    await quietChild(agent, 'sub', 60_000);
    const events: ChildReleasedEvent[] = [];
    session.on('child-released', (e) => events.push(e));
    const child = session.attachChild('sub');
    clock.advance(4999);
    expect(session.liveChildren).toBe(1);
    expect(session.state).toBe('open');
    clock.advance(1);
    expect(events).toMatchObject([{ label: 'sub', releasedBy: 'timeout', liveChildren: 0 }]);
    expect(child.releasedBy).toBe('timeout');
    clock.advance(999);
    expect(session.state).toBe('open');
    clock.advance(1);
    expect((await session.closed).reason).toBe('idle');
  });

  it('the default child timeout is finite (30 min), and Infinity asked for never fires', async () => {
    expect(DEFAULT_CHILD_TIMEOUT_MS).toBe(30 * MIN);
    const { clock, pool: p } = pool({ idleTimeoutMs: 0 });
    const { session, agent } = await open(p, 'k');
    await quietChild(agent, 'a', 60_000);
    await quietChild(agent, 'b', 60_000);
    const byDefault = session.attachChild('a');
    const forever = session.attachChild('b', { timeoutMs: Number.POSITIVE_INFINITY });
    clock.advance(30 * MIN - 1);
    expect(byDefault.released).toBe(false);
    clock.advance(1);
    expect(byDefault.releasedBy).toBe('timeout');
    clock.advance(100 * 365 * 24 * 60 * MIN);
    expect(forever.released).toBe(false);
    expect(session.liveChildren).toBe(1);
    await p.shutdown();
    expect(forever.releasedBy).toBe('session-closed');
  });
});

describe('the exit of an attached pid', () => {
  it('releases the handle, after which the idle timer runs; a throwing listener changes nothing', async () => {
    const { clock, pool: p } = pool({ idleTimeoutMs: 1000 });
    const { session, agent } = await open(p, 'k');
    const errors: ProcwardenError[] = [];
    session.on('error', (e) => errors.push(e));
    session.on('child-released', () => {
      throw new Error('listener broke');
    });
    const childPid = await quietChild(agent, 'sub', 1000);
    const child = session.attachChild('sub', { pid: childPid });
    clock.advance(10 * MIN);
    expect(session.state).toBe('open'); // a live child holds the idle timer
    await waitFor(() => !alive(childPid), { what: 'the child to finish' });
    await settle();
    expect(child.released).toBe(false); // noticed by a poll, which the manual clock has not run
    clock.advance(EXIT_POLL_MS);
    await waitFor(() => child.released, { what: 'the poll to notice the exit' });
    expect(child.releasedBy).toBe('exit');
    expect(errors.map((e) => e.code)).toEqual(['LISTENER_THREW']);
    clock.advance(999);
    expect(session.state).toBe('open');
    clock.advance(1);
    expect(await session.closed).toMatchObject({ reason: 'idle', liveChildren: 0 });
  });

  it.skipIf(pidReuseSkipReason() !== null)(
    'counts when the pid names another process by the next poll: identity is pid and start time',
    async () => {
      const { clock, pool: p } = pool();
      const { session, agent } = await open(p, 'k');
      const childPid = await quietChild(agent, 'sub', 200);
      const child = session.attachChild('sub', { pid: childPid });
      await waitFor(() => !existsSync(`/proc/${childPid}`), { what: 'the child to exit and be reaped' });
      // A stranger takes the number before the poll looks: by pid alone, the child would live on.
      const stranger = await spawnAtPid(childPid, ['sleep', '30']);
      try {
        expect(stranger?.pid).toBe(childPid);
        leaks.track(stranger?.pid);
        clock.advance(EXIT_POLL_MS);
        await waitFor(() => child.released, { what: 'the release of the reused pid' });
        expect(child.releasedBy).toBe('exit');
        expect(alive(childPid)).toBe(true); // the stranger, untouched
      } finally {
        await killAndWait(stranger);
      }
      await p.shutdown();
    },
  );

  it('a pid already gone when attached is released at once and does not hold a drain', async () => {
    const { pool: p } = pool();
    const { session, agent } = await open(p, 'k');
    const childPid = await quietChild(agent, 'sub', 0);
    await waitFor(() => !alive(childPid), { what: 'the child to exit' });
    const child = session.attachChild('sub', { pid: childPid });
    expect(await session.close('restart', 'test')).toBe('deferred');
    expect(await session.closed).toMatchObject({ reason: 'restart', drained: true, liveChildren: 0 });
    expect(child.releasedBy).toBe('exit');
  });
});

describe('attachChild input', () => {
  it('a bad pid is INVALID_PID, a bad timeout or option INVALID_OPTION; the session is unharmed', async () => {
    const { pool: p } = pool();
    const { session } = await open(p, 'k');
    for (const pid of [1.5, 0, -3, '12', Number.NaN, 2 ** 40, null]) {
      expect(codeOf(() => session.attachChild('x', { pid } as never))).toBe('INVALID_PID');
    }
    for (const options of [
      { timeoutMs: -1 },
      { timeoutMs: 0 },
      { timeoutMs: Number.NaN },
      { timeoutMs: '5' },
      { timoutMs: 5 },
      'pid',
      null,
      [],
    ]) {
      expect(codeOf(() => session.attachChild('x', options as never))).toBe('INVALID_OPTION');
    }
    expect(codeOf(() => session.attachChild(5 as never))).toBe('INVALID_OPTION');
    expect(session.liveChildren).toBe(0);
    expect(session.state).toBe('open');
    const child = session.attachChild('fine', { timeoutMs: 1000 });
    expect(session.liveChildren).toBe(1);
    expect(child.release()).toBe(true);
    await p.shutdown();
  });
});

describe('acquire() reusing a session', () => {
  it('cancels its pending idle close: releasing the last child afterwards does not close it', async () => {
    const { pool: p } = pool({ idleTimeoutMs: 1000 });
    const { session, agent, dir } = await open(p, 'k');
    const cancelled: CloseCancelledEvent[] = [];
    p.on('close-cancelled', (e) => cancelled.push(e));
    const child = session.attachChild('sub', { pid: await agent.spawnChild('sub', 60_000) });
    expect(await session.close('idle', 'caller')).toBe('deferred');
    expect(session.state).toBe('draining');

    const again = await p.acquire('k', agentSpec(dir), { fingerprint: 'v1' });
    expect(again).toBe(session);
    expect(session.state).toBe('open');
    expect(session.pendingClose).toBeUndefined();
    expect(cancelled).toEqual([{ key: 'k', sessionId: session.id, reason: 'idle', by: 'acquire' }]);

    child.release();
    expect(session.state).toBe('open'); // before, the idle close went ahead here, under the caller
    expect(await agent.ask(1, 'still here')).toBe('echo: still here');
    await p.shutdown();
  });

  it("waits for a pending 'restart' instead (it is never cancelled)", async () => {
    const { pool: p } = pool();
    const { session, agent } = await open(p, 'k');
    const child = session.attachChild('sub', { pid: await agent.spawnChild('sub', 60_000) });
    expect(await session.close('restart')).toBe('deferred');
    const next = p.acquire('k', agentSpec(leaks.trackDir(makeTmp())), { fingerprint: 'v1' });
    expect(await within(next, 300)).toBe('pending');
    expect(session.pendingClose).toBe('restart');
    child.release();
    const fresh = await next;
    leaks.track(fresh.pid);
    expect(fresh).not.toBe(session);
    expect((await session.closed).reason).toBe('restart');
    await p.shutdown();
  });
});

describe('closeOnRunEnd and a child reported after the answer', () => {
  /**
   * An agent tool as the docs show it: children attached from the agent's reports, the turn ended
   * the moment the answer line is read (so a report in a later chunk comes after the turn end).
   */
  async function lateReport(late: number) {
    const { pool: p } = pool({ closeOnRunEnd: true, runEndSettleMs: 5000 }, true);
    const { session, agent, dir } = await open(p, 'k');
    const children = new Map<string, LiveChild>();
    const errors: unknown[] = [];
    session.on('error', (e) => errors.push(e));
    session.on('line', (line) => {
      const msg = JSON.parse(line);
      if (msg.type === 'child-started') {
        leaks.track(msg.pid);
        children.set(msg.name, session.attachChild(msg.name, { pid: msg.pid }));
      }
      if (msg.type === 'child-done') children.get(msg.name)?.release();
    });
    const turn = session.beginTurn();
    session.on('line', (line) => {
      if (JSON.parse(line).type === 'answer') turn.end();
    });
    agent.send({ cmd: 'turn', id: 1, text: 'work on it', child: { name: 'sub', ms: 800, late } });
    const closed = await session.closed;
    const sub = children.get('sub');
    return { closed, sub, dir, errors, p };
  }

  for (const late of [0, 20]) {
    it(`a child reported ${late} ms after the answer defers the close and finishes its work`, async () => {
      const { closed, sub, dir, errors, p } = await lateReport(late);
      expect(errors).toEqual([]); // no attachChild on a closing session
      expect(sub?.released).toBe(true);
      expect(['caller', 'exit']).toContain(sub?.releasedBy);
      expect(closed).toMatchObject({ reason: 'restart', drained: true, capFired: false, liveChildren: 0 });
      expect(exists(join(dir, 'sub.done'))).toBe(true); // not killed at the turn's end
      await p.shutdown();
    });
  }
});

describe('the run-end settle window', () => {
  it('with no child reported, the close waits runEndSettleMs (default 500 ms), then closes', async () => {
    expect(DEFAULT_RUN_END_SETTLE_MS).toBe(500);
    const { clock, pool: p } = pool({ closeOnRunEnd: true });
    const { session } = await open(p, 'k');
    const deferred: CloseDeferredEvent[] = [];
    session.on('close-deferred', (e) => deferred.push(e));
    session.beginTurn().end();
    expect(session.state).toBe('draining');
    expect(session.pendingClose).toBe('restart');
    expect(deferred).toMatchObject([{ reason: 'restart', liveChildren: 0, settleMs: 500 }]);
    expect(codeOf(() => session.beginTurn())).toBe('LIVE_SESSION_CLOSED');
    clock.advance(499);
    expect(session.state).toBe('draining');
    clock.advance(1);
    expect(session.state).toBe('closing');
    // A report after the window is too late: the close went ahead.
    expect(codeOf(() => session.attachChild('late'))).toBe('LIVE_SESSION_CLOSED');
    expect(await session.closed).toMatchObject({ reason: 'restart', drained: false, liveChildren: 0 });
  });

  it("a polite close() within it joins it ('deferred'), as does a restart for a new fingerprint", async () => {
    const { clock, pool: p } = pool({ closeOnRunEnd: true });
    const { session } = await open(p, 'k');
    session.beginTurn().end();
    expect(await session.close('idle')).toBe('deferred');
    expect(await session.close('restart', 'asked')).toBe('deferred');
    const next = p.acquire('k', agentSpec(leaks.trackDir(makeTmp())), { fingerprint: 'v2' });
    expect(await within(next, 300)).toBe('pending');
    expect(session.state).toBe('draining');
    clock.advance(DEFAULT_RUN_END_SETTLE_MS);
    const fresh = await next;
    leaks.track(fresh.pid);
    expect(await session.closed).toMatchObject({ reason: 'restart', detail: 'closeOnRunEnd after turn 1' });
    await p.shutdown();
  });

  it('runEndSettleMs: 0 closes at once, as before', async () => {
    const { pool: p } = pool({ closeOnRunEnd: true, runEndSettleMs: 0 });
    const { session } = await open(p, 'k');
    session.beginTurn().end();
    expect(session.state).toBe('closing');
    expect((await session.closed).reason).toBe('restart');
  });

  it('a child attached within it defers the close as usual, past the window, until released', async () => {
    const { clock, pool: p } = pool({ closeOnRunEnd: true });
    const { session, agent } = await open(p, 'k');
    session.beginTurn().end();
    clock.advance(100);
    const child = session.attachChild('sub', { pid: await agent.spawnChild('sub', 60_000) });
    clock.advance(10 * MIN);
    expect(session.state).toBe('draining');
    expect(child.release()).toBe(true);
    expect(await session.closed).toMatchObject({ reason: 'restart', drained: true, capFired: false });
  });

  it('at maxSessions, an acquire of another key waits for it to end instead of failing', async () => {
    const { clock, pool: p } = pool({ closeOnRunEnd: true, maxSessions: 1 });
    const a = await open(p, 'a');
    a.session.beginTurn().end();
    const next = p.acquire('b', agentSpec(leaks.trackDir(makeTmp())));
    expect(await within(next, 300)).toBe('pending');
    clock.advance(DEFAULT_RUN_END_SETTLE_MS);
    const b = await next;
    leaks.track(b.pid);
    expect((await a.session.closed).reason).toBe('restart');
    expect(p.get('b')).toBe(b);
    await p.shutdown();
  });
});
