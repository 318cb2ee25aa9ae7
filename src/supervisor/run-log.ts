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
 */
export class RunLog {
  private chunks: string[] = [];
  private size = 0;
  private start = 0;

  constructor(private readonly maxChars: number) {}

  push(text: string): void {
    if (this.maxChars <= 0) {
      this.start += text.length;
      return;
    }
    this.chunks.push(text);
    this.size += text.length;
    if (this.size <= this.maxChars) return;
    this.dropFront(this.size - this.maxChars);
    // Never keep the second half of a surrogate pair whose first half was dropped: it may sit in
    // the same chunk as the cut, or start the next one (a pair split between two pushes).
    const front = this.chunks[0];
    if (front !== undefined && isLowSurrogate(front.charCodeAt(0))) this.dropFront(1);
  }

  /** Drops the oldest `count` characters. */
  private dropFront(count: number): void {
    let excess = count;
    while (excess > 0) {
      const first = this.chunks[0] as string;
      const cut = Math.min(excess, first.length);
      if (cut === first.length) this.chunks.shift();
      else this.chunks[0] = first.slice(cut);
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
    const all = this.chunks.join('');
    // Reads are far rarer than pushes: keep the joined form for the next one.
    if (this.chunks.length > 1) this.chunks = [all];
    const text = all.slice(from - this.start);
    return { text, cursor: end, dropped };
  }
}

const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;
