import { ProcwardenError } from '../errors.js';
import { Deliverer, Guard, type SendSignal } from '../kill/index.js';
import { isWindowsTable, type ProcessTable } from '../tree/index.js';
import type { ContainmentMode } from '../types.js';
import { NoContainment } from './none.js';
import { ProcessGroupContainment } from './process-group.js';
import type { Containment } from './types.js';
import { WindowsTreeContainment } from './windows-tree.js';

export { TreeMembership } from './membership.js';
export { NoContainment } from './none.js';
export { ProcessGroupContainment } from './process-group.js';
export type { Containment, LaunchPlan } from './types.js';
export { WindowsTreeContainment } from './windows-tree.js';

export interface ContainmentContext {
  table: ProcessTable;
  send?: SendSignal;
  cookie: string | null;
}

/** Picks the strategy for a requested mode. `auto` takes the strongest one this host offers. */
export function createContainment(mode: ContainmentMode, ctx: ContainmentContext): Containment {
  const guard = new Guard();
  const deliverer = new Deliverer(ctx.table, guard, ctx.send);
  // Windows has no process groups or cgroups: whatever was asked short of 'cgroup', the tree is held by identity.
  if (isWindowsTable(ctx.table) && mode !== 'cgroup')
    return new WindowsTreeContainment(ctx.table, guard, ctx.send);
  switch (mode) {
    case 'none':
      return new NoContainment(ctx.table, guard, deliverer, ctx.cookie);
    case 'cgroup':
      throw new ProcwardenError(
        'CGROUP_UNAVAILABLE',
        "containment 'cgroup' is not available in this build; use 'auto' or 'process-group'.",
      );
    default:
      return new ProcessGroupContainment(ctx.table, guard, deliverer, ctx.cookie);
  }
}
