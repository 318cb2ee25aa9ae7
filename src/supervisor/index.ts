export { getDefaultSupervisor, run } from './default.js';
export { ManagedRun, type RunDeps } from './managed-run.js';
export type { LogSlice } from './run-log.js';
export { type SignalHandlerOptions, stopListening, TERMINATING_SIGNALS } from './signals.js';
export { Supervisor, type SupervisorInternals } from './supervisor.js';
