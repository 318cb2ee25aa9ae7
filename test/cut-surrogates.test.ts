import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../src/live/lines.js';
import { RunLog } from '../src/supervisor/run-log.js';

// A cut that falls between the two UTF-16 halves of an astral character (an emoji) would hand on
// a lone surrogate, which becomes U+FFFD or an encoding error wherever the text goes next.
const LONE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// Astral characters at every offset against every small limit: each cut lands on both halves.
const INPUTS = ['😀😀😀😀', 'a😀😀😀😀', 'ab😀c😀d', '😀a😀ab😀'];
const LIMITS = [1, 2, 3, 4, 5, 6, 7, 8];

describe('a cut never splits a surrogate pair', () => {
  it('RunLog keeps the tail: its front cut is on a whole character, however the output came', () => {
    for (const max of LIMITS) {
      for (const input of INPUTS) {
        // By code point, and by UTF-16 unit (a pair split between two pushes).
        for (const pieces of [[input], [...input], input.split(''), input.match(/.{1,3}/gsu) ?? []]) {
          const log = new RunLog(max);
          for (const p of pieces) log.push(p);
          const { text } = log.read();
          expect({ max, input, text, lone: LONE.test(text) }).toEqual({ max, input, text, lone: false });
          expect(text.length).toBeLessThanOrEqual(max);
          expect(input.endsWith(text)).toBe(true);
        }
      }
    }
  });

  it('a live session line cut at maxLineChars: the head kept ends on a whole character', () => {
    for (const max of LIMITS) {
      for (const input of INPUTS) {
        for (const pieces of [[input], [...input], input.split('')]) {
          const lines: [string, boolean, number][] = [];
          const split = new LineSplitter(
            (line, _s, info) => lines.push([line, info.truncated, info.length]),
            max,
          );
          for (const p of pieces) split.push(p, 'stdout');
          split.push('\n', 'stdout');
          const [line = '', truncated, length] = lines[0] ?? [];
          expect({ max, input, line, lone: LONE.test(line) }).toEqual({ max, input, line, lone: false });
          expect(line.length).toBeLessThanOrEqual(max);
          expect(input.startsWith(line)).toBe(true);
          // The length as written, and truncated whenever characters were left out.
          expect([truncated, length]).toEqual([input.length > max, input.length]);
        }
      }
    }
  });
});
