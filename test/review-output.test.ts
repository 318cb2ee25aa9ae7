import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor } from '../src/index.js';
import { OutputCollector } from '../src/output/index.js';
import { RunLog } from '../src/supervisor/run-log.js';
import type { StreamName } from '../src/types.js';
import { fixture, LeakGuard, makeTmp } from './helpers/procs.js';
import { ptySkipReason } from './helpers/pty.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** What onData gets for chunks in the order they came: one decoder per stream, flushed at the end. */
function decodeAsOnData(chunks: [StreamName, Buffer][]): string {
  const decoders = new Map<StreamName, StringDecoder>();
  let text = '';
  for (const [stream, chunk] of chunks) {
    const d = decoders.get(stream) ?? new StringDecoder('utf8');
    decoders.set(stream, d);
    text += d.write(chunk);
  }
  for (const d of decoders.values()) text += d.end();
  return text;
}

describe('Supervisor.read against what onData gets, chunk for chunk, in one real run', () => {
  const ptySkip = ptySkipReason();
  const logSizes = [1 << 22, 0, 1, 2, 3, 7, 1000, 5000];
  for (const mode of ['child', 'pty'] as const) {
    for (const withOnData of [false, true]) {
      it.skipIf(mode === 'pty' && ptySkip !== null)(
        `${mode}, ${withOnData ? 'with' : 'without'} onData: the same text, U+FFFD, order, cursors and dropped counts`,
        async () => {
          for (const [i, logChars] of logSizes.entries()) {
            const sup = new Supervisor({ logChars, journal: false, watchdog: false });
            leaks.trackCookie(sup.id);
            const chunks: [StreamName, Buffer][] = [];
            let fromOnData = '';
            const polls: { since: number; text: string; cursor: number; dropped: number }[] = [];
            const h = sup.spawn({
              argv: [process.execPath, fixture('mixed-bytes.mjs'), String(i + 1)],
              mode,
              output: {
                onBytes: (chunk, stream) => {
                  chunks.push([stream, Buffer.from(chunk)]);
                },
                ...(withOnData
                  ? {
                      onData: (text: string) => {
                        fromOnData += text;
                      },
                    }
                  : {}),
              },
            });
            leaks.track(h.pid);
            // Polling while it runs: each piece is the text between two cursors, less what was dropped.
            let cursor = 0;
            const poll = () => {
              const r = sup.read(h.id, { since: cursor });
              polls.push({ since: cursor, text: r.text, cursor: r.cursor, dropped: r.dropped });
              cursor = r.cursor;
            };
            const timer = setInterval(poll, 2);
            await h.result;
            clearInterval(timer);
            poll();
            const expected = decodeAsOnData(chunks);
            if (withOnData) expect(fromOnData).toBe(expected);
            const all = sup.read(h.id);
            expect(all.cursor).toBe(expected.length);
            let kept = Math.min(logChars, expected.length);
            const cut = expected.length - kept;
            if (kept > 0 && isLow(expected.charCodeAt(cut))) kept--;
            expect(all.text).toBe(expected.slice(expected.length - kept));
            expect(all.dropped).toBe(expected.length - kept);
            for (const p of polls) {
              expect(p.text).toBe(expected.slice(p.since + p.dropped, p.cursor));
            }
            expect(polls.reduce((n, p) => n + p.text.length + p.dropped, 0)).toBe(expected.length);
            await sup.shutdown();
          }
        },
      );
    }
  }
});

const isLow = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/** A real collection: V8's gc, made callable at run time (vitest's forks do not pass --expose-gc). */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

function settledMemory(gc: () => void): NodeJS.MemoryUsage {
  gc();
  gc();
  return process.memoryUsage();
}

const MiB = 1024 * 1024;

