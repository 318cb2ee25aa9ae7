import { killable } from '../options/index.js';
import { type ProcessInfo, type ProcessTable, stillAlive } from '../tree/index.js';
import type { Guard } from './guard.js';

/** How a signal leaves the process: process.kill by default; tests inject a recorder. */
export type SendSignal = (pid: number, signal: NodeJS.Signals) => void;

export type Delivery = 'sent' | 'gone' | 'forbidden' | 'denied';

export const defaultSend: SendSignal = (pid, signal) => {
  process.kill(pid, killable(signal));
};

/** Signals processes by identity: the (pid, start time) recorded in a snapshot is re-read first. */
export class Deliverer {
  constructor(
    private readonly table: ProcessTable,
    private readonly guard: Guard,
    private readonly send: SendSignal = defaultSend,
    readonly notes: string[] = [],
  ) {}

  async toMember(member: ProcessInfo, signal: NodeJS.Signals): Promise<Delivery> {
    if (this.guard.forbidsPid(member.pid)) {
      this.notes.push(`refused to signal pid ${member.pid}: it is pid 1, procwarden itself or an ancestor`);
      return 'forbidden';
    }
    const fresh = await this.table.get(member.pid);
    if (!stillAlive(fresh, member)) return 'gone';
    return this.raw(member.pid, signal);
  }

  /**
   * toMember for several; the members reached. Each signal follows the re-read of its own member
   * at once, one member after the other, where reads are cheap (procfs): the gap in which a pid
   * could change hands stays a few microseconds. Where every read is a launch (ps), the reads go
   * together, one `ps -p a,b,c` for all: the gap is that launch's either way.
   */
  async toMembers(members: readonly ProcessInfo[], signal: NodeJS.Signals): Promise<ProcessInfo[]> {
    if (this.table.batchesReads) {
      const deliveries = await Promise.all(members.map((m) => this.toMember(m, signal)));
      return members.filter((_, i) => deliveries[i] === 'sent');
    }
    const reached: ProcessInfo[] = [];
    for (const m of members) if ((await this.toMember(m, signal)) === 'sent') reached.push(m);
    return reached;
  }

  /**
   * SIGSTOP to a process read from the table an instant ago (identity needs no re-read: its
   * number cannot be handed to another process before the pids wrap around). For a freeze.
   */
  stopNow(member: ProcessInfo): void {
    if (!this.guard.forbidsPid(member.pid)) this.raw(member.pid, 'SIGSTOP');
  }

  /**
   * Signals a whole process group, but only while one of `witnesses` (members verified by
   * identity) still belongs to it: a group whose members are all gone may have had its number
   * recycled. Read one after the other, the signal right after the first that vouches (procfs);
   * all in one `ps` call where every read is a launch.
   */
  async toGroup(pgid: number, witnesses: readonly ProcessInfo[], signal: NodeJS.Signals): Promise<Delivery> {
    if (this.guard.forbidsGroup(pgid)) {
      this.notes.push(`refused to signal process group ${pgid}: it holds procwarden or an ancestor`);
      return 'forbidden';
    }
    const vouches = (w: ProcessInfo, fresh: ProcessInfo | null) =>
      stillAlive(fresh, w) && fresh.pgid === pgid;
    if (this.table.batchesReads) {
      const fresh = await Promise.all(witnesses.map((w) => this.table.get(w.pid)));
      return witnesses.some((w, i) => vouches(w, fresh[i] ?? null)) ? this.raw(-pgid, signal) : 'gone';
    }
    for (const w of witnesses) if (vouches(w, await this.table.get(w.pid))) return this.raw(-pgid, signal);
    return 'gone';
  }

  private raw(target: number, signal: NodeJS.Signals): Delivery {
    try {
      this.send(target, signal);
      return 'sent';
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ESRCH') return 'gone';
      // A SIGKILL retried for its whole bound fails the same way each time: said once.
      const note = `${signal} to ${target < 0 ? `group ${-target}` : `pid ${target}`} failed: ${code ?? error}`;
      if (!this.notes.includes(note)) this.notes.push(note);
      return 'denied';
    }
  }
}
