import { ProcwardenError } from '../errors.js';
import { BlindTable } from './blind.js';
import { ProcfsTable } from './procfs.js';
import { procfsProblem } from './procfs-check.js';
import { PsTable } from './ps.js';
import { type CommandRunner, execRunner } from './runner.js';
import type { ProcessTable } from './types.js';

export { isWindowsTable, type WindowsSnapshot, WindowsTable, type WindowsTableOptions } from './windows.js';

import { WindowsTable } from './windows.js';

export { BLIND_START, BlindTable, exists, isBlindTable, refuseBlind } from './blind.js';
export { type BatchSweepTable, CoalescingTable } from './coalescing.js';
export { liveThreadOf, ProcfsTable, parseStat, processOfStat, ticksNow } from './procfs.js';
export { procfsProblem } from './procfs-check.js';
export { PsTable, parsePs } from './ps.js';
export { ancestorsOf, descendantsOf, indexOf, parentsFirst, type SnapshotIndex } from './relations.js';
export { type CommandResult, type CommandRunner, execRunner } from './runner.js';
export { SnapshotTable } from './snapshot.js';
export { type TerminalReader, terminalReader } from './tty-reader.js';
export {
  type EnvQuery,
  isGone,
  isProcessId,
  MAX_PID,
  type ProcessInfo,
  type ProcessTable,
  type Sweep,
  sameProcess,
  stillAlive,
} from './types.js';

type TableFactory = (runner: CommandRunner) => ProcessTable;

/** A /proc that does not describe our PID namespace gives no identity at all: a blind table stands in. */
const procfs: TableFactory = () => {
  const problem = procfsProblem();
  return problem ? new BlindTable(problem) : new ProcfsTable();
};
const ps: TableFactory = (runner) => new PsTable(runner);

/** One entry per platform; a new platform is a new entry (and a new file), not a new branch. */
const TABLES: Partial<Record<NodeJS.Platform, TableFactory>> = {
  linux: procfs,
  android: procfs,
  win32: (runner) => new WindowsTable({ runner }),
  darwin: ps,
  freebsd: ps,
  openbsd: ps,
  netbsd: ps,
  sunos: ps,
  aix: ps,
};

/** The process table of the platform we run on (or of `platform`, with `runner` for its commands). */
export function platformTable(
  platform: NodeJS.Platform = process.platform,
  runner = execRunner,
): ProcessTable {
  const make = TABLES[platform];
  if (!make) {
    throw new ProcwardenError(
      'UNSUPPORTED_PLATFORM',
      `procwarden cannot read the process table on '${platform}' yet; supported: ${Object.keys(TABLES).join(', ')}.`,
    );
  }
  return make(runner);
}
