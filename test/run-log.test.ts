import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor } from '../src/index.js';
import { OutputCollector, type TextLog } from '../src/output/index.js';
import { RunLog } from '../src/supervisor/run-log.js';
import { LeakGuard } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** A small deterministic generator, so that a failure can be replayed. */
function random(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

describe('RunLog: ASCII kept as bytes reads as the same text', () => {
  it('3000 random mixes of text and ASCII bytes, small and large, against a log fed text only', () => {
    const next = random(7);
    const alphabet = ['a', 'Z', '\n', ' ', 'é', '€', '😀'];
    for (let round = 0; round < 3000; round++) {
      const max = [0, 1, 2, 5, 64, 1000, 5000][next(7)] as number;
      const bytesLog = new RunLog(max);
      const textLog = new RunLog(max);
      const cursors: number[] = [];
      for (let push = next(12); push > 0; push--) {
        const size = [0, 1, 3, 900, 1023, 1024, 1500, 4000][next(8)] as number;
        if (next(2) === 0) {
          const ascii = Buffer.alloc(size, 0x61 + next(26));
          bytesLog.pushAscii(ascii);
          textLog.push(ascii.toString('latin1'));
        } else {
          let text = '';
          for (let i = 0; i < Math.min(size, 40); i++) text += alphabet[next(alphabet.length)];
          bytesLog.push(text);
          textLog.push(text);
        }
        cursors.push(textLog.read().cursor);
      }
      expect(bytesLog.chars).toBe(textLog.chars);
      for (const since of [0, ...cursors, cursors[0] ? cursors[0] - 1 : 0]) {
        expect(bytesLog.read(since)).toEqual(textLog.read(since));
      }
    }
  });

  it('a cut of a text chunk by an ASCII push never leaves half a surrogate pair in front', () => {
    const log = new RunLog(4);
    log.push('😀😀');
    log.pushAscii(Buffer.from('ab'));
    log.pushAscii(Buffer.from('c'));
    // 'ab' cut the first pair off whole; 'c' would cut the second in half: it goes whole.
    expect(log.read().text).toBe('abc');
  });
});

/** A log that says what it was given, to see what was decoded. */
function recordingLog() {
  const got: string[] = [];
  const log: TextLog = {
    push: (text) => got.push(`text:${text}`),
    pushAscii: (bytes) => got.push(`ascii:${bytes.toString('latin1')}`),
  };
  return { got, log };
}

describe('the collector decodes only what somebody takes as text', () => {
  it('without onData, a stream that has been ASCII so far goes to the log undecoded', () => {
    const { got, log } = recordingLog();
    const collector = new OutputCollector({ maxBytes: 1024, onData: undefined, file: undefined, log });
    collector.push('stdout', Buffer.from('plain '));
    collector.push('stderr', Buffer.from('err '));
    // A character split between two chunks: from then on stdout is decoded (and joined whole).
    collector.push('stdout', Buffer.from([0x63, 0x61, 0x66, 0xc3]));
    collector.push('stdout', Buffer.from([0xa9, 0x20, 0x6f, 0x6b]));
    collector.push('stdout', Buffer.from('more'));
    collector.push('stderr', Buffer.from('still ascii'));
    collector.finish();
    expect(got).toEqual([
      'ascii:plain ',
      'ascii:err ',
      'text:caf',
      'text:é ok',
      'text:more',
      'ascii:still ascii',
    ]);
    expect(collector.result('stdout').text).toBe('plain café okmore');
  });

  it('with onData, every chunk is decoded once, for onData and the log alike', () => {
    const { got, log } = recordingLog();
    const seen: string[] = [];
    const collector = new OutputCollector({
      maxBytes: 1024,
      onData: (text) => {
        seen.push(text);
      },
      file: undefined,
      log,
    });
    collector.push('stdout', Buffer.from('abc'));
    collector.push('stdout', Buffer.from([0xe2, 0x82]));
    collector.push('stdout', Buffer.from([0xac]));
    collector.finish();
    expect(got).toEqual(['text:abc', 'text:€']);
    expect(seen).toEqual(['abc', '€']);
  });

  it('an incomplete character at the end is flushed to the log as U+FFFD, as onData gets it', () => {
    const { got, log } = recordingLog();
    const collector = new OutputCollector({ maxBytes: 1024, onData: undefined, file: undefined, log });
    collector.push('stdout', Buffer.from('x'));
    collector.push('stdout', Buffer.from([0xf0, 0x9f]));
    collector.finish();
    expect(got).toEqual(['ascii:x', 'text:\ufffd']);
  });
});

describe('Supervisor.read of a run nobody takes text from', () => {
  const sup = new Supervisor({ logChars: 1 << 20, journal: false });
  leaks.trackCookie(sup.id);

  // Large ASCII runs (kept as bytes), a character split across two writes, invalid bytes, both streams.
  const script = [
    "head -c 200000 /dev/zero | tr '\\0' a",
    "printf 'caf\\303'",
    'sleep 0.05',
    "printf '\\251 \\342\\202\\254 \\360\\237\\230\\200 \\377 '",
    "printf 'to stderr\\n' >&2",
    "head -c 100000 /dev/zero | tr '\\0' b",
  ].join('; ');
  const expected = `${'a'.repeat(200000)}café € 😀 \ufffd ${'b'.repeat(100000)}`;

  for (const output of [{}, { onBytes: () => {} }, { onData: () => {} }]) {
    it(`reads what onData would have had, with output options ${JSON.stringify(Object.keys(output))}`, async () => {
      const h = sup.spawn({ argv: ['sh', '-c', script], output });
      leaks.track(h.pid);
      const r = await h.result;
      // U+FFFD stands for one byte (0xff) of the output.
      expect(r.stdout.bytes).toBe(Buffer.byteLength(expected) - 2);
      const read = sup.read(h.id);
      // stderr's line lands somewhere between stdout's chunks: the log is in arrival order.
      expect(read.text.replace('to stderr\n', '')).toBe(expected);
      expect(read.text).toContain('to stderr\n');
      expect(read.cursor).toBe(expected.length + 'to stderr\n'.length);
      expect(read.dropped).toBe(0);
    });
  }
});
