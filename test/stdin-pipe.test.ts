// handle.stdin in pipe mode: a Writable's backpressure, and a writer waiting for 'drain' is let go
// however the input ends (the run ends, the command closes its stdin, end() was called).
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { type RunStdin, Supervisor } from '../src/index.js';
import { LeakGuard } from './helpers/procs.js';

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

const CHUNK = Buffer.alloc(64 * 1024, 0x78);

/** Writes until write() says false; returns how many chunks were taken at once. */
function fill(stdin: RunStdin): number {
  let n = 0;
  while (stdin.write(CHUNK)) n++;
  return n;
}

/** Resolves 'drain', or 'none' if none came within `ms` (a writer left waiting). */
const drainWithin = (stdin: RunStdin, ms = 20_000) =>
  Promise.race([
    once(stdin as never, 'drain').then(() => 'drain'),
    new Promise((r) => setTimeout(() => r('none'), ms).unref()),
  ]);

describe("stdin: 'pipe'", () => {
  it("input left waiting when the run ends is dropped, and 'drain' lets its writer go on", async () => {
    const handle = sup.spawn({ argv: ['sleep', '30'], stdin: 'pipe', timeoutMs: 300 });
    leaks.track(handle.pid);
    const stdin = handle.stdin as RunStdin;
    fill(stdin);
    const drained = drainWithin(stdin);
    expect((await handle.result).reason).toBe('overall-timeout');
    expect(await drained).toBe('drain');
    expect(stdin.writable).toBe(false);
  });

  it("a command that closes its stdin and goes on: 'drain' comes, later writes are dropped", async () => {
    const handle = sup.spawn({
      argv: ['sh', '-c', 'head -c 100000 >/dev/null; exec 0<&-; sleep 0.5; echo went-on'],
      stdin: 'pipe',
    });
    leaks.track(handle.pid);
    const stdin = handle.stdin as RunStdin;
    // A producer of the usual shape: write until false, wait for 'drain', go on, for 6 MiB.
    let waits = 0;
    for (let i = 0; i < 96; i++) {
      if (stdin.write(CHUNK)) continue;
      waits++;
      expect(await drainWithin(stdin)).toBe('drain');
    }
    expect(waits).toBeGreaterThan(0);
    expect(stdin.writable).toBe(false);
    const r = await handle.result;
    expect(r.reason).toBe('exit');
    expect(r.stdout.text).toBe('went-on\n');
  });

  it("a write after end() returns false, and its 'drain' follows", async () => {
    const handle = sup.spawn({ argv: ['cat'], stdin: 'pipe' });
    leaks.track(handle.pid);
    const stdin = handle.stdin as RunStdin;
    expect(stdin.writable).toBe(true);
    expect(stdin.write('a\n')).toBe(true);
    stdin.end();
    expect(stdin.writable).toBe(false);
    const drained = drainWithin(stdin);
    expect(stdin.write('late\n')).toBe(false);
    expect(await drained).toBe('drain');
    expect((await handle.result).stdout.text).toBe('a\n');
  });

  it('bytes given as stdin are copied at spawn(): the caller may reuse its buffer at once', async () => {
    const other = new Supervisor();
    // The second run waits for the first (replaceScope), so its input is written after spawn().
    const first = other.spawn({ argv: ['sleep', '30'], scope: 'copy' });
    leaks.track(first.pid);
    const input = new Uint8Array(Buffer.from('before\n'));
    const second = other.spawn({ argv: ['cat'], stdin: input, scope: 'copy', replaceScope: true });
    input.set(Buffer.from('AFTER!\n'));
    const r = await second.result;
    leaks.track(second.pid);
    expect(r.stdout.text).toBe('before\n');
    await other.shutdown();
  });
});
