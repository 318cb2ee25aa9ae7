// Issue 20, items 1-7: live sessions under hostile input and careless callers never wedge, never
// lose a line, never pass maxSessions, and say what failed.
import { afterEach, describe, expect, it } from 'vitest';
import {
  type LivePoolOptions,
  type LiveSession,
  LiveSessionPool,
  type ProcwardenError,
  type RunSpec,
  Supervisor,
} from '../src/index.js';
import { LineSplitter } from '../src/live/lines.js';
import { agentSpec, Transcript } from './helpers/live.js';
import { ManualClock } from './helpers/manual-clock.js';
import { alive, cookieHolders, LeakGuard, makeTmp } from './helpers/procs.js';

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

function pool(options: LivePoolOptions = {}) {
  const clock = new ManualClock();
  return { clock, pool: new LiveSessionPool({ supervisor: sup, clock, env: {}, ...options }) };
}

/** A process that writes `script` (JS run by node) and then waits on stdin. */
function nodeSpec(script: string): RunSpec {
  return { argv: [process.execPath, '-e', script] };
}

/** The README's listener: JSON.parse with no try. */
function parseNumbers(session: LiveSession): number[] {
  const seen: number[] = [];
  session.on('line', (line) => seen.push((JSON.parse(line) as { n: number }).n));
  return seen;
}

function errorsOf(session: LiveSession): ProcwardenError[] {
  const errors: ProcwardenError[] = [];
  session.on('error', (error) => errors.push(error));
  return errors;
}

describe('item 1: concurrent acquires respect maxSessions', () => {
  it('four keys acquired at once with maxSessions 2: never more than 2 processes, pool.size 2', async () => {
    const { pool: p } = pool({ maxSessions: 2 });
    let most = 0;
    const watch = setInterval(() => {
      most = Math.max(most, cookieHolders(sup.id).length);
    }, 5);
    const sessions = await Promise.all(
      ['a', 'b', 'c', 'd'].map(async (key) => {
        const s = await p.acquire(key, { argv: ['cat'] });
        leaks.track(s.pid);
        most = Math.max(most, cookieHolders(sup.id).length);
        return s;
      }),
    );
    clearInterval(watch);
    expect(p.size).toBe(2);
    expect(most).toBeLessThanOrEqual(2);
    // As if acquired one after the other: the first two were evicted to make room for the last two.
    expect((await sessions[0]?.closed)?.reason).toBe('idle');
    expect((await sessions[1]?.closed)?.reason).toBe('idle');
    expect(sessions.slice(2).map((s) => s.state)).toEqual(['open', 'open']);
    await p.shutdown();
  });
});

describe("item 2: a throwing 'line' listener", () => {
  it('loses no other line, glues no fragment, and is reported as an error event', async () => {
    const { pool: p } = pool();
    const session = await p.acquire(
      'k',
      nodeSpec(
        `process.stdout.write('{"n":1}\\nNOT JSON\\n{"n":2}\\n{"n":3}\\n');` +
          `setTimeout(() => process.stdout.write('{"n":4}\\n'), 200); process.stdin.resume();`,
      ),
    );
    leaks.track(session.pid);
    const seen = parseNumbers(session);
    const errors = errorsOf(session);
    const others: string[] = [];
    session.on('line', (line) => others.push(line));
    await new Promise<void>((resolve) => session.on('line', (line) => line === '{"n":4}' && resolve()));
    expect(seen).toEqual([1, 2, 3, 4]);
    // A listener after the throwing one still sees every line.
    expect(others).toEqual(['{"n":1}', 'NOT JSON', '{"n":2}', '{"n":3}', '{"n":4}']);
    expect(errors).toHaveLength(1);
    expect(errors[0]?.code).toBe('LISTENER_THREW');
    expect(errors[0]?.message).toContain("'line' listener threw");
    expect(errors[0]?.cause).toBeInstanceOf(SyntaxError);
    await p.shutdown();
  });
});

