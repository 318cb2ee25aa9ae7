export { type Clock, realClock } from './clock.js';
export { isProcwardenError, ProcwardenError, type ProcwardenErrorCode } from './errors.js';
export { type TerminateTreeOptions, terminateTree } from './kill/index.js';
export * from './live/index.js';
export { parseDuration } from './spec/index.js';
export { getDefaultSupervisor, run, Supervisor } from './supervisor/index.js';
export type * from './types.js';
