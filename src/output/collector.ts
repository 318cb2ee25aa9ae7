import { isAscii } from 'node:buffer';
import { StringDecoder } from 'node:string_decoder';
import { describeThrown } from '../errors.js';
import type { OutputOptions, StreamCapture, StreamName } from '../types.js';
import { BoundedCapture } from './capture.js';
import { checkWritable, FileSink } from './file-sink.js';

export interface CollectorOptions {
  maxBytes: number;
  onData: OutputOptions['onData'];
  onBytes?: OutputOptions['onBytes'];
  file: string | undefined;
  /**
   * Open the file when the command starts (openFile), not now: a run that waits for the runs it
   * replaces must not truncate a file they still write. Its likely failures are checked now.
   */
  openFileLater?: boolean;
  /** The run's log for polling: every stream's text, in arrival order. */
  log?: TextLog;
}

/** Where the run's text goes besides onData; ASCII bytes may stay bytes until somebody reads them. */
export interface TextLog {
  push(text: string): void;
  pushAscii(bytes: Buffer): void;
}

/**
 * Everything a run's output goes through: one UTF-8 decoder per stream for onData and the log (a
 * character split across chunks decodes whole), bounded capture, and the optional file sink.
 * Without onData, a stream whose every chunk so far was ASCII is not decoded at all: its chunks go
 * to the log as bytes (a decoder that has only seen whole ASCII characters holds nothing back).
 * `push` says when a consumer is behind (a promise), so that the launcher can stop reading:
 * backpressure.
 */
export class OutputCollector {
  private readonly captures = new Map<StreamName, BoundedCapture>();
  private readonly decoders = new Map<StreamName, StringDecoder>();
  private file: FileSink | undefined;
  private finished = false;
  private pending = 0;
  private receivedBytes = 0;
  private caughtUpWaiters: (() => void)[] = [];
  readonly notes: string[] = [];
  /** Each distinct callback failure: how often, and where its note is. */
  private readonly faults = new Map<string, { times: number; at: number }>();

  constructor(private options: CollectorOptions) {
    if (options.file === undefined) return;
    if (options.openFileLater) checkWritable(options.file);
    else this.openFile();
  }

  /** Opens output.file (once); throws INVALID_OPTION when it cannot be opened. */
  openFile(): void {
    const { file } = this.options;
    if (file !== undefined && this.file === undefined && !this.finished)
      this.file = new FileSink(file, (text) => this.notes.push(text));
  }

  /** Hands the chunk to every consumer; a promise while any of them is not ready for more. */
  push(stream: StreamName, chunk: Buffer): Promise<void> | undefined {
    if (this.finished) return undefined;
    this.receivedBytes += chunk.length;
    this.capture(stream).push(chunk);
    const waits: PromiseLike<void>[] = [];
    const file = this.file?.write(chunk);
    if (file) waits.push(file);
    const { onBytes } = this.options;
    if (onBytes) this.call('onBytes', () => onBytes(chunk, stream), waits);
    const { onData, log } = this.options;
    if (onData || log) {
      let decoder = this.decoders.get(stream);
      if (!decoder && !onData && log && isAscii(chunk)) log.pushAscii(chunk);
      else {
        if (!decoder) {
          decoder = new StringDecoder('utf8');
          this.decoders.set(stream, decoder);
        }
        this.emit(decoder.write(chunk), stream, waits);
      }
    }
    return waits.length > 0 ? this.hold(waits) : undefined;
  }

  /** Bytes handed to the consumers so far, all streams. */
  get received(): number {
    return this.receivedBytes;
  }

  /** Some consumer has not yet taken a chunk it was given. */
  get behind(): boolean {
    return this.pending > 0;
  }

  /** Resolves when no consumer is behind. */
  caughtUp(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.caughtUpWaiters.push(resolve));
  }

  /**
   * Flushes decoders and ends the file; after this, output is ignored. Returns a promise while the
   * file still has queued bytes to write.
   */
  finish(): Promise<void> | undefined {
    if (this.finished) return undefined;
    this.finished = true;
    for (const [stream, decoder] of this.decoders) this.emit(decoder.end(), stream, []);
    return this.file?.finish();
  }

  /** Drops what the file sink still queues (its reader stalled past the drain window), with a note. */
  abandon(): void {
    this.file?.abandon();
  }

  /** The result is built: what the captures and decoders hold goes (a registry keeps exited runs). */
  dispose(): void {
    this.captures.clear();
    this.decoders.clear();
    // The caller's callbacks, and whatever they hold, go with the run's end.
    this.options = { ...this.options, onData: undefined, onBytes: undefined, log: undefined };
  }

  result(stream: StreamName): StreamCapture {
    return this.captures.get(stream)?.result() ?? { text: '', bytes: 0, truncated: false };
  }

  private capture(stream: StreamName): BoundedCapture {
    let c = this.captures.get(stream);
    if (!c) {
      c = new BoundedCapture(this.options.maxBytes);
      this.captures.set(stream, c);
    }
    return c;
  }

  private hold(waits: PromiseLike<void>[]): Promise<void> {
    this.pending++;
    // Settled, not fulfilled: a wait that fails must not leave the consumer 'behind' for ever.
    return Promise.allSettled(waits).then(() => {
      this.pending--;
      if (this.pending > 0) return;
      for (const wake of this.caughtUpWaiters.splice(0)) wake();
    });
  }

  private emit(text: string, stream: StreamName, waits: PromiseLike<void>[]): void {
    const { onData, log } = this.options;
    if (text === '') return;
    // The log first: a throwing onData must not cost the log its text.
    log?.push(text);
    if (onData) this.call('onData', () => onData(text, stream), waits);
  }

  /** Runs a user callback; a thrown error or rejected promise becomes a note, never our failure. */
  private call(name: string, callback: () => unknown, waits: PromiseLike<void>[]): void {
    try {
      const returned = callback();
      if (isThenable(returned))
        waits.push(
          Promise.resolve(returned).then(undefined, (error) => this.fault(`output.${name} rejected`, error)),
        );
    } catch (error) {
      // A throwing callback must not take the host down nor stop the run's bookkeeping.
      this.fault(`output.${name} threw`, error);
    }
  }

  /** A callback that fails on every chunk is one note with a count, not a note per chunk. */
  private fault(what: string, error: unknown): void {
    const text = `${what}: ${describeThrown(error)}`;
    const seen = this.faults.get(text);
    if (seen) {
      seen.times++;
      this.notes[seen.at] = `${text} (${seen.times} times)`;
    } else if (this.notes.length < 10) {
      this.faults.set(text, { times: 1, at: this.notes.push(text) - 1 });
    }
  }
}

/** A promise, or anything awaited like one (a user callback's lazy thenable). */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}
