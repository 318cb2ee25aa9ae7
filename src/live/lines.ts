import type { StreamName } from '../types.js';

/** Characters of one line a session keeps by default; past it the line is cut (see LineInfo). */
export const DEFAULT_MAX_LINE_CHARS = 4 * 1024 * 1024;

/** What comes with every 'line' event. */
export interface LineInfo {
  /**
   * The line was longer than maxLineChars: the event carries its first maxLineChars characters, or
   * one fewer where the cut would split a surrogate pair.
   */
  truncated: boolean;
  /** Characters the line had as written (without its newline), whether or not it was cut. */
  length: number;
}

/** One stream's unfinished line: pieces kept up to the limit, and how long it really is. */
interface Pending {
  pieces: string[];
  kept: number;
  length: number;
  endsWithCR: boolean;
}

/**
 * Splits decoded output into lines per stream (\n or \r\n). A line longer than `maxChars` comes out
 * once, cut, with `truncated: true`: one 'line' event is always one line. Each chunk is scanned once
 * (the unfinished line is kept in pieces, never rescanned), so the cost is linear in the bytes received.
 * Every line is cut out of the buffer before it is handed on, so a throwing consumer loses nothing else.
 */
export class LineSplitter {
  private readonly pending = new Map<StreamName, Pending>();

  constructor(
    private readonly emit: (line: string, stream: StreamName, info: LineInfo) => void,
    private readonly maxChars = DEFAULT_MAX_LINE_CHARS,
  ) {}

  push(text: string, stream: StreamName): void {
    const ready: [string, LineInfo][] = [];
    let start = 0;
    for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', start)) {
      this.append(stream, text.slice(start, at));
      ready.push(this.take(stream));
      start = at + 1;
    }
    if (start < text.length) this.append(stream, text.slice(start));
    for (const [line, info] of ready) this.emit(line, stream, info);
  }

  /** The output ended: a last line without a newline still counts. */
  flush(): void {
    const ready: [StreamName, string, LineInfo][] = [];
    for (const [stream, rest] of this.pending) {
      if (rest.length > 0) ready.push([stream, ...this.take(stream)]);
    }
    this.pending.clear();
    for (const [stream, line, info] of ready) this.emit(line, stream, info);
  }

  private append(stream: StreamName, piece: string): void {
    let p = this.pending.get(stream);
    if (!p) {
      p = { pieces: [], kept: 0, length: 0, endsWithCR: false };
      this.pending.set(stream, p);
    }
    if (piece === '') return;
    p.length += piece.length;
    p.endsWithCR = piece.endsWith('\r');
    // One character over the limit is kept so that a cut line ending in '\r' is still told apart.
    const room = this.maxChars + 1 - p.kept;
    if (room <= 0) return;
    const keep = piece.length > room ? piece.slice(0, room) : piece;
    p.pieces.push(keep);
    p.kept += keep.length;
  }

  /** Removes the stream's unfinished line and returns it as a complete one. */
  private take(stream: StreamName): [string, LineInfo] {
    const p = this.pending.get(stream) as Pending;
    this.pending.delete(stream);
    const length = p.endsWithCR ? p.length - 1 : p.length;
    const line = p.pieces.join('');
    const truncated = length > this.maxChars;
    // A cut between the two halves of a surrogate pair (an emoji) keeps neither: a lone half
    // would come out as U+FFFD, or fail to encode, wherever the line goes next.
    let end = Math.min(length, this.maxChars);
    if (truncated && isHighSurrogate(line.charCodeAt(end - 1))) end--;
    return [line.slice(0, end), { truncated, length }];
  }
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;
