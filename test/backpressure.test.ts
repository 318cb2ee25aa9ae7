import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { ReadStream } from 'node:tty';
import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor } from '../src/index.js';
import { CLI } from './helpers/cli.js';
import { alive, cookieHolders, LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

const MiB = 1024 * 1024;

/** A promise and the function that settles it: a consumer that is behind until told otherwise. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/**
 * The process is blocked writing into a full pipe. Its kernel wait channel says so (`pipe_write`,
 * `anon_pipe_write` on 6.x); where that is hidden, the bytes it has written stop growing.
 */
function writerBlocked(pid: number, last: { wchar: number }): boolean {
  try {
    if (/pipe_write/.test(readFileSync(`/proc/${pid}/wchan`, 'utf8'))) return true;
    const wchar = Number(/wchar: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1]);
    const still = wchar === last.wchar;
    last.wchar = wchar;
    return still;
  } catch {
    return false;
  }
}

function rssOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1]) * 1024;
}

function childrenOf(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
    readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
  );
}

/** Resolves once `text` appears in what the stream has written so far. */
function whenWritten(stream: NodeJS.ReadableStream, text: string): Promise<string> {
  let seen = '';
  return new Promise((resolve) => {
    stream.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes(text)) resolve(seen);
    });
  });
}

describe('backpressure: a library consumer', () => {
  it('an onBytes promise holds the command: while it is pending nothing more is read', async () => {
    const stall = gate();
    let calls = 0;
    let bytes = 0;
    const run = sup.spawn({
      argv: ['yes'],
      output: {
        maxBytes: 0,
        onBytes: (chunk) => {
          calls++;
          bytes += chunk.length;
          // The first chunk stalls; every later one is taken at once.
          return calls === 1 ? stall.opened : undefined;
        },
      },
    });
    await waitFor(() => calls >= 1);
    // Without backpressure `yes` would push hundreds of MiB through here in this time.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(calls).toBe(1);
    stall.open();
    await waitFor(() => bytes > 4 * MiB);
    run.cancel();
    const r = await run.result;
    expect(r.reason).toBe('cancelled');
    expect(r.stdout.bytes).toBe(bytes);
  });

  it('in PTY mode too: a pending promise stops reading the terminal', async () => {
    const stall = gate();
    let calls = 0;
    const run = sup.spawn({
      argv: ['yes'],
      mode: 'pty',
      output: {
        maxBytes: 0,
        onBytes: () => {
          calls++;
          return calls === 1 ? stall.opened : undefined;
        },
      },
    });
    await waitFor(() => calls >= 1);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(calls).toBe(1);
    stall.open();
    await waitFor(() => calls > 10);
    run.cancel();
    expect((await run.result).reason).toBe('cancelled');
  });

  it('a consumer that never catches up does not keep a cancelled run from ending', async () => {
    let calls = 0;
    // seq blocks on its full pipe: when the tree is ended, output is still unread (none of it
    // would be dropped, and no note said, had the pipe been empty at the end).
    const run = sup.spawn({
      argv: ['seq', '1', '10000000'],
      drainMs: 200,
      output: {
        onBytes: () => {
          calls++;
          return new Promise<void>(() => {});
        },
      },
    });
    await waitFor(() => calls >= 1);
    // Cancelled right after the first chunk, seq may not have written any more: the pipe is then
    // empty at the end, nothing is dropped and rightly no note is said (this flaked once in CI).
    const seen = { wchar: -1 };
    await waitFor(() => writerBlocked(run.pid as number, seen), { what: 'seq blocked on its full pipe' });
    const t0 = performance.now();
    run.cancel();
    const r = await run.result;
    expect(performance.now() - t0).toBeLessThan(10_000); // loose: catches a hang only
    expect(r.reason).toBe('cancelled');
    expect(calls).toBe(1);
    expect(r.tree.report?.notes.join('\n')).toMatch(/consumer was still behind when the drain ended/);
  });

  it('a run that ends on its own gives a slow consumer everything, however short the drain window', async () => {
    const lines = 200_000;
    const expected = Array.from({ length: lines }, (_, i) => `${i + 1}\n`).join('');
    let text = '';
    const r = await sup.spawn({
      argv: ['seq', '1', String(lines)],
      drainMs: 10,
      output: {
        maxBytes: 0,
        // An async consumer slower than the drain window on every chunk.
        onData: async (t) => {
          await new Promise((resolve) => setTimeout(resolve, 20));
          text += t;
        },
      },
    }).result;
    expect(r.reason).toBe('exit');
    expect(text.length).toBe(expected.length);
    expect(text === expected).toBe(true);
  });

  it("with leftovers 'keep', a slow consumer still gets everything the command wrote (review)", async () => {
    // A script that starts a daemon and prints a report: the kept job does not hold the pipes, so
    // the rest is finite; it was cut off once the drain window closed.
    const lines = 30_000;
    let text = '';
    const handle = sup.spawn({
      argv: ['bash', '-c', `seq 1 ${lines}; sleep 30 >/dev/null 2>&1 &`],
      leftovers: 'keep',
      drainMs: 10,
      output: {
        maxBytes: 0,
        onData: async (t) => {
          await new Promise((resolve) => setTimeout(resolve, 20));
          text += t;
        },
      },
    });
    const r = await handle.result;
    expect(r.reason).toBe('exit');
    expect(r.tree.leftovers).toBe(1);
    expect(text.split('\n').length - 1).toBe(lines);
    expect(r.notes.join('\n')).not.toMatch(/dropped/);
    // The kept job, ended here.
    const kept = cookieHolders(r.id);
    expect(kept).toHaveLength(1);
    for (const pid of kept) process.kill(pid, 'SIGKILL');
    await waitFor(() => !kept.some(alive), { what: 'the kept job gone' });
  });

  it('onData and onBytes both hold the stream; a rejection is a note and reading goes on', async () => {
    let bytes = 0;
    let chars = 0;
    const r = await sup.spawn({
      argv: ['seq', '1', '50000'],
      output: {
        onBytes: async (chunk) => {
          bytes += chunk.length;
          if (bytes === chunk.length) throw new Error('first chunk refused');
        },
        onData: async (t) => {
          chars += t.length;
        },
      },
    }).result;
    expect(r.reason).toBe('exit');
    expect(bytes).toBe(r.stdout.bytes);
    expect(chars).toBe(r.stdout.bytes);
    expect(r.stdout.text.endsWith('50000\n')).toBe(true);
  });

  it('a stalled consumer is not silence: noOutputTimeoutMs does not fire while the command waits for it', async () => {
    const stall = gate();
    let calls = 0;
    const run = sup.spawn({
      argv: ['yes'],
      noOutputTimeoutMs: 300,
      output: {
        maxBytes: 0,
        onBytes: () => {
          calls++;
          return calls === 1 ? stall.opened : undefined;
        },
      },
    });
    await waitFor(() => calls >= 1);
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect(run.state).toBe('running');
    stall.open();
    run.cancel();
    expect((await run.result).reason).toBe('cancelled');
  });
});

