import type { RunHandle, RunSpec } from '../types.js';
import { Supervisor } from './supervisor.js';

// The one piece of module state the design allows: the supervisor behind run().
let defaultSupervisor: Supervisor | undefined;

export function getDefaultSupervisor(): Supervisor {
  defaultSupervisor ??= new Supervisor();
  return defaultSupervisor;
}

/** Runs a command under the default Supervisor. */
export function run(spec: RunSpec): RunHandle {
  return getDefaultSupervisor().spawn(spec);
}
