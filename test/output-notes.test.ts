// Issue 20 item 8: every sink or callback failure is in the result after any ending, not only
// after a termination (whose report used to be the only place notes appeared).
import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor } from '../src/index.js';
import { LeakGuard } from './helpers/procs.js';

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

const hello = { argv: ['sh', '-c', 'echo hello; echo world >&2'] } as const;

describe('sink and callback failures after a normal exit', () => {
  it('a file sink that fails after the start (/dev/full) is in result.notes', async () => {
    const result = await sup.spawn({ ...hello, argv: [...hello.argv], output: { file: '/dev/full' } }).result;
    expect(result.reason).toBe('exit');
    expect(result.tree.report).toBeNull();
    expect(result.notes).toEqual([expect.stringMatching(/^output\.file .*write failed \(ENOSPC\)/)]);
    expect(result.stdout.text).toBe('hello\n'); // the capture is not affected
  });

  it('a throwing onData and onBytes are in result.notes; the capture is whole', async () => {
    const result = await sup.spawn({
      argv: [...hello.argv],
      output: {
        onData: () => {
          throw new Error('onData broke');
        },
        onBytes: () => {
          throw new Error('onBytes broke');
        },
      },
    }).result;
    expect(result.reason).toBe('exit');
    expect(result.exitCode).toBe(0);
    // Called once per stream, each call threw: one note each, with the count.
    expect([...result.notes].sort()).toEqual([
      'output.onBytes threw: onBytes broke (2 times)',
      'output.onData threw: onData broke (2 times)',
    ]);
    expect(result.stdout.text).toBe('hello\n');
    expect(result.stderr.text).toBe('world\n');
  });

  it('a callback that throws on every chunk is one note with a count, and other failures keep theirs', async () => {
    let calls = 0;
    const result = await sup.spawn({
      argv: ['sh', '-c', 'for i in 1 2 3 4 5 6; do echo $i; sleep 0.05; done'],
      output: {
        onData: () => {
          calls++;
          throw new Error(calls === 3 ? 'a different fault' : 'the usual fault');
        },
      },
    }).result;
    // However the lines were chunked, the third call was the different one.
    expect(calls).toBeGreaterThanOrEqual(3);
    expect(result.notes).toEqual([
      `output.onData threw: the usual fault (${calls - 1} times)`,
      'output.onData threw: a different fault',
    ]);
  });

  it('a clean run has no notes', async () => {
    expect((await sup.spawn({ argv: ['true'] }).result).notes).toEqual([]);
  });
});
