import { afterEach, describe, expect, it } from 'vitest';
import { LiveSessionPool, type RunSpec, Supervisor, shouldClearSessionBinding } from '../src/index.js';
import { ExitWatch } from '../src/live/exit-watch.js';
import { idleTimeoutFromEnv } from '../src/live/idle-timeout.js';
import { LineSplitter } from '../src/live/lines.js';
import { OneShot } from '../src/live/timer.js';
import type { ProcessInfo, ProcessTable } from '../src/tree/index.js';
import { ManualClock } from './helpers/manual-clock.js';
import { LeakGuard } from './helpers/procs.js';

// Nothing here may start a process; the guard proves it.
const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

describe('shouldClearSessionBinding', () => {
  it('keeps the binding on an empty response', () => {
    expect(shouldClearSessionBinding(Object.assign(new Error('no output'), { code: 'empty_response' }))).toBe(
      false,
    );
    expect(shouldClearSessionBinding({ code: 'empty_response' }, { keepOnAbort: false })).toBe(false);
  });

  it('clears it on an AbortError unless keepOnAbort', () => {
    const domAbort = new DOMException('aborted', 'AbortError');
    const controller = new AbortController();
    controller.abort();
    const nodeAbort = Object.assign(new Error('The operation was aborted'), {
      name: 'AbortError',
      code: 'ABORT_ERR',
    });
    for (const error of [domAbort, controller.signal.reason, nodeAbort]) {
      expect(shouldClearSessionBinding(error)).toBe(true);
      expect(shouldClearSessionBinding(error, { keepOnAbort: true })).toBe(false);
    }
  });

  it('clears it on any other error, keeps it when there is none', () => {
    expect(shouldClearSessionBinding(new Error('boom'))).toBe(true);
    expect(shouldClearSessionBinding(new Error('boom'), { keepOnAbort: true })).toBe(true);
    expect(shouldClearSessionBinding({ code: 'LIVE_SESSION_CLOSED' })).toBe(true);
    expect(shouldClearSessionBinding('a thrown string')).toBe(true);
    expect(shouldClearSessionBinding(undefined)).toBe(false);
    expect(shouldClearSessionBinding(null)).toBe(false);
  });
});

describe('PROCWARDEN_LIVE_IDLE_TIMEOUT_MS', () => {
  const read = (value: string | undefined) => idleTimeoutFromEnv({ PROCWARDEN_LIVE_IDLE_TIMEOUT_MS: value });

  it('a bare number is milliseconds; unset or empty means the default', () => {
    expect(read('1500')).toBe(1500);
    expect(read(' 42 ')).toBe(42);
    expect(read('0')).toBe(0);
    expect(read(undefined)).toBe(600_000);
    expect(read('')).toBe(600_000);
  });

  it("takes the CLI's duration syntax: a number with a unit is converted", () => {
    expect(read('10s')).toBe(10_000);
    expect(read('1.5m')).toBe(90_000);
    expect(read('500ms')).toBe(500);
    expect(read('2h')).toBe(7_200_000);
    expect(read('1e3')).toBe(1000);
  });

  it('anything else throws INVALID_ENV naming the variable and its value; no default is used', () => {
    for (const bad of ['-1', '10 minutes', 'abc', '1e999', 'inf', '10x']) {
      expect(() => read(bad)).toThrow(
        expect.objectContaining({
          name: 'ProcwardenError',
          code: 'INVALID_ENV',
          message: expect.stringContaining(
            `PROCWARDEN_LIVE_IDLE_TIMEOUT_MS=${JSON.stringify(bad)} is not a duration`,
          ),
        }),
      );
    }
  });
});

