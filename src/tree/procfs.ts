import { closeSync, openSync, readdirSync, readSync } from 'node:fs';
import type { EnvSearch, ProcessInfo, ProcessTable } from './types.js';

interface EnvRequest {
  name: string;
  /** `NAME=value`, as the entry appears in an environment block. */
  entry: string;
  search: EnvSearch;
  resolve: (pids: number[]) => void;
}

/**
 * Linux process table read from /proc. Reads are synchronous on purpose: each is a few
 * microseconds from the kernel, and a snapshot taken in one go is more coherent than one
 * spread over many event-loop turns. Full scans asked for in the same event-loop turn (many runs
 * ending at once) share one pass over /proc, taken after the last of them asked.
 */
export class ProcfsTable implements ProcessTable {
  readonly name = 'procfs';
  // One buffer for every read: readFileSync would allocate and fstat per file, doubling the cost.
  private scratch = Buffer.allocUnsafe(64 * 1024);
  private pendingList: Promise<ProcessInfo[]> | null = null;
  private envRequests: EnvRequest[] = [];

  constructor(private readonly root = '/proc') {}

  list(): Promise<ProcessInfo[]> {
    this.pendingList ??= new Promise((resolve) =>
      setImmediate(() => {
        this.pendingList = null;
        resolve(this.listSync());
      }),
    );
    return this.pendingList;
  }

  listSync(): ProcessInfo[] {
    const out: ProcessInfo[] = [];
    for (const entry of readdirSync(this.root)) {
      const code = entry.charCodeAt(0);
      if (code < 48 || code > 57) continue;
      const info = this.getSync(Number(entry));
      if (info) out.push(info);
    }
    return out;
  }

  async get(pid: number): Promise<ProcessInfo | null> {
    return this.getSync(pid);
  }

  getSync(pid: number): ProcessInfo | null {
    const size = this.read(`${this.root}/${pid}/stat`);
    // Vanished between readdir and read, or never existed.
    return size < 0 ? null : parseStat(this.scratch.toString('utf8', 0, size));
  }

  findByEnv(name: string, value: string, search: EnvSearch = {}): Promise<number[]> {
    return new Promise((resolve) => {
      if (this.envRequests.length === 0) setImmediate(() => this.scanEnvironments());
      this.envRequests.push({ name, entry: `${name}=${value}`, search, resolve });
    });
  }

  /**
   * One pass for every request of this turn: each candidate environment is read once and its
   * value for the searched name looked up, whoever asked (a thousand runs ending at once would
   * otherwise read every environment a thousand times).
   */
  private scanEnvironments(): void {
    const requests = this.envRequests;
    this.envRequests = [];
    const found = new Map<EnvRequest, number[]>(requests.map((r) => [r, []]));
    // Requests made from one snapshot share its `among` array: group by it.
    const groups = new Map<readonly ProcessInfo[] | null, EnvRequest[]>();
    for (const r of requests) {
      const k = r.search.among ?? null;
      const group = groups.get(k);
      if (group) group.push(r);
      else groups.set(k, [r]);
    }
    for (const [among, group] of groups) {
      const floor = Math.min(...group.map(bornFloor));
      const candidates = among
        ? among.filter((p) => Number(p.startTime) >= floor)
        : this.pids().map((pid) => ({ pid, startTime: null }));
      const askers = new Map<string, EnvRequest[]>();
      for (const r of group) {
        const list = askers.get(r.entry);
        if (list) list.push(r);
        else askers.set(r.entry, [r]);
      }
      const names = [...new Set(group.map((r) => r.name))];
      for (const c of candidates) {
        const env = this.readAll(`${this.root}/${c.pid}/environ`);
        if (!env) continue; // gone, or not ours to read
        for (const name of names) {
          for (const entry of entriesNamed(env, name)) {
            for (const r of askers.get(entry) ?? []) {
              if (c.startTime === null || Number(c.startTime) >= bornFloor(r)) found.get(r)?.push(c.pid);
            }
          }
        }
      }
    }
    for (const r of requests) r.resolve(found.get(r) ?? []);
  }

  private pids(): number[] {
    const out: number[] = [];
    for (const entry of readdirSync(this.root)) {
      const code = entry.charCodeAt(0);
      if (code >= 48 && code <= 57) out.push(Number(entry));
    }
    return out;
  }

  /** Reads a whole file into the scratch buffer (growing it if needed); -1 when it cannot be read. */
  private read(path: string): number {
    let fd: number;
    try {
      fd = openSync(path, 'r');
    } catch {
      return -1;
    }
    try {
      let size = 0;
      for (;;) {
        if (size === this.scratch.length) {
          const bigger = Buffer.allocUnsafe(this.scratch.length * 2);
          this.scratch.copy(bigger);
          this.scratch = bigger;
        }
        const n = readSync(fd, this.scratch, size, this.scratch.length - size, null);
        if (n === 0) return size;
        size += n;
      }
    } catch {
      return -1;
    } finally {
      closeSync(fd);
    }
  }

  private readAll(path: string): Buffer | null {
    const size = this.read(path);
    return size < 0 ? null : this.scratch.subarray(0, size);
  }
}

const bornFloor = (r: EnvRequest) => (r.search.bornSince ? Number(r.search.bornSince.startTime) : -1);

/** Every `NAME=value` entry of an environment block whose name is `name`. */
function entriesNamed(env: Buffer, name: string): string[] {
  const prefix = `${name}=`;
  const out: string[] = [];
  for (let at = env.indexOf(prefix); at >= 0; at = env.indexOf(prefix, at + 1)) {
    if (at > 0 && env[at - 1] !== 0) continue; // the text inside another entry's value
    const end = env.indexOf(0, at);
    out.push(env.toString('utf8', at, end < 0 ? env.length : end));
  }
  return out;
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
