import { EventEmitter } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import type { LaunchPlan } from '../containment/index.js';
import { childProcess } from '../lazy-builtins.js';
import { checkInput, killable } from '../options/index.js';
import type { RunStdin, StreamName } from '../types.js';
import { spawnSealed } from './pty-masters.js';
import type { LaunchEvents, Launched, LaunchOptions } from './types.js';

/** Slots 3 and up of a spawn's stdio: each fd listed at its own number; the others are left to close-on-exec. */
function passOn(fds: readonly number[]): (number | 'ignore')[] {
  const slots: (number | 'ignore')[] = [];
  const wanted = new Set(fds);
  for (let fd = 3; fd <= (fds.at(-1) ?? 2); fd++) slots.push(wanted.has(fd) ? fd : 'ignore');
  return slots;
}

/** Launches through node:child_process with pipes for stdout and stderr. */
export function launchChild(plan: LaunchPlan, options: LaunchOptions, events: LaunchEvents): Launched {
  const stdinMode = options.stdin.kind === 'data' ? 'pipe' : options.stdin.kind;
  const outMode = options.output ?? 'pipe';
  const child = spawnSealed([stdinMode, outMode, outMode, ...passOn(options.inheritFds ?? [])], (stdio) =>
    childProcess().spawn(plan.file, plan.args, {
      cwd: plan.cwd,
      env: plan.env,
      detached: plan.newSession,
      stdio,
      windowsHide: true,
    }),
  );

  let settled = false;
  child.once('spawn', () => events.spawned());
  child.once('error', (error: NodeJS.ErrnoException) => {
    // 'error' also fires for a failed kill() or a failed IPC send; only a spawn failure has no pid.
    if (settled) return;
    if (child.pid === undefined) {
      settled = true;
      events.failed(error);
    }
  });
  child.once('exit', (code, signal) => {
    if (settled) return;
    settled = true;
    events.exited(code, signal);
  });

  // A spawn that failed (EMFILE, EAGAIN) leaves them undefined, not null.
  const streams = [child.stdout, child.stderr].filter((s): s is Readable => s != null);
  if (child.stdout) readPaced(child.stdout, 'stdout', events);
  if (child.stderr) readPaced(child.stderr, 'stderr', events);
  const outputDone = Promise.all(
    streams.map((s) => new Promise<void>((resolve) => s.once('close', () => resolve()))),
  ).then(() => undefined);

  const stdin = child.stdin ? new PipeInput(child.stdin) : undefined;
  if (options.stdin.kind === 'data') {
    stdin?.write(options.stdin.data);
    stdin?.end();
  }

  return {
    pid: child.pid,
    stdin: options.stdin.kind === 'pipe' ? stdin : undefined,
    outputDone,
    releaseOutput() {
      for (const s of streams) s.destroy();
      child.stdin?.destroy();
    },
    // By number for a real-time signal, which ChildProcess.kill refuses by name.
    kill: (signal) => child.kill(signal === undefined ? signal : killable(signal)),
  };
}

/**
 * Reads a pipe as fast as its consumers take it: while they are behind, the stream is paused, so
 * Node stops reading the fd once its small buffer is full, the pipe fills and the command blocks.
 */
function readPaced(stream: Readable, name: StreamName, events: LaunchEvents): void {
  let held = false;
  const release = () => {
    held = false;
    if (!stream.destroyed) stream.resume();
  };
  // node:child_process resumes the child's stdio when the child exits (flushStdio): a stream held
  // for a slow consumer must stay paused, or the rest of the pipe floods in at once.
  stream.on('resume', () => {
    if (held) stream.pause();
  });
  stream.on('data', (chunk: Buffer) => {
    const behind = events.output(name, chunk);
    if (!behind) return;
    held = true;
    stream.pause();
    behind.then(release, release);
  });
}

/**
 * The pipe's own backpressure: write() is the stream's, and its 'drain' is passed on. A pipe that
 * closes with input still waiting (the command closed its stdin, or the run ended) never drains, so
 * its close is a 'drain' too, as is a write after it: the input is dropped, and a writer waiting
 * for 'drain' must not wait forever.
 */
class PipeInput extends EventEmitter implements RunStdin {
  private owed = false;

  constructor(private readonly stream: Writable) {
    super();
    // EPIPE when the command closed its stdin early is the command's business, not a crash of ours.
    stream.on('error', () => {});
    stream.on('drain', () => this.drained());
    stream.on('close', () => this.drained());
  }

  private drained(): void {
    if (!this.owed) return;
    this.owed = false;
    this.emit('drain');
  }

  get writable(): boolean {
    return this.stream.writable;
  }

  write(data: string | Uint8Array): boolean {
    const input = checkInput(data);
    if (this.stream.writable && this.stream.write(input)) return true;
    this.owed = true;
    // Over already: nothing will drain or close now, and a writer waiting must still go on.
    if (!this.stream.writable) process.nextTick(() => this.drained());
    return false;
  }

  end(): void {
    if (this.stream.writable) this.stream.end();
  }
}
