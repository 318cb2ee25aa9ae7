import { afterEach, describe, expect, it } from 'vitest';
import { type RunHandle, Supervisor } from '../src/index.js';
import { fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

// Issue 14: the exit status of a PTY run is the program's own, and output written to the terminal
// after the direct child exited still arrives (bounded by drainMs), as in child mode.

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

function started(handle: RunHandle): RunHandle {
  leaks.track(handle.pid);
  return handle;
}

describe('exit status on a terminal', () => {
  it('a program that closes its terminal before it exits is not hung up: exit 0, not SIGHUP', async () => {
    // The mechanism of the misreport, made deterministic: with nothing else holding the slave, the
    // master reads EOF 300 ms before the exit; a launcher that closes the master then hangs the
    // session leader up (raw node-pty reports signal 1 here every time).
    const r = await started(
      sup.spawn({ argv: ['sh', '-c', 'exec 0<&- 1>&- 2>&-; sleep 0.3; exit 7'], mode: 'pty' }),
    ).result;
    expect([r.reason, r.exitCode, r.exitSignal]).toEqual(['exit', 7, null]);
  });

  it('cat ended with Ctrl-D exits 0, every time (20 runs; bench/pty-exit-status.mjs runs 500)', async () => {
    const wrong: string[] = [];
    for (let i = 0; i < 20; i++) {
      let seen = '';
      const handle = started(
        sup.spawn({
          argv: ['cat'],
          mode: 'pty',
          stdin: 'pipe',
          output: {
            onData: (text) => {
              seen += text;
            },
          },
        }),
      );
      handle.stdin?.write('hello\n');
      // Typed echo plus cat's copy: cat has read the line and is waiting for more.
      await waitFor(() => seen.split('hello').length > 2, { what: 'cat echoing the line' });
      handle.stdin?.end();
      const r = await handle.result;
      if (r.reason !== 'exit' || r.exitCode !== 0) wrong.push(`${r.reason} ${r.exitCode} ${r.exitSignal}`);
    }
    expect(wrong).toEqual([]);
  });
});

describe('late output on a terminal', () => {
  it('a leftover writing 64 KiB 100 ms and 300 ms after the shell exited: every byte arrives', async () => {
    const dir = leaks.trackDir(makeTmp());
    let text = '';
    const handle = started(
      sup.spawn({
        argv: [fixture('pty-late-output.sh'), dir],
        mode: 'pty',
        leftovers: 'keep',
        // The drain ends when the job closes the terminal: a wide bound costs nothing, and a
        // loaded machine may take a second to start the job's processes and write.
        drainMs: 30_000,
        output: {
          onData: (chunk) => {
            text += chunk;
          },
        },
      }),
    );
    await waitFor(() => readPids(dir).has('job'), { what: 'job.pid' });
    const job = readPids(dir).get('job') as number;
    leaks.track(job);
    const r = await handle.result;
    expect([r.reason, r.exitCode]).toEqual(['exit', 0]);
    expect(r.tree.leftovers).toBeGreaterThanOrEqual(1);
    const count = (c: string) => text.split(c).length - 1;
    expect({ x: count('x'), y: count('y') }).toEqual({ x: 65536, y: 65536 });
    expect(r.stdout.bytes).toBeGreaterThanOrEqual(2 * 65536);
  });
});