describe('backpressure: the file sink', () => {
  it('a FIFO with no reader: the run goes on and the result says the file got nothing', async () => {
    const dir = leaks.trackDir(makeTmp());
    const fifo = join(dir, 'out.fifo');
    execFileSync('mkfifo', [fifo]);
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    // Stopped by a timeout so that the result carries a report (notes) whatever a normal exit shows.
    const r = await sup.spawn({
      argv: ['sh', '-c', 'echo hello; exec sleep 30'],
      timeoutMs: 500,
      output: { file: fifo },
    }).result;
    clearInterval(ticker);
    expect(r.reason).toBe('overall-timeout');
    expect(r.stdout.text).toBe('hello\n');
    expect(ticks).toBeGreaterThan(10);
    expect(r.tree.report?.notes.join('\n')).toMatch(/is a FIFO with no reader \(ENXIO\)/);
  });

  it('a socket (stdout under systemd or procwarden run, as /dev/stdout): said so, not a FIFO (review)', async () => {
    const dir = leaks.trackDir(makeTmp());
    const path = join(dir, 'out.sock');
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(path, resolve));
    try {
      const r = await sup.spawn({
        argv: ['sh', '-c', 'echo hello; exec sleep 30'],
        timeoutMs: 300,
        output: { file: path },
      }).result;
      expect(r.stdout.text).toBe('hello\n');
      expect(r.notes.join('\n')).toMatch(/is a socket, which cannot be opened as a file \(ENXIO\)/);
    } finally {
      server.close();
    }
  });

  it('a terminal whose reader is slow gets every byte (review)', async () => {
    // A terminal pair from node-pty's binding; the master is read slowly, so the terminal's buffer
    // fills: the file, opened O_NONBLOCK, answered EAGAIN, and the sink gave up after 15 KB.
    const binding = createRequire(import.meta.url)('@lydell/node-pty/requireBinary.js').requireBinary(
      'pty.node',
    ) as { open(cols: number, rows: number): { master: number; slave: number; pty: string } };
    const pair = binding.open(80, 24);
    const total = 2_000_000;
    let got = 0;
    const reader = new ReadStream(pair.master);
    reader.on('data', (chunk) => {
      got += chunk.length;
      reader.pause();
      setTimeout(() => reader.resume(), 5);
    });
    reader.on('error', () => {});
    try {
      const r = await sup.spawn({
        argv: ['sh', '-c', `head -c ${total} /dev/zero | tr '\\0' x`],
        output: { file: pair.pty, maxBytes: 0 },
      }).result;
      expect(r.reason).toBe('exit');
      expect(r.notes).toEqual([]);
      await waitFor(() => got >= total, { what: 'every byte through the terminal', timeoutMs: 20_000 });
      expect(got).toBe(total);
    } finally {
      reader.destroy();
      closeSync(pair.slave);
    }
  });

  it('a regular file gets every byte before result resolves, and no note', async () => {
    const dir = leaks.trackDir(makeTmp());
    const file = join(dir, 'out.log');
    // The background sleeper is a leftover: ending it gives the result a report (notes).
    const r = await sup.spawn({ argv: ['sh', '-c', 'seq 1 100000; sleep 30 & exit 0'], output: { file } })
      .result;
    expect(r.tree.leftovers).toBe(1);
    expect(readFileSync(file).length).toBe(r.stdout.bytes);
    expect(r.stdout.bytes).toBe(588_895);
    expect((r.tree.report?.notes ?? []).filter((n) => n.startsWith('output'))).toEqual([]);
  });

  it('a FIFO whose reader never reads: the loop keeps running and the timeout fires on time', async () => {
    const dir = leaks.trackDir(makeTmp());
    const fifo = join(dir, 'out.fifo');
    execFileSync('mkfifo', [fifo]);
    // Holds the FIFO open for reading (O_RDWR does not wait for a writer) and never reads it.
    const reader: ChildProcess = spawn('sh', ['-c', 'exec 3<>"$1"; echo ready; exec sleep 60', 'sh', fifo], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    leaks.track(reader.pid);
    try {
      await whenWritten(reader.stdout as NodeJS.ReadableStream, 'ready');
      let lastTick = performance.now();
      let worstGap = 0;
      const ticker = setInterval(() => {
        const now = performance.now();
        worstGap = Math.max(worstGap, now - lastTick);
        lastTick = now;
      }, 10);
      const t0 = performance.now();
      const r = await sup.spawn({ argv: ['yes'], timeoutMs: 1000, drainMs: 200, output: { file: fifo } })
        .result;
      const took = performance.now() - t0;
      clearInterval(ticker);
      expect(r.reason).toBe('overall-timeout');
      // Loose: synchronous writes made this 12 s; a loaded machine may add a few.
      expect(took).toBeLessThan(6000);
      expect(worstGap).toBeLessThan(1000);
      expect(r.tree.report?.notes.join('\n')).toMatch(
        /output\.file .*not finished writing within the drain window/,
      );
    } finally {
      const gone = new Promise((resolve) => reader.once('exit', resolve));
      reader.kill('SIGKILL');
      await gone;
    }
  });
});

