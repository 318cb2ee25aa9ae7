// Issue 20: session limits hold under any interleaving of acquire, close, eviction and shutdown.
// 200 seeded interleavings (replay one run with PROCWARDEN_FUZZ_SEED=<seed>): each is a burst of
// operations issued without waiting for one another, then a settle. After every operation, no more
// than maxSessions runs of the pool's supervisor are unsettled (a run settles only once its whole
// tree is gone, so this bounds the live processes, and is cheap to read); every 10th settle also
// counts the live processes in /proc (a full scan costs ~100 ms on a busy machine). At the end
// every session's `closed` resolved and nothing is left.
import { afterEach, expect, it } from 'vitest';
import {
  isProcwardenError,
  type LiveChild,
  type LiveSession,
  LiveSessionPool,
  type LiveTurn,
  Supervisor,
} from '../src/index.js';
import { ManualClock } from './helpers/manual-clock.js';
import { cookieHolders, LeakGuard } from './helpers/procs.js';

const MAX_SESSIONS = 2;
const INTERLEAVINGS = 200;
const KEYS = ['a', 'b', 'c', 'd'];
const SEED = Number(process.env.PROCWARDEN_FUZZ_SEED ?? 20_2026);

const sup = new Supervisor({ journal: false });
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

/** mulberry32: small, seeded, the same sequence on every machine. */
function random(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(list: readonly T[]) => list[Math.floor(next() * list.length)] as T,
  };
}

// Codes a racing caller may legitimately get; anything else fails the test.
const EXPECTED_CODES = new Set(['LIVE_SESSION_LIMIT', 'LIVE_SESSION_CLOSED', 'LIVE_TURN_ACTIVE']);

it(`${INTERLEAVINGS} random interleavings of acquire / close / eviction / shutdown never pass maxSessions`, {
  timeout: 600_000,
}, async () => {
  const rnd = random(SEED);
  const clock = new ManualClock();
  const newPool = () =>
    new LiveSessionPool({
      supervisor: sup,
      clock,
      env: {},
      maxSessions: MAX_SESSIONS,
      idleTimeoutMs: 1000,
      maxDrainMs: 5000,
    });
  let pool = newPool();
  let shuttingDown: Promise<void> | undefined;
  const sessions = new Set<LiveSession>();
  const children = new Map<LiveSession, LiveChild[]>();
  const turns = new Map<LiveSession, LiveTurn>();
  const inflight = new Set<Promise<unknown>>();
  const unexpected: unknown[] = [];
  let most = 0;
  let step = '';

  const check = (scan = false) => {
    const unsettled = sup.running().length;
    const alive = scan ? cookieHolders(sup.id).length : 0;
    most = Math.max(most, unsettled);
    if (unsettled > MAX_SESSIONS || alive > MAX_SESSIONS) {
      throw new Error(`seed ${SEED}, ${step}: ${unsettled} runs unsettled, ${alive} processes alive`);
    }
  };
  const track = (promise: Promise<unknown>) => {
    const settled = promise.then(
      () => undefined,
      (error) => {
        if (!isProcwardenError(error) || !EXPECTED_CODES.has(error.code)) unexpected.push(error);
      },
    );
    inflight.add(settled);
    void settled.then(() => inflight.delete(settled));
  };
  const open = () => [...sessions].filter((s) => s.state !== 'closed');
  const attempt = (fn: () => void) => {
    try {
      fn();
    } catch (error) {
      if (!isProcwardenError(error) || !EXPECTED_CODES.has(error.code)) unexpected.push(error);
    }
  };

  const operations: Record<string, () => void> = {
    acquire: () => {
      const key = rnd.pick(KEYS);
      const fingerprint = rnd.pick(['v1', 'v1', 'v2']);
      track(
        pool.acquire(key, { argv: ['cat'] }, { fingerprint }).then((s) => {
          sessions.add(s);
          leaks.track(s.pid);
        }),
      );
    },
    close: () => {
      const s = rnd.pick(open());
      if (s) track(s.close(rnd.pick(['idle', 'restart', 'abort', 'error', 'shutdown'] as const)));
    },
    attach: () => {
      const s = rnd.pick(open());
      if (s) attempt(() => children.set(s, [...(children.get(s) ?? []), s.attachChild()]));
    },
    release: () => {
      const s = rnd.pick([...children.keys()]);
      children.get(s)?.pop()?.release();
    },
    turn: () => {
      const s = rnd.pick(open());
      if (s) attempt(() => turns.set(s, s.beginTurn()));
    },
    'end-turn': () => {
      const s = rnd.pick([...turns.keys()]);
      turns.get(s)?.end();
      turns.delete(s);
    },
    // The process ends on its own (it is ours: started by this test's supervisor).
    crash: () => {
      const s = rnd.pick(open());
      if (!s?.pid || s.state === 'closing') return;
      try {
        process.kill(s.pid, 'SIGKILL');
      } catch {
        // already gone: it crashed or was closed a moment ago
      }
    },
    // Idle timers and drain caps fire.
    time: () => clock.advance(rnd.pick([500, 1000, 5000])),
    shutdown: () => {
      shuttingDown ??= pool.shutdown();
    },
  };
  const weights = Object.entries({
    acquire: 8,
    close: 3,
    attach: 2,
    release: 2,
    turn: 2,
    'end-turn': 2,
    crash: 1,
    time: 2,
    shutdown: 1,
  }).flatMap(([name, w]) => Array<string>(w).fill(name));

  for (let i = 0; i < INTERLEAVINGS; i++) {
    const burst = 2 + rnd.int(5);
    for (let j = 0; j < burst; j++) {
      const name = rnd.pick(weights);
      step = `interleaving ${i}, operation ${j} (${name})`;
      operations[name]?.();
      // Let some of what was started run before the next operation, sometimes not at all.
      for (let k = rnd.int(3); k > 0; k--) await new Promise((r) => setImmediate(r));
      check();
    }
    // Settle: whatever waits on a drain gets it (children released, turns ended, caps fired).
    step = `interleaving ${i}, settle`;
    for (const list of children.values()) for (const c of list.splice(0)) c.release();
    for (const t of turns.values()) t.end();
    turns.clear();
    clock.advance(5000);
    while (inflight.size > 0) {
      await Promise.all([...inflight]);
      check();
    }
    if (shuttingDown) {
      await shuttingDown;
      shuttingDown = undefined;
      pool = newPool();
    }
    check(i % 10 === 0);
    expect(unexpected, `seed ${SEED}, ${step}`).toEqual([]);
  }

  await pool.shutdown();
  // Every session's closed resolves (the test timeout catches one that never does).
  await Promise.all([...sessions].map((s) => s.closed));
  expect(cookieHolders(sup.id)).toEqual([]);
  expect(most).toBeGreaterThan(0);
  expect(sessions.size).toBeGreaterThan(MAX_SESSIONS);
});
