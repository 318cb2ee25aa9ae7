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
    expect(result.notes).toContain('output.onData threw: onData broke');
    expect(result.notes).toContain('output.onBytes threw: onBytes broke');
    expect(result.stdout.text).toBe('hello\n');
    expect(result.stderr.text).toBe('world\n');
  });

  it('a clean run has no notes', async () => {
    expect((await sup.spawn({ argv: ['true'] }).result).notes).toEqual([]);
  });
});
