import { closeSync, openSync, readdirSync, readSync } from 'node:fs';
import type { EnvSearch, ProcessInfo, ProcessTable } from './types.js';

interface EnvRequest {
  needle: Buffer;
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
      this.envRequests.push({ needle: Buffer.from(`${name}=${value}\0`), search, resolve });
    });
  }

  /** One pass for every request of this turn: each environment is read once, whoever asked. */
  private scanEnvironments(): void {
    const requests = this.envRequests;
    this.envRequests = [];
    const wanted = new Map<number, EnvRequest[]>();
    const everyPid = requests.some((r) => !r.search.among) ? this.pids() : [];
    for (const r of requests) {
      const floor = r.search.bornSince ? Number(r.search.bornSince.startTime) : -1;
      const pids = r.search.among
        ? r.search.among.filter((p) => Number(p.startTime) >= floor).map((p) => p.pid)
        : everyPid;
      for (const pid of pids) {
        const list = wanted.get(pid);
        if (list) list.push(r);
        else wanted.set(pid, [r]);
      }
    }
    const found = new Map<EnvRequest, number[]>(requests.map((r) => [r, []]));
    for (const [pid, askers] of wanted) {
      const env = this.readAll(`${this.root}/${pid}/environ`);
      if (!env) continue; // gone, or not ours to read
      for (const r of askers) if (hasEntry(env, r.needle)) found.get(r)?.push(pid);
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