describe('async listeners and removed listeners', () => {
  it("an async 'line' listener that rejects is an error event, never an unhandled rejection", async () => {
    const { pool: p } = pool();
    const session = await p.acquire(
      'k',
      nodeSpec(`process.stdout.write('{"n":1}\\nNOT JSON\\n{"n":2}\\n'); process.stdin.resume();`),
    );
    leaks.track(session.pid);
    const seen: number[] = [];
    // The README's listener, written as async: its rejection used to end the host.
    session.on('line', async (line) => {
      seen.push((JSON.parse(line) as { n: number }).n);
    });
    const errors = errorsOf(session);
    await new Promise<void>((resolve) => session.on('line', (line) => line === '{"n":2}' && resolve()));
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual([1, 2]);
    expect(errors.map((e) => e.code)).toEqual(['LISTENER_THREW']);
    expect(errors[0]?.message).toContain("'line' listener returned a promise that rejected");
    await p.shutdown();
  });

  it('an async pool listener that rejects is a process warning', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const { pool: p } = pool();
      p.on('turn-start', async () => {
        throw new Error('pool listener');
      });
      const session = await p.acquire('k', { argv: ['cat'] });
      leaks.track(session.pid);
      session.beginTurn().end();
      await new Promise((r) => setTimeout(r, 20));
      await p.shutdown();
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.map((w) => (w as ProcwardenError).code)).toEqual(['LISTENER_THREW']);
    expect(warnings[0]?.message).toContain("'turn-start' listener returned a promise that rejected");
  });

  it("a session's removeAllListeners() leaves the pool's bookkeeping whole: a closed session frees its slot", async () => {
    const { pool: p } = pool({ maxSessions: 1 });
    const closedEvents: string[] = [];
    p.on('closed', (event) => closedEvents.push(event.sessionId));
    const first = await p.acquire('a', { argv: ['cat'] });
    leaks.track(first.pid);
    first.removeAllListeners();
    await first.close('abort');
    expect(p.size).toBe(0);
    expect(closedEvents).toEqual([first.id]);
    const second = await p.acquire('b', { argv: ['cat'] });
    leaks.track(second.pid);
    expect(second.state).toBe('open');
    await p.shutdown();
  });
});

describe('item 3: a listener throwing on the last line at exit', () => {
  const spec = nodeSpec(`process.stdout.write('{"n":1}\\nNOT JSON');`);

  it('closed resolves, acquire and shutdown still work, the error is an event', async () => {
    const { pool: p } = pool();
    const session = await p.acquire('k', spec);
    leaks.track(session.pid);
    const seen = parseNumbers(session);
    const errors = errorsOf(session);
    const event = await session.closed;
    expect(session.state).toBe('closed');
    expect(event.result.exitCode).toBe(0);
    expect(seen).toEqual([1]);
    expect(errors.map((e) => e.code)).toEqual(['LISTENER_THREW']);
    const next = await p.acquire('other', { argv: ['cat'] });
    leaks.track(next.pid);
    expect(next.state).toBe('open');
    await p.shutdown();
    expect(alive(next.pid ?? 0)).toBe(false);
  });

  it("without an 'error' listener it becomes a process warning, never a crash", async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const { pool: p } = pool();
      const session = await p.acquire('k', spec);
      leaks.track(session.pid);
      parseNumbers(session);
      await session.closed;
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      await p.shutdown();
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.map((w) => (w as ProcwardenError).code)).toEqual(['LISTENER_THREW']);
  });
});

describe("item 4: an immediate reason overrides a pending 'restart'", () => {
  async function drainingSession(options: { signal?: AbortSignal } = {}) {
    const { pool: p } = pool({ closeOnRunEnd: true });
    const dir = leaks.trackDir(makeTmp());
    const session = await p.acquire('k', { ...agentSpec(dir), ...options });
    leaks.track(session.pid);
    const agent = new Transcript(session);
    await agent.wait('ready');
    const turn = session.beginTurn();
    await agent.spawnChild('sub', 60_000);
    session.attachChild('sub');
    turn.end();
    expect(session.pendingClose).toBe('restart');
    return { p, session, agent };
  }

  it('the process exiting with code 9 during the drain is reported as that, not restart', async () => {
    const { session, agent } = await drainingSession();
    agent.send({ cmd: 'exit', code: 9 });
    const event = await session.closed;
    expect(event.reason).toBe('error');
    expect(event.detail).toContain('code 9');
    expect(event.result.exitCode).toBe(9);
  });

  it('an abort during the drain is reported as abort', async () => {
    const controller = new AbortController();
    const { session } = await drainingSession({ signal: controller.signal });
    controller.abort();
    expect((await session.closed).reason).toBe('abort');
  });
});

describe('item 5: a throwing output.onData', () => {
  it('does not blind the session: lines arrive, the turn sees output, the result notes it', async () => {
    const { clock, pool: p } = pool();
    const dir = leaks.trackDir(makeTmp());
    const throwing = () => {
      throw new Error('consumer broke');
    };
    const session = await p.acquire('k', { ...agentSpec(dir), output: { onData: throwing } });
    leaks.track(session.pid);
    const agent = new Transcript(session);
    await agent.wait('ready');
    const turn = session.beginTurn({ noOutputTimeoutMs: 1000 });
    for (let i = 1; i <= 3; i++) {
      expect(await agent.ask(i, `q${i}`)).toBe(`echo: q${i}`);
      clock.advance(600); // more than 1000 ms in all, but never 1000 ms without output
    }
    expect(turn.active).toBe(true);
    turn.end();
    const event = await (async () => {
      void session.close('abort', 'test over');
      return session.closed;
    })();
    expect(event.result.notes.some((n) => n.includes('output.onData threw: consumer broke'))).toBe(true);
  });
});

