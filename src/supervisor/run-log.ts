export interface LogSlice {
  text: string;
  /** Pass as `since` next time to get only what came after. */
  cursor: number;
  /** Characters between `since` and the start of `text` that were dropped to bound the log. */
  dropped: number;
}

/**
 * A run's combined output for polling, bounded in characters: the oldest output is dropped first.
 * Cursors count characters since the run started, so they stay valid while the front is dropped.
 *
 * ASCII output may come as bytes (`pushAscii`): one character a byte, turned into text only if it
 * is read. A run whose output nobody takes as text (onBytes, a file, the capture alone) then never
 * pays for decoding all of it, nor for the garbage its strings would make, to keep a log of its
 * last 64 K characters.
 */
export class RunLog {
  /** Text, or bytes known to be ASCII. */
  private chunks: (string | Buffer)[] = [];
  private size = 0;
  private start = 0;

  constructor(private readonly maxChars: number) {}

  push(text: string): void {
    this.add(text);
  }

  /**
   * Bytes that are all ASCII (below 0x80), kept by reference: whoever pushes them must not change
   * them afterwards.
   */
  pushAscii(bytes: Buffer): void {
    // A small chunk costs more as a Buffer kept (an object and its store) than as a short string.
    this.add(bytes.length < SMALL_CHUNK ? bytes.toString('latin1') : bytes);
  }

  private add(piece: string | Buffer): void {
    if (this.maxChars <= 0) {
      this.start += piece.length;
      return;
    }
    this.chunks.push(piece);
    this.size += piece.length;
    if (this.size <= this.maxChars) return;
    this.dropFront(this.size - this.maxChars);
    // Never keep the second half of a surrogate pair whose first half was dropped: it may sit in
    // the same chunk as the cut, or start the next one (a pair split between two pushes).
    const front = this.chunks[0];
    if (typeof front === 'string' && isLowSurrogate(front.charCodeAt(0))) this.dropFront(1);
  }

  /** Drops the oldest `count` characters. */
  private dropFront(count: number): void {
    let excess = count;
    while (excess > 0) {
      const first = this.chunks[0] as string | Buffer;
      const cut = Math.min(excess, first.length);
      if (cut === first.length) this.chunks.shift();
      else this.chunks[0] = typeof first === 'string' ? first.slice(cut) : first.subarray(cut);
      this.size -= cut;
      this.start += cut;
      excess -= cut;
    }
  }

  /** Characters kept now. */
  get chars(): number {
    return this.size;
  }

  /** Everything after `since` that is still kept (a negative or missing cursor means from the start). */
  read(since = 0): LogSlice {
    const end = this.start + this.size;
    const from = Math.min(Math.max(since, this.start), end);
    const dropped = Math.max(0, this.start - Math.max(since, 0));
    const all = this.chunks.map((c) => (typeof c === 'string' ? c : c.toString('latin1'))).join('');
    // Reads are far rarer than pushes: keep the joined form for the next one.
    if (this.chunks.length > 1) this.chunks = [all];
    const text = all.slice(from - this.start);
    return { text, cursor: end, dropped };
  }
}

const SMALL_CHUNK = 1024;

const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;