describe('backpressure: procwarden run behind a stalled reader', () => {
  it('`procwarden run -- yes` into a reader that stalls: RSS stays flat', async () => {
    const cli = spawn(process.execPath, [CLI, 'run', '--', 'yes'], { stdio: ['ignore', 'pipe', 'pipe'] });
    leaks.track(cli.pid);
    const pid = cli.pid as number;
    cli.stdout.pause();
    try {
      const [yes] = await waitFor(() => {
        const kids = childrenOf(pid);
        return kids.length > 0 ? kids : undefined;
      });
      leaks.track(yes);
      const idle = rssOf(pid);
      // The stall itself is the scenario: before, RSS grew by about 110 MiB/s here.
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const grown = rssOf(pid) - idle;
      expect(grown).toBeLessThan(64 * MiB);
    } finally {
      const exited = new Promise((resolve) => cli.once('exit', resolve));
      cli.kill('SIGTERM');
      cli.stdout.resume();
      await exited;
    }
  });

  it('a timed-out run delivers only what a blocked pipe would, not all it could have buffered', async () => {
    const cli = spawn(
      process.execPath,
      [CLI, 'run', '--timeout', '1', '--', 'sh', '-c', 'seq 1 3000000; sleep 10'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    leaks.track(cli.pid);
    cli.stdout.pause();
    // The reader stalls until procwarden has stopped the command and said so.
    await whenWritten(cli.stderr, 'timed out');
    let text = '';
    cli.stdout.setEncoding('utf8');
    cli.stdout.on('data', (t: string) => {
      text += t;
    });
    cli.stdout.resume();
    const status = await new Promise((resolve) => cli.once('close', resolve));
    expect(status).toBe(124);
    const lines = text.split('\n').filter(Boolean);
    // timeout(1) lets about 12,800 through here; buffering everything gave all 3,000,000.
    expect(lines.length).toBeGreaterThan(1000);
    expect(lines.length).toBeLessThan(500_000);
    // In order, from the first line; the last one may be cut where the pipe was when seq died.
    expect(lines.slice(0, 3)).toEqual(['1', '2', '3']);
    expect(String(lines.length).startsWith(lines.at(-1) ?? '-')).toBe(true);
  });
});
