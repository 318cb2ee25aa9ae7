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
  /** The front chunk was cut: a slice of a string, or a view of bytes, that keeps the whole it came from. */
  private frontCut = false;

  constructor(private readonly maxChars: number) {}

  push(text: string): void {
    this.add(text);
  }

  /**
   * Bytes that are all ASCII (below 0x80), kept by reference: whoever pushes them must not change
   * them afterwards.
   */
  pushAscii(bytes: Buffer): void {
    // A small chunk costs more as a Buffer kept (an object and its store) than as a short string;
    // a view into a larger store (the terminal's last reads are up to 4 KiB of a 64 KiB buffer)
    // would keep all of that store for as long as the registry keeps the run.
    const wholeStore = bytes.buffer.byteLength - bytes.length < SMALL_CHUNK;
    this.add(bytes.length >= SMALL_CHUNK && wholeStore ? bytes : bytes.toString('latin1'));
  }

  /**
   * The run is over: nothing more comes, and the registry may keep the log for long. A front chunk
   * that was cut still holds what it was cut from (V8 keeps a string's slice as a view of the whole
   * string; a Buffer's subarray keeps its store): up to a whole pipe read for a few characters, and
   * the registry counts only the characters. It gets a copy of its own.
   */
  settle(): void {
    const front = this.chunks[0];
    if (!this.frontCut || front === undefined) return;
    this.frontCut = false;
    if (typeof front === 'string') {
      // Decoded text never holds half a surrogate pair (add() drops one left at the front): the
      // round trip is exact, and makes a new string.
      this.chunks[0] = Buffer.from(front, 'utf8').toString('utf8');
    } else {
      this.chunks[0] =
        front.length < SMALL_CHUNK ? front.toString('latin1') : Buffer.from(new Uint8Array(front).buffer);
    }
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
      if (cut === first.length) {
        this.chunks.shift();
        this.frontCut = false;
      } else {
        this.chunks[0] = typeof first === 'string' ? first.slice(cut) : first.subarray(cut);
        this.frontCut = true;
      }
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
    if (this.chunks.length > 1) {
      this.chunks = [all];
      this.frontCut = false;
    }
    const text = all.slice(from - this.start);
    return { text, cursor: end, dropped };
  }
}

const SMALL_CHUNK = 1024;

const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;
