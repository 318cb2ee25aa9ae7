import type { Deliverer, Guard } from '../kill/index.js';
import type { ProcessInfo, ProcessTable } from '../tree/index.js';
import { TreeMembership } from './membership.js';
import type { Containment, LaunchPlan } from './types.js';

/**
 * The command stays in our process group (no detach). No group is ever signalled, since that
 * group is ours: every member is signalled by pid from the snapshot, identity-checked.
 */
export class NoContainment implements Containment {
  readonly kind = 'none' as const;
  private readonly membership: TreeMembership;

  constructor(
    table: ProcessTable,
    guard: Guard,
    private readonly deliverer: Deliverer,
    cookie: string | null,
  ) {
    this.membership = new TreeMembership(table, guard, cookie, false);
  }

  get notes(): readonly string[] {
    return this.deliverer.notes;
  }

  prepare(plan: LaunchPlan): LaunchPlan {
    return { ...plan, newSession: false };
  }

  attach(pid: number): Promise<void> {
    return this.membership.attach(pid);
  }

  members(): Promise<ProcessInfo[]> {
    return this.membership.scan();
  }

  async signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    const reached: ProcessInfo[] = [];
    for (const m of members) if ((await this.deliverer.toMember(m, signal)) === 'sent') reached.push(m);
    return reached;
  }

  async release(): Promise<void> {}
}
