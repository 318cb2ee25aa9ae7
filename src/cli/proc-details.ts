import { readFileSync } from 'node:fs';
import { COOKIE_NAME } from '../options/index.js';
import type { ProcessInfo } from '../tree/index.js';

/** What `procwarden tree` shows beyond the process table. One implementation per platform. */
export interface ProcessDetails {
  /** When the process started, in ms since the epoch; null when unknown. */
  startedAt(info: ProcessInfo): number | null;
  /** The full command line, or null when it cannot be read (then the short command is shown). */
  commandLine(pid: number): string | null;
  /** The procwarden run the process belongs to (its PROCWARDEN_RUN cookie), or null. */
  runCookie(pid: number): string | null;
  /** A kernel thread: no signal can end it. False where the platform has none or cannot tell. */
  kernelThread(pid: number): boolean;
}

// /proc/PID/stat's flags (field 9): PF_KTHREAD marks a kernel thread.
const PF_KTHREAD = 0x00200000;

// USER_HZ, the unit of /proc/PID/stat's start time, is 100 on every architecture Node runs on.
const TICKS_PER_SECOND = 100;

/** Linux: /proc/PID/{cmdline,environ}, and start time = boot time (/proc/stat btime) + ticks. */
export class ProcfsDetails implements ProcessDetails {
  private readonly bootMs: number | null;

  constructor(private readonly root = '/proc') {
    const btime = /^btime (\d+)$/m.exec(this.read('stat')?.toString('utf8') ?? '');
    this.bootMs = btime ? Number(btime[1]) * 1000 : null;
  }

  startedAt(info: ProcessInfo): number | null {
    const ticks = Number(info.startTime);
    if (this.bootMs === null || !Number.isFinite(ticks)) return null;
    return this.bootMs + (ticks * 1000) / TICKS_PER_SECOND;
  }

  commandLine(pid: number): string | null {
    const raw = this.read(`${pid}/cmdline`);
    if (!raw || raw.length === 0) return null; // kernel threads and zombies have none
    return raw.toString('utf8').replace(/\0+$/, '').split('\0').join(' ');
  }

  runCookie(pid: number): string | null {
    const env = this.read(`${pid}/environ`);
    if (!env) return null;
    const prefix = `${COOKIE_NAME}=`;
    for (const entry of env.toString('utf8').split('\0')) {
      if (entry.startsWith(prefix)) return entry.slice(prefix.length);
    }
    return null;
  }

  kernelThread(pid: number): boolean {
    const stat = this.read(`${pid}/stat`)?.toString('utf8');
    // The command (field 2) may hold spaces and parentheses: count fields after its last ')'.
    const flags = stat ? Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[6]) : Number.NaN;
    return Number.isInteger(flags) && (flags & PF_KTHREAD) !== 0;
  }

  private read(path: string): Buffer | null {
    try {
      return readFileSync(`${this.root}/${path}`);
    } catch {
      return null; // gone, or not ours to read
    }
  }
}

export function platformDetails(): ProcessDetails {
  return new ProcfsDetails();
}
