import { EventEmitter } from 'node:events';
import { checkInput } from '../options/index.js';
import type { RunStdin } from '../types.js';

/** Above this much waiting for the command to start, write() says false (as a Writable would). */
const HIGH_WATER = 64 * 1024;

/**
 * `handle.stdin` of a run that waits to start (it replaces a scope's runs, which end first): what
 * is written waits here, in order, and goes to the command's input when it starts; dropped if the
 * run ends first. Once the command's input exists this passes everything on to it, so a writer
 * that took the handle's stdin early keeps using the same object.
 */
export class PendingInput extends EventEmitter implements RunStdin {
  private queue: (string | Uint8Array)[] = [];
  private queued = 0;
  private ended = false;
  /** The run ended before its command started: nothing written will ever be taken. */
  private dropped = false;
  private target: RunStdin | undefined;
  /** A false write() waits for its 'drain'. */
  private owed = false;

  get writable(): boolean {
    return this.target ? this.target.writable : !this.ended && !this.dropped;
  }

  write(data: string | Uint8Array): boolean {
    const input = checkInput(data);
    if (this.target) return this.pass(this.target.write(input));
    if (this.ended || this.dropped) return this.pass(false);
    // Copied: the caller may reuse its buffer before the command exists to take it.
    const kept = typeof input === 'string' ? input : Uint8Array.from(input);
    this.queue.push(kept);
    this.queued += typeof kept === 'string' ? Buffer.byteLength(kept) : kept.length;
    return this.pass(this.queued <= HIGH_WATER);
  }

  end(): void {
    if (this.target) this.target.end();
    else this.ended = true;
  }

  /** The command started: what waited goes to its input, then end() if it was asked for. */
  attach(target: RunStdin | undefined): void {
    if (this.target || this.dropped) return;
    if (!target) {
      this.drop();
      return;
    }
    this.target = target;
    target.on('drain', () => this.drained());
    let took = true;
    for (const chunk of this.queue) took = target.write(chunk);
    this.queue = [];
    this.queued = 0;
    if (this.ended) target.end();
    // Taken at once: the writer waiting for 'drain' goes on. Otherwise the target's 'drain' follows.
    if (took) process.nextTick(() => this.drained());
  }

  /** The run ended before its command started. */
  drop(): void {
    if (this.target || this.dropped) return;
    this.dropped = true;
    this.queue = [];
    this.queued = 0;
    process.nextTick(() => this.drained());
  }

  private pass(took: boolean): boolean {
    if (!took) {
      this.owed = true;
      // Over already: nothing will drain now, and a writer waiting must still go on.
      if (!this.target && !this.writable) process.nextTick(() => this.drained());
    }
    return took;
  }

  private drained(): void {
    if (!this.owed) return;
    this.owed = false;
    this.emit('drain');
  }
}
