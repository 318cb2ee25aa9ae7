import type { Deliverer, Guard } from '../kill/index.js';
import type { ProcessTable } from '../tree/index.js';
import { ScannedContainment } from './scanned.js';
import type { LaunchPlan } from './types.js';

/**
 * The command stays in our process group (no detach). No group is ever signalled, since that
 * group is ours: every member is signalled by pid from the snapshot, identity-checked.
 */
export class NoContainment extends ScannedContainment {
  readonly kind = 'none' as const;

  constructor(table: ProcessTable, guard: Guard, deliverer: Deliverer, cookie: string | null) {
    super(table, guard, deliverer, cookie, false);
  }

  protected launchPlan(plan: LaunchPlan): LaunchPlan {
    return { ...plan, newSession: false };
  }
}
