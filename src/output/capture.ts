import { StringDecoder } from 'node:string_decoder';
import type { StreamCapture } from '../types.js';

/**
 * Bounded capture of one stream: the first half of the budget is kept as the head, the last
 * half as a rolling tail, so memory stays flat whatever the command writes. Bytes are copied into
 * one growing block (the head) and one ring (the tail): a command writing a byte at a time costs
 * the bytes, not an object per chunk, and the tail rolls without shifting anything.
 */
export class BoundedCapture {
  private head = EMPTY;
  private headBytes = 0;
  /** Allocated once the head is full and a byte is left for the tail. */
  private ring: Buffer | null = null;
  /** Where the next tail byte goes; once the ring is full, also where the oldest one is. */
  private ringAt = 0;
  private tailBytes = 0;
  private total = 0;
  private readonly headMax: number;
  private readonly tailMax: number;

  constructor(maxBytes: number) {
    this.headMax = Math.ceil(maxBytes / 2);
    this.tailMax = maxBytes - this.headMax;
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    let rest = chunk;
    if (this.headBytes < this.headMax) {
      const take = Math.min(this.headMax - this.headBytes, rest.length);
      this.growHead(this.headBytes + take);
      rest.copy(this.head, this.headBytes, 0, take);
      this.headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0 || this.tailMax === 0) return;
    this.ring ??= Buffer.allocUnsafe(this.tailMax);
    if (rest.length >= this.tailMax) {
      rest.copy(this.ring, 0, rest.length - this.tailMax);
      this.ringAt = 0;
      this.tailBytes = this.tailMax;
      return;
    }
    const first = Math.min(rest.length, this.tailMax - this.ringAt);
    rest.copy(this.ring, this.ringAt, 0, first);
    if (first < rest.length) rest.copy(this.ring, 0, first);
    this.ringAt = (this.ringAt + rest.length) % this.tailMax;
    this.tailBytes = Math.min(this.tailMax, this.tailBytes + rest.length);
  }

  get bytes(): number {
    return this.total;
  }

  result(): StreamCapture {
    const truncated = this.total > this.headBytes + this.tailBytes;
    const head = this.head.subarray(0, this.headBytes);
    const tail = this.tailInOrder();
    if (!truncated)
      return { text: decodeAll(Buffer.concat([head, tail])), bytes: this.total, truncated: false };
    const shownHead = trimIncompleteEnd(head);
    const shownTail = trimContinuationStart(tail);
    // What the text leaves out, the bytes of a character cut at either edge included.
    const dropped = this.total - shownHead.length - shownTail.length;
    return {
      text: `${decodeAll(shownHead)}\n[… ${dropped} bytes truncated …]\n${decodeAll(shownTail)}`,
      bytes: this.total,
      truncated: true,
    };
  }

  /** Doubling, up to headMax: a few copies in all, and no more memory than the output needs. */
  private growHead(needed: number): void {
    if (needed <= this.head.length) return;
    const grown = Buffer.allocUnsafe(Math.min(this.headMax, Math.max(needed, this.head.length * 2, 256)));
    this.head.copy(grown, 0, 0, this.headBytes);
    this.head = grown;
  }

  private tailInOrder(): Buffer {
    const ring = this.ring;
    if (!ring) return EMPTY;
    // Until the ring is full it is written from 0 on, and never wrapped.
    if (this.tailBytes < this.tailMax) return ring.subarray(0, this.tailBytes);
    return Buffer.concat([ring.subarray(this.ringAt), ring.subarray(0, this.ringAt)]);
  }
}

const EMPTY = Buffer.alloc(0);

function decodeAll(buf: Buffer): string {
  const decoder = new StringDecoder('utf8');
  return decoder.write(buf) + decoder.end();
}

/** Drops a UTF-8 sequence cut off by the head's end, so the cut does not show as U+FFFD. */
function trimIncompleteEnd(buf: Buffer): Buffer {
  for (let i = buf.length - 1, seen = 0; i >= 0 && seen < 4; i--, seen++) {
    const byte = buf[i] as number;
    if ((byte & 0xc0) === 0x80) continue;
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return seen + 1 < need ? buf.subarray(0, i) : buf;
  }
  return buf;
}

/** Drops continuation bytes at the tail's start, left over from a sequence the cut split. */
function trimContinuationStart(buf: Buffer): Buffer {
  let i = 0;
  while (i < buf.length && i < 3 && ((buf[i] as number) & 0xc0) === 0x80) i++;
  return buf.subarray(i);
}
