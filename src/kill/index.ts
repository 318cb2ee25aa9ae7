export { Deliverer, type Delivery, defaultSend, type SendSignal } from './deliver.js';
export { Guard } from './guard.js';
export { HostGuards, isGuardOf } from './host-guards.js';
export { Taskkill, type TaskkillOutcome, type TaskkillRequest, type TaskkillResult } from './taskkill.js';
export {
  type KillTarget,
  type MemberScan,
  type Members,
  type TerminatePlan,
  terminate,
  unconfirmed,
} from './terminate.js';
export { signalTree, type TerminateTreeOptions, terminateTree } from './tree.js';
export { type ChildHandle, type WindowsTargetOptions, WindowsTreeTarget } from './windows-target.js';