describe('bad input to the pool is a clear, typed error', () => {
  const spec: RunSpec = { argv: ['true'] };

  it('pool options', () => {
    const bad = [
      { idleTimeoutMs: -1 },
      { maxDrainMs: Number.NaN },
      { maxSessions: 0 },
      { maxSessions: 1.5 },
      { closeOnRunEnd: 'yes' },
      { idleTimeout: 5 },
      { childTimeoutMs: 0 },
      { childTimeoutMs: -1 },
      { childTimeoutMs: Number.NaN },
      { runEndSettleMs: -1 },
      { runEndSettleMs: Number.POSITIVE_INFINITY },
      { runEndSettleMs: '500' },
    ];
    for (const options of bad) {
      expect(() => new LiveSessionPool(options as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      );
    }
  });

  it('acquire arguments, before anything starts', async () => {
    const pool = new LiveSessionPool({ supervisor: sup, clock: new ManualClock() });
    await expect(pool.acquire('', spec)).rejects.toMatchObject({ code: 'INVALID_OPTION' });
    await expect(pool.acquire('k', spec, { fingerprint: 7 as never })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
    await expect(pool.acquire('k', spec, { model: 'x' } as never)).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
    await expect(pool.acquire('k', spec, { childTimeoutMs: 0 })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
    await expect(pool.acquire('k', spec, { runEndSettleMs: Number.NaN })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
    await expect(pool.acquire('k', { ...spec, stdin: 'ignore' })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
    await expect(pool.acquire('k', 'true' as never)).rejects.toMatchObject({ code: 'INVALID_SPEC' });
    // @ts-expect-error: an empty argv is a type error too; JavaScript callers get INVALID_ARGV.
    await expect(pool.acquire('k', { argv: [] })).rejects.toMatchObject({ code: 'INVALID_ARGV' });
    expect(pool.size).toBe(0);
  });
});

describe('OneShot', () => {
  it('waits longer than setTimeout can (2^31 ms) and never fires for Infinity', () => {
    const clock = new ManualClock();
    let fired = 0;
    const timer = new OneShot(clock, () => fired++);
    timer.arm(30 * 86_400_000); // 30 days
    clock.advance(2 ** 31);
    expect(fired).toBe(0);
    clock.advance(30 * 86_400_000 - 2 ** 31);
    expect(fired).toBe(1);
    timer.arm(Number.POSITIVE_INFINITY);
    expect(timer.armed).toBe(false);
    expect(clock.pending).toBe(0);
  });
});

describe('LineSplitter', () => {
  it('splits per stream, across chunks, on \\n and \\r\\n, and flushes a last partial line', () => {
    const lines: string[] = [];
    const split = new LineSplitter((line, stream) => lines.push(`${stream}:${line}`));
    split.push('{"a":', 'stdout');
    split.push('warn', 'stderr');
    split.push('1}\r\n{"b":2}\n\n{"c"', 'stdout');
    split.push('ing\n', 'stderr');
    split.push(':3}', 'stdout');
    split.flush();
    expect(lines).toEqual([
      'stdout:{"a":1}',
      'stdout:{"b":2}',
      'stdout:',
      'stderr:warning',
      'stdout:{"c":3}',
    ]);
  });
});

describe('the spec fingerprint', () => {
  it('tells sessions started with different inherited descriptors apart (they can only be given at the start)', async () => {
    const { specFingerprint } = await import('../src/live/fingerprint.js');
    const argv = ['cat'] as [string];
    expect(specFingerprint({ argv })).not.toBe(specFingerprint({ argv, inheritFds: [9] }));
    expect(specFingerprint({ argv, inheritFds: [9, 5] })).toBe(specFingerprint({ argv, inheritFds: [5, 9] }));
    // The OOM score is set at the start too (review): a session started at 500 is not one asked at 0.
    expect(specFingerprint({ argv })).not.toBe(specFingerprint({ argv, oomScoreAdj: false }));
    expect(specFingerprint({ argv, oomScoreAdj: 2000 })).not.toBe(specFingerprint({ argv, oomScoreAdj: 0 }));
  });
});

describe('ExitWatch', () => {
  const info = (pid: number, startTime: string, state = 'S'): ProcessInfo => ({
    pid,
    ppid: 1,
    pgid: pid,
    sid: pid,
    startTime,
    state,
    command: 'x',
  });

  /** A process table whose rows the test sets; `get` may be made to throw. */
  function fakeTable() {
    const rows = new Map<number, ProcessInfo>();
    let failing = false;
    const table = {
      name: 'fake',
      list: async () => [...rows.values()],
      get: async (pid: number) => {
        if (failing) throw new Error('table unreadable');
        return rows.get(pid) ?? null;
      },
    } satisfies ProcessTable;
    return { rows, table, fail: (on: boolean) => (failing = on) };
  }

  const turn = () => new Promise((resolve) => setImmediate(resolve));

  it('reports a pid once its start time differs (reused) or it is a zombie or gone; once each', async () => {
    const clock = new ManualClock();
    const { rows, table } = fakeTable();
    const watch = new ExitWatch(clock, () => table, 500);
    rows.set(10, info(10, '100'));
    rows.set(11, info(11, '200'));
    rows.set(12, info(12, '300'));
    const gone: number[] = [];
    for (const pid of [10, 11, 12]) watch.watch(pid, () => gone.push(pid));
    await turn();
    clock.advance(500);
    await turn();
    expect(gone).toEqual([]);
    rows.set(10, info(10, '999')); // the number handed to another process
    rows.set(11, info(11, '200', 'Z'));
    rows.delete(12);
    clock.advance(500);
    await turn();
    expect(gone.sort()).toEqual([10, 11, 12]);
    expect(watch.size).toBe(0);
    expect(clock.pending).toBe(0); // nothing watched: no timer
    clock.advance(5000);
    await turn();
    expect(gone).toHaveLength(3);
  });

  it('a pid gone at the first read is reported without waiting for a poll; a stopped watch never is', async () => {
    const clock = new ManualClock();
    const { rows, table } = fakeTable();
    const watch = new ExitWatch(clock, () => table, 500);
    const gone: number[] = [];
    watch.watch(20, () => gone.push(20));
    rows.set(21, info(21, '1'));
    const stop = watch.watch(21, () => gone.push(21));
    await turn();
    expect(gone).toEqual([20]);
    stop();
    rows.delete(21);
    clock.advance(500);
    await turn();
    expect(gone).toEqual([20]);
    expect(clock.pending).toBe(0);
  });

  it('a table that fails to read keeps the pid watched; a callback that throws stops no poll', async () => {
    const clock = new ManualClock();
    const { rows, table, fail } = fakeTable();
    const watch = new ExitWatch(clock, () => table, 500);
    rows.set(30, info(30, '1'));
    rows.set(31, info(31, '1'));
    const gone: number[] = [];
    watch.watch(30, () => {
      gone.push(30);
      throw new Error('callback broke');
    });
    watch.watch(31, () => gone.push(31));
    await turn();
    fail(true);
    rows.delete(30);
    clock.advance(500);
    await turn();
    expect(gone).toEqual([]);
    fail(false);
    clock.advance(500);
    await turn();
    expect(gone).toEqual([30]);
    rows.delete(31);
    clock.advance(500);
    await turn();
    expect(gone).toEqual([30, 31]);
  });
});
