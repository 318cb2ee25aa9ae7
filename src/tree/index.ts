import { ProcfsTable } from './procfs.js';
import type { ProcessTable } from './types.js';
import { WindowsTable } from './windows.js';

export { type BatchEnvTable, CoalescingTable } from './coalescing.js';
export { ProcfsTable, parseStat } from './procfs.js';
export { ancestorsOf, descendantsOf } from './relations.js';
export { type CommandResult, type CommandRunner, execRunner } from './runner.js';
export { SnapshotTable } from './snapshot.js';
export { isGone, type ProcessInfo, type ProcessTable, sameProcess } from './types.js';
export { isWindowsTable, type WindowsSnapshot, WindowsTable, type WindowsTableOptions } from './windows.js';

/** The process table of the platform we run on. */
export function platformTable(): ProcessTable {
  // The one place that asks which OS this is: the Windows kill path follows from the table.
  if (process.platform === 'win32') return new WindowsTable();
  return new ProcfsTable();
}
