import type { StreamName } from '../types.js';

// A process that never writes a newline must not grow the buffer without bound.
const MAX_LINE_CHARS = 4 * 1024 * 1024;

/** Splits decoded output into lines per stream (\n or \r\n); an over-long line comes out in pieces. */
export class LineSplitter {
  private readonly rest = new Map<StreamName, string>();

  constructor(private readonly emit: (line: string, stream: StreamName) => void) {}

  push(text: string, stream: StreamName): void {
    const buffer = (this.rest.get(stream) ?? '') + text;
    let start = 0;
    for (let at = buffer.indexOf('\n'); at >= 0; at = buffer.indexOf('\n', start)) {
      const end = at > start && buffer[at - 1] === '\r' ? at - 1 : at;
      this.emit(buffer.slice(start, end), stream);
      start = at + 1;
    }
    for (; buffer.length - start > MAX_LINE_CHARS; start += MAX_LINE_CHARS) {
      this.emit(buffer.slice(start, start + MAX_LINE_CHARS), stream);
    }
    this.rest.set(stream, buffer.slice(start));
  }

  /** The output ended: a last line without a newline still counts. */
  flush(): void {
    for (const [stream, rest] of this.rest) if (rest !== '') this.emit(rest, stream);
    this.rest.clear();
  }
}
