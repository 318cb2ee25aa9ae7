import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ClosedEvent,
  isProcwardenError,
  type LivePoolOptions,
  LiveSessionPool,
  Supervisor,
} from '../src/index.js';
import { agentSpec, Transcript } from './helpers/live.js';
import { ManualClock } from './helpers/manual-clock.js';
import { alive, exists, LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

const MIN = 60_000;
const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

/** A pool on a manual clock with one agent session, ready to talk. */
async function start(options: LivePoolOptions = {}, key = 'conversation-1') {
  const clock = new ManualClock();
  const dir = leaks.trackDir(makeTmp());
  const pool = new LiveSessionPool({ supervisor: sup, clock, env: {}, ...options });
  const session = await pool.acquire(key, agentSpec(dir));
  leaks.track(session.pid);
  const agent = new Transcript(session);
  await agent.wait('ready');
  const closed: ClosedEvent[] = [];
  session.on('closed', (e) => closed.push(e));
  return { clock, dir, pool, session, agent, closed };
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return isProcwardenError(error) ? error.code : `not a ProcwardenError: ${error}`;
  }
  return undefined;
}

describe('the original scenario', () => {
  it('a turn attaches a background child; closeOnRunEnd drains it, then closes with restart', async () => {
    const { session, agent, dir, closed } = await start({ closeOnRunEnd: true });
    const order: string[] = [];
    session.on('close-deferred', (e) => order.push(`close-deferred:${e.reason}:${e.liveChildren}`));
    session.on('closed', (e) => order.push(`closed:${e.reason}`));

    const turn = session.beginTurn();
    const childPid = await agent.spawnChild('subagent', 700);
    const child = session.attachChild('subagent');
    agent.session.once('line', () => order.push('answer'));
    expect(await agent.ask(1, 'hello')).toBe('echo: hello');
    turn.end();
    expect((await turn.ended).outcome).toBe('completed');

    // The run ended, the session did not: it drains.
    expect(session.state).toBe('draining');
    expect(session.pendingClose).toBe('restart');
    expect(alive(session.pid ?? 0)).toBe(true);
    expect(alive(childPid)).toBe(true);
    expect(codeOf(() => session.beginTurn())).toBe('LIVE_SESSION_CLOSED');

    // The runtime releases the child when the agent reports it done.
    const done = await agent.wait('child-done', { name: 'subagent' });
    order.push('child-done');
    expect(done.code).toBe(0);
    expect(exists(join(dir, 'subagent.done'))).toBe(true);
    expect(child.release()).toBe(true);

    const event = await session.closed;
    expect(event).toMatchObject({ reason: 'restart', drained: true, capFired: false, liveChildren: 0 });
    expect(closed).toHaveLength(1);
    expect(order).toEqual(['answer', 'close-deferred:restart:1', 'child-done', 'closed:restart']);
    expect(alive(session.pid ?? 0)).toBe(false);
  });
});

describe('the idle timer', () => {
  it('never fires while a child is live or a turn is active, and fires 10 min after the last release', async () => {
    // Children live for an hour here: past the default child timeout (30 min), which would release them.
    const { clock, session, agent, closed } = await start({ childTimeoutMs: Number.POSITIVE_INFINITY });
    clock.advance(9 * MIN);
    const turn = session.beginTurn();
    clock.advance(30 * MIN);
    expect(session.state).toBe('open');
    await agent.spawnChild('a', 200);
    await agent.spawnChild('b', 200);
    const a = session.attachChild('a');
    const b = session.attachChild('b');
    turn.end();
    clock.advance(30 * MIN);
    expect(session.state).toBe('open');
    await agent.wait('child-done', { name: 'a' });
    a.release();
    clock.advance(30 * MIN);
    expect(session.state).toBe('open');
    await agent.wait('child-done', { name: 'b' });
    b.release();
    clock.advance(10 * MIN - 1);
    expect(session.state).toBe('open');
    expect(closed).toHaveLength(0);
    clock.advance(1);
    expect(session.state).toBe('closing');
    expect(await session.closed).toMatchObject({
      reason: 'idle',
      drained: false,
      liveChildren: 0,
      capFired: false,
    });
    expect(alive(session.pid ?? 0)).toBe(false);
  });

  it('is re-armed by every change: a new turn restarts the countdown', async () => {
    const { clock, session } = await start({ idleTimeoutMs: 1000 });
    clock.advance(900);
    session.beginTurn().end();
    clock.advance(900);
    expect(session.state).toBe('open');
    clock.advance(100);
    expect((await session.closed).reason).toBe('idle');
  });
});

