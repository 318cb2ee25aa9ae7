import { StringDecoder } from 'node:string_decoder';
import type { StreamCapture } from '../types.js';

/**
 * Bounded capture of one stream: the first half of the budget is kept as the head, the last
 * half as a rolling tail, so memory stays flat whatever the command writes.
 */
export class BoundedCapture {
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
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
      this.head.push(rest.subarray(0, take));
      this.headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0 || this.tailMax === 0) return;
    if (rest.length >= this.tailMax) {
      // Copy: keeping a view would pin the whole (possibly huge) chunk in memory.
      this.tail = [Buffer.from(rest.subarray(rest.length - this.tailMax))];
      this.tailBytes = this.tailMax;
      return;
    }
    this.tail.push(rest);
    this.tailBytes += rest.length;
    while (this.tail.length > 0 && this.tailBytes - (this.tail[0] as Buffer).length >= this.tailMax) {
      this.tailBytes -= (this.tail.shift() as Buffer).length;
    }
  }

  get bytes(): number {
    return this.total;
  }

  result(): StreamCapture {
    const kept = this.headBytes + this.tailBytes;
    const truncated = this.total > kept || (this.tailBytes > this.tailMax && this.tailMax > 0);
    const head = Buffer.concat(this.head);
    if (!truncated)
      return { text: decodeAll(Buffer.concat([head, ...this.tail])), bytes: this.total, truncated: false };
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailMax) tail = tail.subarray(tail.length - this.tailMax);
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
}

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
