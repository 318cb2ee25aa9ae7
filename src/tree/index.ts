import { ProcfsTable } from './procfs.js';
import type { ProcessTable } from './types.js';

export { ProcfsTable, parseStat } from './procfs.js';
export { ancestorsOf, descendantsOf, indexTable, type TableIndex } from './relations.js';
export { type CommandResult, type CommandRunner, execRunner } from './runner.js';
export { type EnvSearch, isGone, type ProcessInfo, type ProcessTable, sameProcess } from './types.js';

/** The process table of the platform we run on. */
export function platformTable(): ProcessTable {
  return new ProcfsTable();
}
