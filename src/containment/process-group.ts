import type { Deliverer, Guard } from '../kill/index.js';
import type { ProcessInfo, ProcessTable } from '../tree/index.js';
import { ScannedContainment } from './scanned.js';
import type { LaunchPlan } from './types.js';

/**
 * The command leads its own session and process group. One kill(-pgid) reaches every group member
 * at once, including ones forked an instant before; members outside the group (setsid children,
 * cookie holders) are signalled by pid.
 */
export class ProcessGroupContainment extends ScannedContainment {
  readonly kind = 'process-group' as const;

  constructor(table: ProcessTable, guard: Guard, deliverer: Deliverer, cookie: string | null) {
    super(table, guard, deliverer, cookie, true);
  }

  protected launchPlan(plan: LaunchPlan): LaunchPlan {
    return { ...plan, newSession: true };
  }

  override async signal(
    signal: NodeJS.Signals,
    members: ProcessInfo[],
    only?: boolean,
  ): Promise<ProcessInfo[]> {
    const pgid = this.membership.rootInfo?.pid;
    const inGroup = members.filter((m) => m.pgid === pgid);
    if (pgid === undefined || inGroup.length === 0 || only) return super.signal(signal, members);
    // Any member still in the group vouches for it; none left (or the group refused): by pid.
    if ((await this.deliverer.toGroup(pgid, inGroup, signal)) !== 'sent')
      return super.signal(signal, members);
    const outside = await super.signal(
      signal,
      members.filter((m) => m.pgid !== pgid),
    );
    return [...inGroup, ...outside];
  }
}
