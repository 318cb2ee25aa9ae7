import { closeSync, openSync, writeSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { ProcwardenError } from '../errors.js';
import type { StreamCapture, StreamName } from '../types.js';
import { BoundedCapture } from './capture.js';

export interface CollectorOptions {
  maxBytes: number;
  onData: ((text: string, stream: StreamName) => void) | undefined;
  onBytes?: ((chunk: Uint8Array, stream: StreamName) => void) | undefined;
  file: string | undefined;
}

/**
 * Everything a run's output goes through: one UTF-8 decoder per stream for onData (a character
 * split across chunks decodes whole), bounded capture, and the optional file sink.
 */
export class OutputCollector {
  private readonly captures = new Map<StreamName, BoundedCapture>();
  private readonly decoders = new Map<StreamName, StringDecoder>();
  private fd: number | null = null;
  private finished = false;
  readonly notes: string[] = [];

  constructor(private readonly options: CollectorOptions) {
    if (options.file !== undefined) {
      try {
        this.fd = openSync(options.file, 'w');
      } catch (error) {
        throw new ProcwardenError(
          'INVALID_OPTION',
          `output.file ${JSON.stringify(options.file)} cannot be opened for writing (${(error as NodeJS.ErrnoException).code}); check that its directory exists and is writable.`,
        );
      }
    }
  }

  push(stream: StreamName, chunk: Buffer): void {
    if (this.finished) return;
    this.capture(stream).push(chunk);
    if (this.fd !== null) {
      try {
        writeSync(this.fd, chunk);
      } catch (error) {
        this.notes.push(
          `output.file: write failed (${(error as NodeJS.ErrnoException).code}); later output not written`,
        );
        this.closeFile();
      }
    }
    if (this.options.onBytes) {
      try {
        this.options.onBytes(chunk, stream);
      } catch (error) {
        if (this.notes.length < 10)
          this.notes.push(`output.onBytes threw: ${(error as Error)?.message ?? error}`);
      }
    }
    if (this.options.onData) {
      let decoder = this.decoders.get(stream);
      if (!decoder) {
        decoder = new StringDecoder('utf8');
        this.decoders.set(stream, decoder);
      }
      this.emit(decoder.write(chunk), stream);
    }
  }

  /** Flushes decoders and the file; after this, output is ignored. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    for (const [stream, decoder] of this.decoders) this.emit(decoder.end(), stream);
    this.closeFile();
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

  private emit(text: string, stream: StreamName): void {
    if (text === '' || !this.options.onData) return;
    try {
      this.options.onData(text, stream);
    } catch (error) {
      // A throwing callback must not take the host down nor stop the run's bookkeeping.
      if (this.notes.length < 10)
        this.notes.push(`output.onData threw: ${(error as Error)?.message ?? error}`);
    }
  }

  private closeFile(): void {
    if (this.fd === null) return;
    try {
      closeSync(this.fd);
    } catch {
      // already closed by the kernel on error; nothing left to flush
    }
    this.fd = null;
  }
}
