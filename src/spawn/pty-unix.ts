import { closeSync, constants, openSync, readSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { LaunchPlan } from '../containment/index.js';
import { tty } from '../lazy-builtins.js';
import { signalName } from '../options/index.js';
import { terminalReader } from '../tree/index.js';
import type { PtyOptions } from '../types.js';
import { closingFirst } from './pty-closer.js';
import { holdMaster, openMasters } from './pty-masters.js';
import { PTY_PACKAGE, type UnixPtyBinding } from './pty-module.js';
import type { PtyCallbacks, PtyTerminal } from './pty-terminal.js';

/**
 * A Unix pseudo-terminal driven by procwarden itself, over node-pty's native fork only.
 *
 * Why not node-pty's UnixTerminal: it reads the master through a tty.ReadStream that closes the
 * master on end-of-file (EIO once every slave descriptor is closed), and it closes the master
 * anyway 200 ms after its waitpid thread reports the exit. Both are wrong for a supervisor:
 * - A program such as `cat` closes its terminal descriptors a moment before it exits. The master
 *   then reads EOF, node closes it, and closing a master hangs the terminal up: the kernel sends
 *   SIGHUP to the session, whose leader (the command) is still alive, so it dies of SIGHUP instead
 *   of exiting 0 (about 1 run in 7 here).
 * - Output that leftovers write after the 200 ms is lost, whatever drainMs says.
 *
 * Here procwarden opens the slave side itself (O_NOCTTY: it never becomes our controlling
 * terminal) before it returns to the event loop, so before the master can be read at all, and
 * keeps that descriptor until the waitpid thread has collected the command's exit status. While it
 * is open the master cannot read EOF, so nothing closes the master, so the terminal cannot be hung
 * up before the status is fixed: the race is gone by construction, not made unlikely. Then the
 * descriptor is closed and the master is read until every other holder closed the slave (the
 * output is complete) or the run releases it after drainMs; only then is the master closed.
 */
export function openUnixTerminal(
  binding: UnixPtyBinding,
  plan: LaunchPlan,
  size: Required<PtyOptions>,
  on: PtyCallbacks,
): PtyTerminal {
  const cwd = plan.cwd ?? process.cwd();
  // forkpty's child inherits every open master (node-pty sets no FD_CLOEXEC): the command must not
  // start with another run's terminal in its hands.
  // As node-pty sets them: the terminal type, and PWD for shells that trust it. Set before the
  // closing shell is planned, which gives the command exactly this environment.
  const full = { ...plan, env: { ...plan.env, PWD: cwd, TERM: size.term } };
  const others = openMasters();
  const started = others.length > 0 ? (closingFirst(full, others) ?? full) : full;
  const env = Object.entries(started.env).map(([k, v]) => `${k}=${v}`);
  let hold: number | undefined;
  let opened = false;
  const letGo = () => {
    if (hold === undefined) return;
    closeSync(hold);
    hold = undefined;
  };
  const forked = binding.fork(
    started.file,
    started.args,
    env,
    cwd,
    size.cols,
    size.rows,
    -1,
    -1,
    false,
    helperPath(),
    (code, signal) => {
      // The thread's waitpid() returned: the status is final, a hang-up can no longer change it.
      if (!opened) return;
      on.exit(signal ? null : code, signal ? (signalName(signal) ?? null) : null);
      letGo();
    },
  );
  try {
    hold = openSync(forked.pty, constants.O_RDWR | constants.O_NOCTTY);
  } catch (error) {
    // (EMFILE) Without the hold the exit status would be a guess: no run rather than a wrong one.
    // The pid is still ours: the waitpid thread has not reaped it.
    process.kill(forked.pid, 'SIGKILL');
    closeSync(forked.fd);
    throw error;
  }
  opened = true;

  const master = new (tty().ReadStream)(forked.fd);
  // Until it is destroyed (its fd closed right after), no spawn of ours may hand it on.
  master.once(
    'close',
    holdMaster(forked.fd, () => !master.destroyed),
  );
  const outputDone = new Promise<void>((resolve) => master.once('close', () => resolve()));
  const resume = () => {
    if (!master.destroyed) master.resume();
  };
  master.on('data', (chunk: Buffer) => {
    const behind = on.data(chunk);
    if (!behind) return;
    master.pause();
    behind.then(resume, resume);
  });
  // libuv takes POLLHUP after a short read as EOF while the master can still hold the tail of the
  // output (tens of kilobytes of a fast writer): read what is left before the stream closes it.
  master.on('end', () => {
    for (const chunk of readUntilClosed(forked.fd)) on.data(chunk);
  });
  // EIO is how a drained master says every slave descriptor is closed; nothing else is ours to raise.
  master.on('error', () => {});
  // The master closes itself when the output ends, possibly long before release(): its number may
  // then be another file's, so nothing is written once the stream is destroyed.
  const input = new MasterInput(
    forked.fd,
    () => !master.destroyed,
    () => on.drained(),
  );
  master.once('close', () => input.stop());

  return {
    pid: forked.pid,
    outputDone,
    write(data) {
      if (!master.destroyed) input.write(typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
      return input.queued;
    },
    resize(cols, rows) {
      if (master.destroyed) return;
      try {
        binding.resize(forked.fd, cols, rows);
      } catch {
        // The terminal closed under us: a size no one will read is not an error.
      }
    },
    reader: () => terminalReader(forked.pid, forked.pty),
    release() {
      input.stop();
      master.destroy();
      letGo();
    },
  };
}

/** The longest wait between two tries of a write the terminal refused for now. */
const MAX_RETRY_MS = 50;

/**
 * Keystrokes into the master, in order, never blocking this thread. libuv writes to a PTY master
 * in "blocking" mode (it cannot reopen a master as it reopens other terminals), and node-pty's
 * master is non-blocking: while the program does not read (a full-screen program busy, raw mode),
 * the terminal's input queue is full and libuv retried the refused write in a loop, the whole
 * event loop stuck in it (timeouts never fired; a program that exited without reading hung the
 * host for good). Here a refused write (EAGAIN) is tried again on a timer, backing off to
 * MAX_RETRY_MS. What waits is counted (`queued`), so that the writer above can hold back, and
 * `drained` says when it may go on.
 */
class MasterInput {
  private readonly queue: Buffer[] = [];
  /** Bytes in `queue`. */
  queued = 0;
  private timer: NodeJS.Timeout | undefined;
  private delay = 1;
  private stopped = false;

  constructor(
    private readonly fd: number,
    /** False once the master's stream is destroyed (synchronously, before its fd is closed). */
    private readonly open: () => boolean,
    /** The queue went from holding bytes to empty (taken, or dropped by stop()). */
    private readonly drained: () => void,
  ) {}

  /** `bytes` is handed over: the callers (PtyInput, end of input) pass buffers of their own. */
  write(bytes: Buffer): void {
    if (this.stopped || bytes.length === 0) return;
    this.queue.push(bytes);
    this.queued += bytes.length;
    if (this.timer === undefined) this.pump();
  }

  /** The run is over: what waits is dropped, and no timer is left behind. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    const held = this.queued > 0;
    this.queue.length = 0;
    this.queued = 0;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    // A writer waiting for room would otherwise wait for ever; its next write() says the input is over.
    if (held) this.drained();
  }

  private pump(): void {
    this.timer = undefined;
    if (!this.open()) this.stop();
    const waited = this.queued > 0;
    while (!this.stopped && this.queue.length > 0) {
      const head = this.queue[0] as Buffer;
      let n: number;
      try {
        n = writeSync(this.fd, head);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EAGAIN') {
          this.timer = setTimeout(() => this.pump(), this.delay);
          this.delay = Math.min(MAX_RETRY_MS, this.delay * 2);
          return;
        }
        // EIO: the terminal is gone, and with it whoever would have read this.
        this.stop();
        return;
      }
      this.delay = 1;
      this.queued -= n;
      if (n >= head.length) this.queue.shift();
      else this.queue[0] = head.subarray(n);
    }
    if (waited && !this.stopped && this.queue.length === 0) this.drained();
  }
}

/** macOS spawns through node-pty's helper executable, found where node-pty finds it. */
function helperPath(): string {
  if (process.platform !== 'darwin') return 'spawn-helper-unused';
  const fromPty = createRequire(createRequire(import.meta.url).resolve(PTY_PACKAGE));
  return fromPty.resolve(`${PTY_PACKAGE}-darwin-${process.arch}/spawn-helper`);
}

/**
 * Reads a non-blocking PTY master until the kernel has nothing more: EIO once the slave is closed
 * and drained (EAGAIN if someone still holds it). Never waits, so it is bounded by the terminal buffer.
 */
function readUntilClosed(fd: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (;;) {
    const buffer = Buffer.alloc(65536);
    let n: number;
    try {
      n = readSync(fd, buffer, 0, buffer.length, null);
    } catch {
      return chunks;
    }
    if (n === 0) return chunks;
    chunks.push(buffer.subarray(0, n));
  }
}
