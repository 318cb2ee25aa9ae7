import { ProcwardenError } from '../errors.js';
import type { ProcessInfo, ProcessTable } from './types.js';

/** The start time a blind table reports for every process: it cannot tell one from its successor. */
export const BLIND_START = 'unknown';

/**
 * The table used where /proc cannot be trusted (see procfsProblem): it lists nothing and vouches
 * only for what kill(pid, 0) can answer in our own PID namespace: whether a pid exists. Identity
 * is not available, so nothing that needs it (cookie sweeps, descendants, pid-by-pid signals) is
 * attempted; runs are held by their process group and their child handle instead.
 */
export class BlindTable implements ProcessTable {
  readonly name = 'blind';

  constructor(readonly reason: string) {}

  async list(): Promise<ProcessInfo[]> {
    return [];
  }

  async get(pid: number): Promise<ProcessInfo | null> {
    if (!exists(pid)) return null;
    return {
      pid,
      ppid: -1,
      pgid: exists(-pid) ? pid : -1,
      sid: -1,
      startTime: BLIND_START,
      state: 'S',
      command: '',
    };
  }
}

export function isBlindTable(table: ProcessTable): table is BlindTable {
  return table instanceof BlindTable;
}

/**
 * Refuses to act on processes by a blind table: it lists nothing, so a tree read through it is
 * empty, and "all gone" would be said of processes left running. `what` is what was asked, as in
 * "end the tree of pid 42"; `signals`: whether it would have sent any.
 */
export function refuseBlind(table: ProcessTable, what: string, signals = true): void {
  if (!isBlindTable(table)) return;
  throw new ProcwardenError(
    'PROCESS_TABLE_UNAVAILABLE',
    `cannot ${what}: ${table.reason}, so processes cannot be told apart here${signals ? '; nothing was signalled' : ''}. Give procwarden a /proc of its own PID namespace (unshare --pid --fork --mount-proc), readable in full (as root where /proc has hidepid).`,
  );
}

/** Whether a process (pid > 0) or a process group (pid < 0) exists here, zombies included. */
export function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