describe('immediate closes', () => {
  for (const reason of ['abort', 'error', 'shutdown'] as const) {
    it(`'${reason}' with live children closes at once and the whole tree is gone`, async () => {
      const { session, agent, dir } = await start();
      const turn = session.beginTurn();
      const childPid = await agent.spawnChild('worker', 60_000);
      session.attachChild('worker');
      const t0 = Date.now();
      expect(await session.close(reason, 'test')).toBe('closed');
      expect(Date.now() - t0).toBeLessThan(30_000); // the child's work (60 s) was not waited for
      expect((await turn.ended).outcome).toBe('session-closed');
      const event = await session.closed;
      expect(event).toMatchObject({ reason, detail: 'test', drained: false, liveChildren: 1 });
      expect(event.result.tree.signalled).toBe(2); // agent and child, one graceful signal each
      expect(event.result.escalated).toBe(false);
      expect(alive(session.pid ?? 0)).toBe(false);
      expect(alive(childPid)).toBe(false);
      expect(exists(join(dir, 'worker.done'))).toBe(false);
      expect(session.liveChildren).toBe(0);
    });
  }
});

describe('the drain cap', () => {
  it('ends a drain that never comes after 15 min, and the close event says so', async () => {
    const { clock, session, agent, closed } = await start();
    const childPid = await agent.spawnChild('stuck', 60_000);
    session.attachChild('stuck');
    expect(await session.close('idle')).toBe('deferred');
    clock.advance(15 * MIN - 1);
    expect(session.state).toBe('draining');
    expect(alive(childPid)).toBe(true);
    clock.advance(1);
    const event = await session.closed;
    expect(event).toMatchObject({ reason: 'idle', drained: false, capFired: true, liveChildren: 1 });
    expect(closed).toHaveLength(1);
    expect(alive(childPid)).toBe(false);
    expect(alive(session.pid ?? 0)).toBe(false);
  });

  it('a restart requested during an idle drain takes over the close, under the same cap', async () => {
    const { clock, session, agent } = await start({ maxDrainMs: 1000 });
    await agent.spawnChild('stuck', 60_000);
    session.attachChild('stuck');
    const deferred: string[] = [];
    session.on('close-deferred', (e) => deferred.push(e.reason));
    expect(await session.close('idle')).toBe('deferred');
    clock.advance(600);
    expect(await session.close('restart')).toBe('deferred');
    expect(await session.close('idle')).toBe('deferred');
    expect(deferred).toEqual(['idle', 'restart']);
    clock.advance(400);
    expect(await session.closed).toMatchObject({ reason: 'restart', capFired: true });
  });
});

describe('turns', () => {
  it('a second beginTurn while one is active fails with LIVE_TURN_ACTIVE (turns do not queue)', async () => {
    const { session, agent } = await start();
    const first = session.beginTurn();
    expect(codeOf(() => session.beginTurn())).toBe('LIVE_TURN_ACTIVE');
    expect(await agent.ask(1, 'one')).toBe('echo: one');
    first.end();
    first.end();
    const second = session.beginTurn();
    expect(second.id).toBe(2);
    expect(await agent.ask(2, 'two')).toBe('echo: two');
    second.end();
    expect(session.state).toBe('open');
    await session.close('shutdown');
  });

  it('an overall turn timeout closes the session with abort, children or not', async () => {
    const { clock, session, agent } = await start();
    const turn = session.beginTurn({ timeoutMs: 30_000 });
    const childPid = await agent.spawnChild('worker', 60_000);
    session.attachChild('worker');
    clock.advance(29_999);
    expect(turn.active).toBe(true);
    clock.advance(1);
    expect((await turn.ended).outcome).toBe('overall-timeout');
    expect(await session.closed).toMatchObject({
      reason: 'abort',
      detail: 'turn 1: overall-timeout',
      liveChildren: 1,
    });
    expect(alive(childPid)).toBe(false);
  });

  it('a no-output turn timeout counts from the last output of the process', async () => {
    const { clock, session, agent } = await start();
    const turn = session.beginTurn({ noOutputTimeoutMs: 1000 });
    clock.advance(600);
    await agent.ask(1, 'still here'); // output at t=600
    clock.advance(600);
    expect(turn.active).toBe(true);
    agent.send({ cmd: 'silent' });
    clock.advance(400);
    expect((await turn.ended).outcome).toBe('no-output-timeout');
    expect((await session.closed).reason).toBe('abort');
  });

  it('a new turn cancels a pending idle close; the children keep the session open', async () => {
    const { clock, session, agent } = await start({ maxDrainMs: 1000 });
    await agent.spawnChild('w', 300);
    const child = session.attachChild('w');
    expect(await session.close('idle')).toBe('deferred');
    const turn = session.beginTurn();
    expect(session.state).toBe('open');
    clock.advance(5000); // the cap was cancelled with the close
    await agent.wait('child-done', { name: 'w' });
    child.release();
    expect(session.state).toBe('open');
    turn.end();
    await session.close('shutdown');
  });
});

