import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseOptions, splitAtCommand } from '../src/cli/args.js';

const OPTIONS = {
  signal: { type: 'string', short: 's' },
  verbose: { type: 'boolean', short: 'v' },
} as const;

const direct = (args: string[]) =>
  parseArgs({ args, options: OPTIONS, strict: true, allowPositionals: true });

describe('parseOptions', () => {
  it('gives what parseArgs gives, with and without its fast path for words without a dash', () => {
    const cases = [[], ['10'], ['10', 'true'], ['a b', ''], ['-v'], ['-s', 'KILL', '5'], ['--', 'x'], ['-']];
    for (const args of cases) {
      const got = parseOptions(args, OPTIONS, 125);
      const want = direct(args);
      expect({ args, values: { ...got.values }, positionals: got.positionals }).toEqual({
        args,
        values: { ...want.values },
        positionals: want.positionals,
      });
    }
  });

  it('still reports an unknown option the way getopt does', () => {
    expect(() => parseOptions(['--frob'], OPTIONS, 125)).toThrow("unrecognized option '--frob'");
    expect(() => parseOptions(['-x'], OPTIONS, 125)).toThrow("invalid option -- 'x'");
  });

  it('timeout 10 true: nothing of ours before the command', () => {
    expect(splitAtCommand(['10', 'true'], OPTIONS)).toEqual({ ours: [], rest: ['10', 'true'] });
  });
});
