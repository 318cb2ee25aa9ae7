import { describe, expect, it } from 'vitest';
import { timeoutDurationMs } from '../src/cli/timeout-duration.js';

// What coreutils 9.x timeout(1) accepts (strtod, then one unit) and what it rejects: the table was
// checked against /usr/bin/timeout (exit 0 or 125 for `timeout D true`).
describe('timeout DURATION, read as strtod reads it', () => {
  it.each([
    ['10', 10_000],
    ['.5', 500],
    ['5.', 5000],
    ['1.e1', 10_000],
    ['1E1', 10_000],
    ['1.5e1', 15_000],
    ['+.5', 500],
    [' 1', 1000],
    ['\t\n1', 1000],
    ['1.5m', 90_000],
    ['1h', 3_600_000],
    ['2d', 172_800_000],
    ['250ms', 250],
    ['0x10', 16_000],
    ['0x.8', 500],
    ['0x1P1', 2000],
    ['0X1p+1d', 172_800_000],
    ['0x1p-3', 125],
    ['0x1d', 29_000],
    ['0x0.0000001', 1000 * 2 ** -28],
    [`0x1${'0'.repeat(999)}p-4000`, 62.5],
    ['0', 0],
    ['0x0', 0],
    ['0x0p1024', 0],
    // Negative zero is zero, as coreutils reads it (`timeout -- -0 cmd`: no limit).
    ['-0', 0],
    ['-0.0s', 0],
    ['-0x0', 0],
  ])('%j is %d ms', (text, ms) => {
    expect(timeoutDurationMs(text)).toBeCloseTo(ms, 6);
  });

  it.each([
    'inf',
    'INF',
    'Infinity',
    'infs',
    'infinityd',
    '1e400',
    '1.18973149535723176502e+4932',
    '0x1p99999',
  ])('%j means no limit (Infinity)', (text) => {
    expect(timeoutDurationMs(text)).toBe(Number.POSITIVE_INFINITY);
  });

  it.each(['1e-10000', '0x1p-100000'])('%j underflows and rounds up to 1 ms', (text) => {
    expect(timeoutDurationMs(text)).toBe(1);
  });

  it('a hexadecimal value that is a double is not lost to an underflowing scale', () => {
    expect(timeoutDurationMs('0x8000000000000000p-1100s')).toBeGreaterThan(0);
    expect(timeoutDurationMs('0x8000000000000000p-1100s')).toBeLessThan(1e-300);
  });

  it.each([
    '',
    'invalid',
    '42D',
    '1S',
    '1 ',
    '1s ',
    '1e',
    '1e+',
    '0x',
    '0xg',
    '-1',
    '-1e-400',
    '-inf',
    '1.5.5',
    '1d1',
    'nan',
    '1,5',
    '.s',
    '1ss',
    '+ 1',
    '++1',
  ])('%j is not a duration', (text) => {
    expect(timeoutDurationMs(text)).toBeNull();
  });
});
