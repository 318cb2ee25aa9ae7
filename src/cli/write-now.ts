import { writeSync } from 'node:fs';

let pipeBroke = false;

/**
 * Notes a failed write of ours. A write into a pipe whose reader has gone (EPIPE) raises SIGPIPE
 * in this process as well; a stop-signal listener must not read that one as a request to stop.
 */
export function noteWriteError(error: NodeJS.ErrnoException): void {
  if (error.code === 'EPIPE') pipeBroke = true;
}

/** Whether a write of ours has found its reader gone: the SIGPIPE that follows is that. */
export const ownPipeBroke = (): boolean => pipeBroke;

/** write(2) until all of `text` is out or a write fails: what is left, and why (noted). */
export function writeAll(fd: number, text: string): { rest: Buffer; error?: NodeJS.ErrnoException } {
  let rest = Buffer.from(text, 'utf8');
  try {
    while (rest.length > 0) rest = rest.subarray(writeSync(fd, rest));
    return { rest };
  } catch (error) {
    noteWriteError(error as NodeJS.ErrnoException);
    return { rest, error: error as NodeJS.ErrnoException };
  }
}

/**
 * Writes `text` to stdout (1) or stderr (2) with write(2) itself. process.stdout is a stream, and
 * Node 22 and 24 load the stream modules to build it (3-5 ms, most of what `--version` costs
 * beyond Node's own start-up); a line of help needs none of that. A descriptor in non-blocking
 * mode (EAGAIN) gets the rest through the stream after all; a reader that has gone (EPIPE) gets
 * nothing, as with any program whose output nobody reads. Any other failure (ENOSPC, EIO) throws
 * "write error: ...", which the CLI reports with its failure status, as coreutils do.
 */
export function writeNow(fd: 1 | 2, text: string): void {
  const { rest, error } = writeAll(fd, text);
  if (error === undefined || error.code === 'EPIPE') return;
  if (error.code !== 'EAGAIN') throw new Error(`write error: ${error.message}`);
  const stream = fd === 1 ? process.stdout : process.stderr;
  stream.on('error', (late: NodeJS.ErrnoException) => {
    noteWriteError(late);
    if (late.code === 'EPIPE') return;
    process.exitCode = 1;
    try {
      writeSync(2, `procwarden: write error: ${late.message}\n`);
    } catch {}
  });
  stream.write(rest);
}

/**
 * write(2) of a line that may be lost: a closed or broken stderr (`timeout -v ... 2>&-`), or a full
 * non-blocking one, drops it, and never changes the command's status. Unlike writeNow it never
 * falls back to a stream: building one would make a piped descriptor non-blocking, and the command
 * shares that open file (it would get EAGAIN from a full pipe).
 */
export function sayNow(fd: 1 | 2, text: string): void {
  writeAll(fd, text);
}