describe('children and close, misuse', () => {
  it('release twice: counted once, one event', async () => {
    const { session } = await start();
    const released: number[] = [];
    session.on('child-released', (e) => released.push(e.liveChildren));
    const a = session.attachChild('a');
    session.attachChild('b');
    expect(session.liveChildren).toBe(2);
    expect(a.release()).toBe(true);
    expect(a.release()).toBe(false);
    expect(a.released).toBe(true);
    expect(session.liveChildren).toBe(1);
    expect(released).toEqual([1]);
    await session.close('abort');
  });

  it('release after close is a no-op; attach after close is a clear error; close twice closes once', async () => {
    const { session, closed } = await start();
    const child = session.attachChild();
    const [first, second] = await Promise.all([session.close('abort'), session.close('idle')]);
    expect([first, second]).toEqual(['closed', 'closed']);
    expect(await session.close('restart')).toBe('closed');
    expect(closed).toHaveLength(1);
    expect(closed[0]?.reason).toBe('abort');
    expect(child.released).toBe(true);
    expect(child.release()).toBe(false);
    expect(session.liveChildren).toBe(0);
    let message = '';
    try {
      session.attachChild('late');
    } catch (error) {
      expect(isProcwardenError(error) && error.code).toBe('LIVE_SESSION_CLOSED');
      message = (error as Error).message;
    }
    expect(message).toMatch(/cannot attach a child to live session conversation-1#1: it is closed \(abort\)/);
    expect(codeOf(() => session.write('x\n'))).toBe('LIVE_SESSION_CLOSED');
    await expect(session.close('nope' as 'idle')).rejects.toMatchObject({ code: 'INVALID_OPTION' });
  });

  it('a child attached during a drain extends it; the close waits for the last release', async () => {
    const { session, closed } = await start();
    const a = session.attachChild('a');
    expect(await session.close('restart')).toBe('deferred');
    const b = session.attachChild('b');
    a.release();
    expect(session.state).toBe('draining');
    expect(closed).toHaveLength(0);
    b.release();
    expect(await session.closed).toMatchObject({ reason: 'restart', drained: true, liveChildren: 0 });
  });

  it("the spec's AbortSignal ends the session with abort", async () => {
    const controller = new AbortController();
    const dir = leaks.trackDir(makeTmp());
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock(), env: {} });
    const session = await pool.acquire('k', { ...agentSpec(dir), signal: controller.signal });
    leaks.track(session.pid);
    await new Transcript(session).wait('ready');
    session.attachChild();
    controller.abort();
    expect(await session.closed).toMatchObject({ reason: 'abort', liveChildren: 1 });
    expect(pool.size).toBe(0);
  });

  it('a process that exits on its own closes the session with error', async () => {
    const { session, agent } = await start();
    const turn = session.beginTurn();
    agent.send({ cmd: 'exit', code: 3 });
    expect((await turn.ended).outcome).toBe('session-closed');
    const event = await session.closed;
    expect(event.reason).toBe('error');
    expect(event.detail).toContain('code 3');
    expect(event.result.exitCode).toBe(3);
    await waitFor(() => !alive(session.pid ?? 0), { what: 'agent gone' });
  });
});
