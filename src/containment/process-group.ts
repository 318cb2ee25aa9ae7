import type { Deliverer, Guard } from '../kill/index.js';
import type { ProcessInfo, ProcessTable } from '../tree/index.js';
import { TreeMembership } from './membership.js';
import type { Containment, LaunchPlan } from './types.js';

/**
 * The command leads its own session and process group. One kill(-pgid) reaches every group member
 * at once, including ones forked an instant before; members outside the group (setsid children,
 * cookie holders) are signalled by pid.
 */
export class ProcessGroupContainment implements Containment {
  readonly kind = 'process-group' as const;
  private readonly membership: TreeMembership;

  constructor(
    table: ProcessTable,
    guard: Guard,
    private readonly deliverer: Deliverer,
    cookie: string | null,
  ) {
    this.membership = new TreeMembership(table, guard, cookie, true);
  }

  get notes(): readonly string[] {
    return this.deliverer.notes;
  }

  prepare(plan: LaunchPlan): LaunchPlan {
    return { ...plan, newSession: true };
  }

  attach(pid: number): Promise<void> {
    return this.membership.attach(pid);
  }

  members(): Promise<ProcessInfo[]> {
    return this.membership.scan();
  }

  async signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    const pgid = this.membership.rootInfo?.pid;
    const inGroup = members.filter((m) => m.pgid === pgid);
    const reached: ProcessInfo[] = [];
    let rest = members;
    if (pgid !== undefined && inGroup.length > 0) {
      for (const witness of inGroup) {
        const delivery = await this.deliverer.toGroup(pgid, witness, signal);
        if (delivery === 'gone') continue;
        if (delivery === 'sent') {
          reached.push(...inGroup);
          rest = members.filter((m) => m.pgid !== pgid);
        }
        break;
      }
    }
    for (const m of rest) if ((await this.deliverer.toMember(m, signal)) === 'sent') reached.push(m);
    return reached;
  }

  async release(): Promise<void> {}
}
