import type { Deliverer, Guard, MemberScan, Members } from '../kill/index.js';
import type { ProcessInfo, ProcessTable } from '../tree/index.js';
import { TreeMembership } from './membership.js';
import type { Containment, LaunchPlan } from './types.js';

/**
 * What the process-table strategies share: the tree is found by scanning (group, known members,
 * cookie, descendants) and members are signalled one by one, identity-checked. Subclasses decide
 * where the command starts and whether a group signal may go first.
 */
export abstract class ScannedContainment implements Containment {
  abstract readonly kind: Containment['kind'];
  protected readonly membership: TreeMembership;

  constructor(
    table: ProcessTable,
    guard: Guard,
    protected readonly deliverer: Deliverer,
    cookie: string | null,
    useGroup: boolean,
  ) {
    this.membership = new TreeMembership(table, guard, cookie, useGroup, deliverer.notes);
  }

  get notes(): readonly string[] {
    return this.deliverer.notes;
  }

  prepare(plan: LaunchPlan): LaunchPlan {
    this.membership.beforeLaunch();
    return this.launchPlan(plan);
  }

  /** Where the command starts (its own session, or ours). */
  protected abstract launchPlan(plan: LaunchPlan): LaunchPlan;

  attach(pid: number): Promise<void> {
    return this.membership.attach(pid);
  }

  rootReaped(): boolean {
    return this.membership.rootReaped();
  }

  identityNow(): void {
    this.membership.identityNow();
  }

  members(scan?: MemberScan): Promise<Members> {
    return this.membership.scan(scan?.stopOnSight ? (m) => this.deliverer.stopNow(m) : undefined);
  }

  signal(signal: NodeJS.Signals, members: ProcessInfo[]): Promise<ProcessInfo[]> {
    return this.deliverer.toMembers(members, signal);
  }

  lastSeen(): { root: ProcessInfo | null; members: ProcessInfo[] } {
    return { root: this.membership.rootInfo, members: this.membership.knownMembers };
  }

  async release(): Promise<void> {}
}
