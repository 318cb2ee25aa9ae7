export { type Clock, realClock } from './clock.js';
export { isProcwardenError, ProcwardenError, type ProcwardenErrorCode } from './errors.js';
export {
  defaultStateDir,
  type JournalProblem,
  type ReapAction,
  type ReapedRun,
  type ReapOptions,
  type ReapReport,
  reap,
} from './journal/index.js';
export { type TerminateTreeOptions, terminateTree } from './kill/index.js';
export * from './live/index.js';
export { parseDuration } from './options/index.js';
export {
  getDefaultSupervisor,
  run,
  type SignalHandlerOptions,
  Supervisor,
  TERMINATING_SIGNALS,
} from './supervisor/index.js';
export type * from './types.js';
