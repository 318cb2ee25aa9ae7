import { accessSync, constants, createWriteStream, fstatSync, openSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { ProcwardenError } from '../errors.js';
import { net, tty } from '../lazy-builtins.js';
import { terminalStream } from './terminal-out.js';

function cannotOpen(path: string, code: string | undefined): ProcwardenError {
  return new ProcwardenError(
    'INVALID_OPTION',
    `output.file ${JSON.stringify(path)} cannot be opened for writing (${code}); check that its directory exists and is writable.`,
  );
}

/**
 * What would make opening `path` for output fail, checked without opening it (opening a FIFO's
 * write end and closing it again would hand its reader an end of file): a missing directory, a
 * directory in its place, no write permission. Throws what the sink's open would throw.
 */
export function checkWritable(path: string): void {
  const cannot = (code: string | undefined) => cannotOpen(path, code);
  try {
    if (statSync(path).isDirectory()) throw cannot('EISDIR');
    accessSync(path, constants.W_OK);
  } catch (error) {
    if (error instanceof ProcwardenError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') throw cannot(code);
    try {
      accessSync(dirname(resolve(path)), constants.W_OK | constants.X_OK);
    } catch (parent) {
      throw cannot((parent as NodeJS.ErrnoException).code);
    }
  }
}

/**
 * output.file: every byte, written asynchronously so that a slow reader never blocks the host.
 * The path is opened with O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of
 * blocking in open(2). A FIFO is then written through a libuv pipe (epoll, no thread waits on a
 * stalled reader); anything else through fs.WriteStream (the thread pool). A failure after the
 * open is a note, never an exception: the run goes on without the file.
 */
export class FileSink {
  private stream: Writable | null = null;
  private waiting: Promise<void> | null = null;
  private wake: () => void = () => {};

  constructor(
    private readonly path: string,
    private readonly note: (text: string) => void,
  ) {
    let fd: number;
    try {
      fd = openSync(
        path,
        constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NONBLOCK,
        0o666,
      );
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENXIO') {
        // A socket (stdout under systemd, or under `procwarden run`: /dev/stdout) fails the same way.
        const what = isSocket(path) ? 'a socket, which cannot be opened as a file' : 'a FIFO with no reader';
        note(`output.file ${JSON.stringify(path)} is ${what} (ENXIO); output was not written to it`);
        return;
      }
      throw cannotOpen(path, code);
    }
    this.stream = openStream(fd);
    this.stream.on('error', (error: NodeJS.ErrnoException) =>
      this.fail(`write failed (${error.code ?? error.message})`),
    );
  }

  /** Queues the chunk; a promise when the sink is behind (resolves on 'drain', or when the sink fails). */
  write(chunk: Uint8Array): Promise<void> | undefined {
    if (!this.stream) return undefined;
    if (this.stream.write(chunk)) return undefined;
    this.waiting ??= new Promise<void>((resolve) => {
      this.wake = resolve;
      this.stream?.once('drain', () => this.release());
    });
    return this.waiting;
  }

  /** Ends the file; a promise that resolves once everything queued is written (or the sink failed). */
  finish(): Promise<void> | undefined {
    const stream = this.stream;
    if (!stream) return undefined;
    return new Promise<void>((resolve) => {
      stream.once('close', () => {
        if (this.stream === stream) this.stream = null;
        resolve();
      });
      stream.end();
    });
  }

  /** Gives up on what is still queued (the reader stalled past the drain window). */
  abandon(): void {
    if (!this.stream) return;
    this.fail(
      `not finished writing within the drain window after the run ended (the reader stalled); the last ${this.stream.writableLength} bytes queued were dropped`,
    );
  }

  private fail(why: string): void {
    const stream = this.stream;
    if (!stream) return;
    this.note(`output.file ${JSON.stringify(this.path)}: ${why}; later output not written`);
    this.stream = null;
    stream.destroy();
    this.release();
  }

  private release(): void {
    this.waiting = null;
    this.wake();
  }
}

function openStream(fd: number): Writable {
  const stat = fstatSync(fd);
  if (stat.isFIFO()) return new (net().Socket)({ fd, readable: false, writable: true });
  // A terminal (/dev/tty, /dev/pts/N) opened O_NONBLOCK answers a full buffer with EAGAIN, which a
  // file stream takes for a failure (see terminalStream).
  if (stat.isCharacterDevice() && tty().isatty(fd)) return terminalStream(fd);
  return createWriteStream('', { fd, autoClose: true });
}

function isSocket(path: string): boolean {
  try {
    return statSync(path).isSocket();
  } catch {
    return false;
  }
}
