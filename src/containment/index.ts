import { ProcwardenError } from '../errors.js';
import { Deliverer, Guard, type SendSignal } from '../kill/index.js';
import { isBlindTable, isWindowsTable, type ProcessTable } from '../tree/index.js';
import type { ContainmentMode } from '../types.js';
import { CgroupContainment } from './cgroup.js';
import type { CgroupHost } from './cgroup-host.js';
import { GroupOnlyContainment } from './group-only.js';
import { NoContainment } from './none.js';
import { ProcessGroupContainment } from './process-group.js';
import type { Containment } from './types.js';
import { WindowsTreeContainment } from './windows-tree.js';

export { CgroupContainment } from './cgroup.js';
export {
  type Cgroup2Mount,
  holdsUnidentified,
  isPopulated,
  isUnidentifiedMember,
  locateOwnCgroup,
  parseMountinfo,
  parseOwnCgroup,
  unidentifiedMember,
} from './cgroup-fs.js';
export { CgroupHost, type CgroupHostOptions, type CgroupProbe } from './cgroup-host.js';
export { clearParent, type ParentClearing, RUN_CGROUP, runCgroupsOf, supervisorOf } from './cgroup-parent.js';
export { type ScanOutcome, scanUntilSure } from './confirm-empty.js';
export { GroupOnlyContainment } from './group-only.js';
export { ROOT_READ_DELAY_MS, TreeMembership } from './membership.js';
export { NoContainment } from './none.js';
export { ProcessGroupContainment } from './process-group.js';
export { shimUnfaithful, throughShim } from './shim.js';
export type { Containment, LaunchPlan } from './types.js';
export { WindowsTreeContainment } from './windows-tree.js';

export interface ContainmentContext {
  table: ProcessTable;
  send?: SendSignal;
  cookie: string | null;
  /** The command starts in our own process group (RunSpec.inheritGroup): no group of its own to signal. */
  inheritGroup?: boolean;
  /** The run's id: names its cgroup. */
  name: string;
  /** The supervisor's cgroup host; without it cgroup containment is unavailable. */
  cgroups?: CgroupHost;
  /** Told the run's cgroup directory before it is created (the journal records it first). */
  beforeCgroup?: (dir: string) => void;
}

/** Picks the strategy for a requested mode. `auto` takes the strongest one this host offers. */
export function createContainment(mode: ContainmentMode, ctx: ContainmentContext): Containment {
  // No trustworthy process table: only what needs none (the group, the child) holds the run.
  if (isBlindTable(ctx.table)) {
    const group = mode !== 'none' && !ctx.inheritGroup;
    const held = group ? 'its process group and the child handle' : 'the child handle';
    return new GroupOnlyContainment(group, `${ctx.table.reason}: the run is held by ${held} only`);
  }
  const guard = new Guard();
  const deliverer = new Deliverer(ctx.table, guard, ctx.send);
  // Windows has no process groups or cgroups: whatever was asked short of 'cgroup', the tree is held by identity.
  if (isWindowsTable(ctx.table) && mode !== 'cgroup')
    return new WindowsTreeContainment(ctx.table, guard, ctx.send);
  // In our own group the command leads none: it is held by pid, as with 'none'.
  const processGroup = () =>
    ctx.inheritGroup
      ? new NoContainment(ctx.table, guard, deliverer, ctx.cookie)
      : new ProcessGroupContainment(ctx.table, guard, deliverer, ctx.cookie);
  const cgroup = () => {
    if (!ctx.cgroups) {
      throw new ProcwardenError(
        'CGROUP_UNAVAILABLE',
        "containment 'cgroup' needs a supervisor with cgroup support; use 'auto' or 'process-group'.",
      );
    }
    return new CgroupContainment(
      ctx.cgroups,
      ctx.name,
      ctx.table,
      guard,
      deliverer,
      ctx.cookie,
      ctx.beforeCgroup,
    );
  };
  switch (mode) {
    case 'none':
      return new NoContainment(ctx.table, guard, deliverer, ctx.cookie);
    case 'process-group':
      return processGroup();
    case 'cgroup':
      return cgroup();
    default: {
      if (!ctx.cgroups?.probe().ok) return processGroup();
      try {
        return cgroup();
      } catch (error) {
        // The probe said yes and creating the run's cgroup still failed: say so in the result.
        return Object.assign(processGroup(), { fallback: (error as Error).message });
      }
    }
  }
}