describe('item 6: line framing past maxLineChars', () => {
  it('a 10 MB line is one truncated line event, and the next line is separate', async () => {
    const { pool: p } = pool();
    const session = await p.acquire(
      'k',
      nodeSpec(`process.stdout.write('x'.repeat(10_000_000) + '\\nshort\\n'); process.stdin.resume();`),
    );
    leaks.track(session.pid);
    const lines: { length: number; truncated: boolean; info: number }[] = [];
    session.on('line', (line, _stream, info) =>
      lines.push({ length: line.length, truncated: info.truncated, info: info.length }),
    );
    await new Promise<void>((resolve) => session.on('line', (line) => line === 'short' && resolve()));
    expect(lines).toEqual([
      { length: 4 * 1024 * 1024, truncated: true, info: 10_000_000 },
      { length: 5, truncated: false, info: 5 },
    ]);
    await p.shutdown();
  });

  it('splitting is linear in the bytes: an 8 MB line in 1 KB pieces costs no rescans', () => {
    const lines: [number, boolean][] = [];
    const split = new LineSplitter((line, _stream, info) => lines.push([line.length, info.truncated]));
    const piece = 'y'.repeat(1024);
    const t0 = performance.now();
    for (let i = 0; i < 8 * 1024; i++) split.push(piece, 'stdout');
    split.push('\r\nnext\n', 'stdout');
    const ms = performance.now() - t0;
    expect(lines).toEqual([
      [4 * 1024 * 1024, true],
      [4, false],
    ]);
    // Rescanning the pending line per chunk (the old splitter) took tens of seconds here; a
    // linear pass takes milliseconds. The bound only catches the quadratic case on a loaded machine.
    expect(ms).toBeLessThan(3000);
  });

  it('a line cut at the limit still drops its \\r; pieces split anywhere give the same lines', () => {
    const text = 'ab\r\n\r\ncdefgh\r\nij\rk\n\nlast';
    const expected: string[] = [];
    new LineSplitter((l, _s, i) => expected.push(`${l}|${i.truncated}|${i.length}`), 4).push(text, 'stdout');
    for (let cut = 0; cut <= text.length; cut++) {
      const got: string[] = [];
      const split = new LineSplitter((l, _s, i) => got.push(`${l}|${i.truncated}|${i.length}`), 4);
      split.push(text.slice(0, cut), 'stdout');
      split.push(text.slice(cut), 'stdout');
      split.flush();
      expect(got).toEqual([...expected, 'last|false|4']);
    }
    expect(expected).toEqual(['ab|false|2', '|false|0', 'cdef|true|6', 'ij\rk|false|4', '|false|0']);
  });

  it('maxLineChars is an option, checked', async () => {
    const { pool: p } = pool({ maxLineChars: 8 });
    const session = await p.acquire('k', nodeSpec(`process.stdout.write('0123456789\\nok\\n');`));
    leaks.track(session.pid);
    const lines: string[] = [];
    session.on('line', (line, _s, info) => lines.push(`${line}:${info.truncated}:${info.length}`));
    await session.closed;
    expect(lines).toEqual(['01234567:true:10', 'ok:false:2']);
    await expect(p.acquire('j', { argv: ['cat'] }, { maxLineChars: 0 })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
  });
});

describe('item 7: acquire checks the spec before anything', () => {
  it('acquire(k, null) is a ProcwardenError', async () => {
    const { pool: p } = pool();
    await expect(p.acquire('k', null as never)).rejects.toMatchObject({ code: 'INVALID_SPEC' });
  });

  it('at capacity, a bad spec fails without evicting the idle session', async () => {
    const { pool: p } = pool({ maxSessions: 1 });
    const a = await p.acquire('a', { argv: ['cat'] });
    leaks.track(a.pid);
    await expect(p.acquire('b', { argv: [] as never })).rejects.toMatchObject({ code: 'INVALID_ARGV' });
    expect(a.state).toBe('open');
    expect(alive(a.pid ?? 0)).toBe(true);
    expect(p.get('a')).toBe(a);
    await p.shutdown();
  });
});
