export { getDefaultSupervisor, run } from './default.js';
export { ManagedRun, type RunDeps } from './managed-run.js';
export { Supervisor, type SupervisorInternals } from './supervisor.js';
