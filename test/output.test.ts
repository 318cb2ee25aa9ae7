import { readFileSync, stat } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Clock, realClock } from '../src/clock.js';
import { Supervisor } from '../src/index.js';
import { BoundedCapture } from '../src/output/index.js';
import { alive, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

describe('bounded capture', () => {
  it('keeps everything under the budget', () => {
    const c = new BoundedCapture(100);
    c.push(Buffer.from('hello '));
    c.push(Buffer.from('world'));
    expect(c.result()).toEqual({ text: 'hello world', bytes: 11, truncated: false });
  });

  it('keeps head and tail beyond it and says how much was dropped', () => {
    const c = new BoundedCapture(10);
    for (let i = 0; i < 100; i++) c.push(Buffer.from(String(i % 10)));
    const r = c.result();
    expect(r.truncated).toBe(true);
    expect(r.bytes).toBe(100);
    expect(r.text).toBe('01234\n[… 90 bytes truncated …]\n56789');
  });

  it('a huge single chunk keeps only the tail it needs', () => {
    const c = new BoundedCapture(8);
    c.push(Buffer.alloc(1_000_000, 'x'));
    c.push(Buffer.from('tail'));
    const r = c.result();
    expect(r.text).toBe('xxxx\n[… 999996 bytes truncated …]\ntail');
  });

  it('never cuts a UTF-8 character at the head or tail boundary', () => {
    const c = new BoundedCapture(9);
    c.push(Buffer.from('aaa€€€€€€bbb€')); // € is 3 bytes
    const r = c.result();
    expect(r.text).not.toContain('\uFFFD');
    expect(r.text.startsWith('aaa')).toBe(true);
    expect(r.text.endsWith('b€')).toBe(true);
  });

  it('maxBytes 0 captures nothing but still counts', () => {
    const c = new BoundedCapture(0);
    c.push(Buffer.from('abc'));
    expect(c.result()).toMatchObject({ bytes: 3, truncated: true });
  });
});

describe('bounded capture against a model that keeps every byte', () => {
  it('5000 random streams (sizes, budgets, UTF-8 cut anywhere): the same head, tail and counts', () => {
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const alphabet = Buffer.from('ab€😀\n');
    for (let round = 0; round < 5000; round++) {
      const maxBytes = rand(60);
      const c = new BoundedCapture(maxBytes);
      const all: Buffer[] = [];
      for (let n = rand(12); n > 0; n--) {
        const chunk = Buffer.alloc(rand(40));
        for (let i = 0; i < chunk.length; i++) chunk[i] = alphabet[rand(alphabet.length)] as number;
        all.push(chunk);
        c.push(chunk);
      }
      const whole = Buffer.concat(all);
      const r = c.result();
      expect(r.bytes).toBe(whole.length);
      const headMax = Math.ceil(maxBytes / 2);
      const tailMax = maxBytes - headMax;
      if (whole.length <= maxBytes) {
        expect(r).toEqual({ text: whole.toString('utf8'), bytes: whole.length, truncated: false });
        continue;
      }
      expect(r.truncated).toBe(true);
      const [head, rest] = r.text.split(/\n\[… \d+ bytes truncated …\]\n/);
      // What is shown is a prefix of the head's bytes and a suffix of the tail's, whole characters only.
      expect(
        whole
          .subarray(0, headMax)
          .toString('utf8')
          .startsWith(head as string),
      ).toBe(true);
      expect(
        whole
          .subarray(whole.length - tailMax)
          .toString('utf8')
          .endsWith(rest as string),
      ).toBe(true);
      expect(Buffer.byteLength(head as string)).toBeGreaterThanOrEqual(headMax - 3);
      expect(Buffer.byteLength(rest as string)).toBeGreaterThanOrEqual(tailMax - 3);
    }
  });
});

describe('streaming output', () => {
  it('a multibyte character split across chunks decodes whole', async () => {
    const chunks: string[] = [];
    const r = await sup.spawn({
      argv: [process.execPath, fixture('split-utf8.mjs')],
      output: {
        onData: (t) => {
          chunks.push(t);
        },
      },
    }).result;
    expect(chunks.length).toBeGreaterThan(5); // really arrived in pieces
    expect(chunks.join('')).toBe('héllo wörld €uro 😀 end\n');
    expect(r.stdout.text).toBe('héllo wörld €uro 😀 end\n');
  });

  it('invalid bytes become U+FFFD', async () => {
    const r = await sup.spawn({ argv: ['printf', 'a\\377b'] }).result;
    expect(r.stdout.text).toBe('a\uFFFDb');
  });

  it('stdout and stderr are told apart; the file sink gets every byte before result resolves', async () => {
    const dir = leaks.trackDir(makeTmp());
    const file = join(dir, 'out.log');
    const seen: string[] = [];
    const r = await sup.spawn({
      argv: ['sh', '-c', 'echo out; echo err >&2; echo more'],
      output: {
        file,
        onData: (t, s) => {
          seen.push(`${s}:${t}`);
        },
      },
    }).result;
    expect(r.stdout.text).toBe('out\nmore\n');
    expect(r.stderr.text).toBe('err\n');
    expect(seen.join('')).toContain('stderr:err');
    expect(readFileSync(file, 'utf8').split('\n').sort()).toEqual(['', 'err', 'more', 'out']);
  });

  it('a throwing onData does not crash the host nor lose the capture', async () => {
    const r = await sup.spawn({
      argv: ['echo', 'hi'],
      output: {
        onData: () => {
          throw new Error('callback bug');
        },
      },
    }).result;
    expect(r.stdout.text).toBe('hi\n');
    expect(r.tree.report).toBeNull();
  });

  it('200 MB through onData: every byte seen, capture bounded, memory flat', async () => {
    const before = process.memoryUsage().rss;
    let seen = 0;
    let peak = before;
    const r = await sup.spawn({
      argv: [process.execPath, fixture('flood.mjs'), '200'],
      output: {
        onData: (t) => {
          seen += t.length; // ASCII: one char per byte
          if ((seen & 0xffffff) < t.length) peak = Math.max(peak, process.memoryUsage().rss);
        },
      },
    }).result;
    peak = Math.max(peak, process.memoryUsage().rss);
    expect(r.reason).toBe('exit');
    expect(seen).toBe(200 * 1024 * 1024);
    expect(r.stdout.bytes).toBe(200 * 1024 * 1024);
    expect(r.stdout.truncated).toBe(true);
    expect(r.stdout.text.length).toBeLessThan(1024 * 1024 + 100);
    // Flat: far below the 200 MB that went through (loose, GC timing varies).
    expect(peak - before).toBeLessThan(128 * 1024 * 1024);
  });

  it('output written by the tree while it is being terminated is not lost', async () => {
    const dir = leaks.trackDir(makeTmp());
    const seen: string[] = [];
    const r = await sup.spawn({
      argv: [fixture('trap-cleanup.sh'), dir],
      // Time for bash to set its TERM trap first, on a loaded machine too (termination.test.ts).
      timeoutMs: 2500,
      output: {
        onData: (t) => {
          seen.push(t);
        },
      },
    }).result;
    expect(seen.join('')).toContain('cleanup done');
    expect(r.stdout.text).toContain('cleanup done');
  });
});

describe('the drain after the end (invariant 5)', () => {
  it('an escaped process that keeps writing into the pipes does not hold the result; a note says why', async () => {
    const dir = leaks.trackDir(makeTmp());
    // process-group mode: `env -i` + `setsid` leaves the group, the cookie and every session a
    // member founded, and keeps the run's stdout. It writes every 50 ms for ever.
    const h = sup.spawn({
      containment: 'process-group',
      timeoutMs: 1000,
      graceMs: 300,
      drainMs: 300,
      // It writes without pause, so the quiet window never closes: drainMaxMs cuts it.
      drainMaxMs: 600,
      argv: [fixture('escape-and-write.sh'), dir],
    });
    const escapee = await waitFor(() => readPids(dir).get('escapee'), { what: 'the escapee' });
    leaks.track(escapee);
    const started = Date.now();
    const result = await h.result;
    // Loose: it used to wait as long as the escapee wrote (for ever).
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(result.stdout.text).toContain('started');
    expect(result.notes.join('\n')).toMatch(
      /output: cut while still being written, by a process outside the run's tree .*\(drainMaxMs \(600 ms\) ran out\): \d+ bytes came through after the end/,
    );
    process.kill(escapee, 'SIGKILL');
    await waitFor(() => !alive(escapee), { what: 'the escapee gone' });
  });
});

describe('the drain after a stall of the host', () => {
  it('output that came while the host could not run is read, not dropped as pipes merely held open', async () => {
    // A clock that, once the drain's timer (the only wait of about 137 ms) is armed, stalls the
    // host for 800 ms from an I/O callback: the background job's line and the pipes' end arrive
    // meanwhile, and when the loop runs again the expired timer comes before the poll that would
    // read them.
    const DRAIN = 137;
    const stall = () => {
      const until = Date.now() + 800;
      while (Date.now() < until) {
        // the host is not scheduled
      }
    };
    const stalling: Clock = {
      ...realClock,
      setTimeout: (fn, ms) => {
        const timer = realClock.setTimeout(fn, ms);
        // The window's rest, read off the clock: a hair under DRAIN.
        if (ms > DRAIN - 20 && ms <= DRAIN) stat('/', stall);
        return timer;
      },
    };
    const stalled = new Supervisor({ clock: stalling, journal: false, watchdog: false });
    leaks.trackCookie(stalled.id);
    for (let i = 0; i < 2; i++) {
      const h = stalled.spawn({
        argv: ['sh', '-c', '(sleep 0.05; echo late) & echo early'],
        leftovers: 'keep',
        drainMs: DRAIN,
      });
      leaks.track(h.pid);
      const r = await h.result;
      expect({ attempt: i, out: r.stdout.text, notes: r.notes }).toEqual({
        attempt: i,
        out: 'early\nlate\n',
        notes: [],
      });
    }
    await stalled.shutdown();
  });
});

describe('a consumer that never catches up after a natural end', () => {
  it('is waited for until the run’s timeout, not for ever; the rest is dropped with a note', async () => {
    const h = sup.spawn({
      argv: ['sh', '-c', 'echo one; echo two'],
      timeoutMs: 1000,
      drainMs: 200,
      output: { onData: () => new Promise<void>(() => {}) },
    });
    const result = await Promise.race([
      h.result,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('result pending after 10 s')), 10_000),
      ),
    ]);
    // The command ended by itself: that is the reason; only the wait for the consumer was cut.
    expect(result.reason).toBe('exit');
    expect(result.exitCode).toBe(0);
    expect(result.notes.join('\n')).toContain('a consumer was still behind when the run’s timeout came');
  });
  it("the note comes also when the timeout's timer fires before the clock reads the deadline", async () => {
    // Timers count whole milliseconds: one for 99.7 ms can fire at 99. Here every timer fires 3 ms
    // early, and the run's timeout is still seen as come.
    const early: Clock = {
      ...realClock,
      setTimeout: (fn, ms) => realClock.setTimeout(fn, Math.max(0, ms - 3)),
    };
    const hasty = new Supervisor({ clock: early, journal: false, watchdog: false });
    leaks.trackCookie(hasty.id);
    const h = hasty.spawn({
      argv: ['sh', '-c', 'echo one; echo two'],
      timeoutMs: 1000,
      drainMs: 200,
      output: { onData: () => new Promise<void>(() => {}) },
    });
    const result = await h.result;
    expect(result.reason).toBe('exit');
    expect(result.notes.join('\n')).toContain('a consumer was still behind when the run’s timeout came');
    await hasty.shutdown();
  });
});
