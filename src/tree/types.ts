/** One row of a process table. `startTime` is opaque: only equality matters (identity = pid + startTime). */
export interface ProcessInfo {
  pid: number;
  ppid: number;
  pgid: number;
  sid: number;
  startTime: string;
  /** One-letter state as ps prints it: R, S, D, T, Z, X... */
  state: string;
  command: string;
}

/** Everything procwarden needs to know about processes, one implementation per platform. */
export interface ProcessTable {
  readonly name: string;
  /** Every process on the machine, as one snapshot. */
  list(): Promise<ProcessInfo[]>;
  /** One process, read fresh; null when it does not exist. */
  get(pid: number): Promise<ProcessInfo | null>;
  /**
   * Pids whose environment holds `NAME=value`. Optional: only tables that can read other processes'
   * environments (procfs) offer it.
   */
  findByEnv?(name: string, value: string, search?: EnvSearch): Promise<number[]>;
}

/** Narrows an environment search; both are optimisations, the answer for a match is the same. */
export interface EnvSearch {
  /** Look only at these processes (a snapshot the caller already holds) instead of every pid. */
  among?: readonly ProcessInfo[];
  /**
   * Skip processes started before this one: an environment inherited from a run cannot be older
   * than the run's first process, so a run's cookie search need not read older environments.
   */
  bornSince?: ProcessInfo;
}

/** Zombies and dead entries count as gone: on hosts whose PID 1 does not reap, they stay forever. */
export function isGone(info: ProcessInfo | null | undefined): boolean {
  return !info || info.state === 'Z' || info.state === 'X' || info.state === 'x';
}

export function sameProcess(a: ProcessInfo, b: Pick<ProcessInfo, 'pid' | 'startTime'>): boolean {
  return a.pid === b.pid && a.startTime === b.startTime;
}