describe('what the log of an exited run holds on to', () => {
  it('ASCII chunks that are views into a larger store (the last reads of a PTY) do not keep the store', () => {
    // pty-unix.ts reads the terminal's tail into Buffer.alloc(65536) and hands on subarray(0, n):
    // n is at most a terminal read (4095 bytes). 200 such runs of 3 tail chunks each.
    const gc = collector();
    const logs: RunLog[] = [];
    const before = settledMemory(gc).arrayBuffers;
    for (let run = 0; run < 200; run++) {
      const log = new RunLog(65536);
      const out = new OutputCollector({ maxBytes: 0, onData: undefined, file: undefined, log });
      for (let i = 0; i < 3; i++) out.push('pty', Buffer.alloc(65536, 0x61 + i).subarray(0, 4095));
      out.finish();
      out.dispose();
      logs.push(log);
    }
    const held = settledMemory(gc).arrayBuffers - before;
    // The text is 200 × 3 × 4095 bytes (2.3 MiB) at most; the stores were 37.5 MiB.
    expect(held).toBeLessThan(5 * MiB);
    expect(logs[199]?.read().text).toBe('a'.repeat(4095) + 'b'.repeat(4095) + 'c'.repeat(4095));
  });

  for (const [what, char] of [
    ['ASCII', 'a'],
    ['non-ASCII', '€'],
  ] as const) {
    it(`a small log (logChars 100) of a run whose last chunk was large keeps 100 characters, not the chunk (${what})`, async () => {
      const gc = collector();
      const dir = leaks.trackDir(makeTmp());
      // 48 KiB in one write: one pipe chunk, of which the log keeps the last 100 characters.
      const file = join(dir, 'out');
      writeFileSync(file, char.repeat(49152 / Buffer.byteLength(char)));
      // What 80 exited runs hold with a log of 100 characters, less what they hold without one.
      const held = async (logChars: number) => {
        const sup = new Supervisor({ logChars, journal: false, watchdog: false });
        leaks.trackCookie(sup.id);
        const spawn = () => sup.spawn({ argv: ['cat', file], output: { maxBytes: 0 } });
        for (let i = 0; i < 5; i++) await spawn().result;
        const before = settledMemory(gc);
        // Eight at a time: what is held after they exited is the same, and the wait is an eighth.
        for (let i = 0; i < 80; i += 8) {
          const results = await Promise.all(Array.from({ length: 8 }, () => spawn().result));
          for (const r of results) expect(r.stdout.bytes).toBe(49152);
        }
        const after = settledMemory(gc);
        const last = sup.list({ state: 'exited' }).at(-1)?.id as string;
        expect(sup.read(last).text).toBe(char.repeat(Math.min(logChars, 49152 / Buffer.byteLength(char))));
        await sup.shutdown();
        return after.arrayBuffers - before.arrayBuffers + (after.heapUsed - before.heapUsed);
      };
      const withLog = await held(100);
      const without = await held(0);
      // A chunk kept whole is 48 KiB (as bytes) or 32 KiB (as text): 3.75 or 2.5 MiB for 80 runs;
      // 80 logs of 100 characters are 8 KB; the rest is the heap's noise (up to 0.5 MiB seen).
      expect(withLog - without).toBeLessThan(1.5 * MiB);
    });
  }
});

describe('a log larger than one string can hold', () => {
  it('logChars above 256 Mi characters is refused: read() could not return it as one string', () => {
    expect(() => new Supervisor({ logChars: 2 ** 29, journal: false })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringMatching(/^logChars: /) }),
    );
    expect(() => new Supervisor({ logChars: 256 * 1024 * 1024, journal: false })).not.toThrow();
  });
});

describe('RunLog.settle and views of larger stores change no text', () => {
  it('2000 random mixes: settled at random, read at random, against a log fed text only', () => {
    let s = 11;
    const next = (n: number) => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return s % n;
    };
    const alphabet = ['a', '\n', 'é', '€', '😀', '\ufffd'];
    for (let round = 0; round < 2000; round++) {
      const max = [0, 1, 2, 5, 64, 1000, 5000][next(7)] as number;
      const log = new RunLog(max);
      const model = new RunLog(max);
      const cursors: number[] = [];
      for (let push = next(12); push > 0; push--) {
        const size = [1, 3, 1023, 1024, 1500, 4095][next(6)] as number;
        if (next(2) === 0) {
          // Sometimes a view into a larger store, as the terminal's last reads are.
          const store = Buffer.alloc(size + ([0, 10, 60000][next(3)] as number), 0x61 + next(26));
          const ascii = store.subarray(store.length - size);
          log.pushAscii(ascii);
          model.push(ascii.toString('latin1'));
        } else {
          let text = '';
          for (let i = 0; i < Math.min(size, 40); i++) text += alphabet[next(alphabet.length)];
          log.push(text);
          model.push(text);
        }
        if (next(3) === 0) log.settle();
        if (next(4) === 0) cursors.push(log.read(next(2000)).cursor);
      }
      log.settle();
      expect(log.chars).toBe(model.chars);
      for (const since of [0, ...cursors, (cursors[0] ?? 1) - 1])
        expect(log.read(since)).toEqual(model.read(since));
    }
  });
});
