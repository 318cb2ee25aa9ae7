import { closeSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import type { EnvQuery, ProcessInfo, ProcessTable, Sweep } from './types.js';

/**
 * Linux process table read from /proc. Reads are synchronous on purpose: each is a few
 * microseconds from the kernel, and a snapshot taken in one go is more coherent than one
 * spread over many event-loop turns. Nothing is cached between calls: every call is a fresh read.
 */
export class ProcfsTable implements ProcessTable {
  readonly name = 'procfs';
  /** Reused for every stat read: one open/read/close, no allocation per process. */
  private readonly buf = Buffer.allocUnsafe(4096);

  constructor(private readonly root = '/proc') {}

  async list(): Promise<ProcessInfo[]> {
    return this.listSync();
  }

  listSync(): ProcessInfo[] {
    const out: ProcessInfo[] = [];
    for (const pid of this.pids()) {
      const info = this.getSync(pid);
      if (info) out.push(info);
    }
    return out;
  }

  async get(pid: number): Promise<ProcessInfo | null> {
    return this.getSync(pid);
  }

  getSync(pid: number): ProcessInfo | null {
    const text = this.readSmall(`${this.root}/${pid}/stat`);
    return text === null ? null : parseStat(text); // null: vanished between readdir and read
  }

  async findByEnv(name: string, value: string): Promise<number[]> {
    const needle = envNeedle(name, value);
    return this.pids().filter((pid) => this.holds(pid, needle));
  }

  async sweep(query: EnvQuery): Promise<Sweep> {
    return this.sweepSync(query);
  }

  /**
   * One readdir for both the table and the environment search. Environments are read only for
   * processes that started no earlier than the first holder: nothing older can have inherited it.
   */
  sweepSync(query: EnvQuery): Sweep {
    const needle = envNeedle(query.name, query.value);
    const from = query.firstHolder ? Number(query.firstHolder.startTime) : 0;
    const processes: ProcessInfo[] = [];
    const holders = new Set<number>();
    let vanished = 0;
    for (const pid of this.pids()) {
      const info = this.getSync(pid);
      if (!info) {
        vanished++;
        continue;
      }
      processes.push(info);
      if (Number(info.startTime) >= from && this.holds(pid, needle)) holders.add(pid);
    }
    return { processes, holders, vanished };
  }

  private pids(): number[] {
    const out: number[] = [];
    for (const entry of readdirSync(this.root)) {
      const code = entry.charCodeAt(0);
      if (code >= 48 && code <= 57) out.push(Number(entry));
    }
    return out;
  }

  private holds(pid: number, needle: Buffer): boolean {
    let env: Buffer;
    try {
      env = readFileSync(`${this.root}/${pid}/environ`);
    } catch {
      return false; // gone, or not ours to read
    }
    return hasEntry(env, needle);
  }

  private readSmall(path: string): string | null {
    let fd: number;
    try {
      fd = openSync(path, 'r');
    } catch {
      return null;
    }
    try {
      let length = 0;
      for (;;) {
        const n = readSync(fd, this.buf, length, this.buf.length - length, null);
        if (n === 0) break;
        length += n;
        if (length === this.buf.length) return readFileSync(path, 'utf8'); // unusually long: read whole
      }
      return this.buf.toString('utf8', 0, length);
    } catch {
      return null; // ESRCH: the process exited between open and read
    } finally {
      closeSync(fd);
    }
  }

  /**
   * One pass over every environment for many values of one variable: which pids hold each value.
   * What a batch of runs ending at once needs instead of one full pass per run.
   */
  async findByEnvValues(name: string, values: ReadonlySet<string>): Promise<Map<string, number[]>> {
    const prefix = Buffer.from(`${name}=`);
    const found = new Map<string, number[]>();
    for (const entry of readdirSync(this.root)) {
      const code = entry.charCodeAt(0);
      if (code < 48 || code > 57) continue;
      let env: Buffer;
      try {
        env = readFileSync(`${this.root}/${entry}/environ`);
      } catch {
        continue; // gone, or not ours to read
      }
      for (let at = env.indexOf(prefix); at >= 0; at = env.indexOf(prefix, at + 1)) {
        if (at > 0 && env[at - 1] !== 0) continue;
        const end = env.indexOf(0, at);
        const value = env.toString('utf8', at + prefix.length, end < 0 ? env.length : end);
        if (!values.has(value)) continue;
        const list = found.get(value);
        if (list) list.push(Number(entry));
        else found.set(value, [Number(entry)]);
        break;
      }
    }
    return found;
  }
}

const envNeedle = (name: string, value: string) => Buffer.from(`${name}=${value}\0`);

function hasEntry(env: Buffer, needle: Buffer): boolean {
  let from = 0;
  for (;;) {
    const at = env.indexOf(needle, from);
    if (at < 0) {
      // The last entry may lack its terminating NUL.
      const bare = needle.subarray(0, needle.length - 1);
      const tail = env.length - bare.length;
      return tail >= 0 && (tail === 0 || env[tail - 1] === 0) && env.subarray(tail).equals(bare);
    }
    if (at === 0 || env[at - 1] === 0) return true;
    from = at + 1;
  }
}

/** Parses /proc/PID/stat. The command sits in parentheses and may itself contain spaces and ')'. */
export function parseStat(text: string): ProcessInfo | null {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return null;
  const rest = text.slice(close + 2).split(' ');
  // rest[0] is field 3 (state); field N is rest[N - 3].
  const starttime = rest[19];
  if (rest.length < 20 || starttime === undefined) return null;
  return {
    pid: Number(text.slice(0, open - 1)),
    command: text.slice(open + 1, close),
    state: rest[0] ?? '?',
    ppid: Number(rest[1]),
    pgid: Number(rest[2]),
    sid: Number(rest[3]),
    startTime: starttime,
  };
}
