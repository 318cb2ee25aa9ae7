/** The on-disk shape of one run's ownership record. `format` tells our files from foreign ones. */
export const RECORD_FORMAT = 'procwarden.run/1';

export interface RunRecord {
  format: typeof RECORD_FORMAT;
  supervisorId: string;
  supervisorPid: number;
  /** Opaque start time of the supervisor process; null when it could not be read (no /proc). */
  supervisorStart: string | null;
  /**
   * The supervisor's pid namespace (`pid:[inode]`), null where there is none to read (no /proc).
   * Absent from records written before it existed: those are judged only by the pid namespace
   * they must have come from (see reap's judge).
   */
  supervisorPidNamespace?: string | null;
  /**
   * The supervisor's time namespace (`time:[inode]`), null where there is none to read. Start
   * times in the record are as /proc showed them there: a reaper in another time namespace reads
   * them shifted. Absent from records written before it existed.
   */
  supervisorTimeNamespace?: string | null;
  runId: string;
  /** Null until the command has been launched: the record is written before the spawn. */
  pid: number | null;
  pidStart: string | null;
  /** The run's own process group (process-group containment), null when it has none. */
  pgid: number | null;
  /** Value of PROCWARDEN_RUN in the run's environment, null when the cookie is off. */
  cookie: string | null;
  cgroupPath: string | null;
  /** Epoch milliseconds. */
  startedAt: number;
  killSignal: string;
  graceMs: number;
  command: string;
  /**
   * Written once the run's termination had sent its first signal (a cancel, a timeout): a watchdog
   * or reap that takes over goes on from there instead of starting again.
   */
  stopping?: StoppingRecord;
}

export interface StoppingRecord {
  signal: string;
  /** Epoch milliseconds of the first signal: the grace ends `graceMs` after it. */
  atMs: number;
  graceMs: number;
  /**
   * The members that signal reached, as `pid@start time` (at most MAX_SIGNALLED: the rest, if
   * any, get it again): a watchdog taking over does not signal them a second time.
   */
  signalled: string[];
  /**
   * The process table's clock (Linux: clock ticks since boot, as start times are) just before the
   * first signal. A member not in `signalled` that started at or after it was forked while the tree
   * ended: the host would not have signalled it, and a guard taking over does not either.
   */
  bornFrom?: string;
}

export const MAX_SIGNALLED = 1000;

const RUN_ID = /^[A-Za-z0-9_.-]{1,200}$/;
const PID_NAMESPACE = /^pid:\[\d{1,20}\]$/;
const TIME_NAMESPACE = /^time:\[\d{1,20}\]$/;

/**
 * A run has up to three files: the record written before the spawn, the one with its pid, and the
 * one written once its termination had begun (`stopping`). Each
 * goes to a new name, never over an existing file: on ext4 a rename that replaces a file forces the
 * new data to disk first (auto_da_alloc), about 4 ms here against 0.1 ms for a fresh name.
 */
export function recordFileNames(runId: string): { launch: string; pid: string; stop: string } {
  return { launch: `${runId}.json`, pid: `${runId}.pid.json`, stop: `${runId}.stop.json` };
}

/** Parses a record; returns why it is not one of ours instead of throwing. */
export function parseRecord(text: string): RunRecord | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'not valid JSON';
  }
  if (typeof value !== 'object' || value === null) return 'not a JSON object';
  const r = value as Record<string, unknown>;
  if (r.format !== RECORD_FORMAT) return `unknown format ${JSON.stringify(r.format)}`;
  const problems: string[] = [];
  const int = (k: string, nullable: boolean) => {
    const v = r[k];
    if (nullable && v === null) return;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) problems.push(k);
  };
  const str = (k: string, nullable: boolean) => {
    const v = r[k];
    if (nullable && v === null) return;
    if (typeof v !== 'string' || v === '') problems.push(k);
  };
  int('supervisorPid', false);
  int('pid', true);
  int('pgid', true);
  int('startedAt', false);
  str('supervisorId', false);
  str('supervisorStart', true);
  str('pidStart', true);
  str('cookie', true);
  str('cgroupPath', true);
  str('killSignal', false);
  str('command', false);
  if (typeof r.runId !== 'string' || !RUN_ID.test(r.runId)) problems.push('runId');
  if (typeof r.graceMs !== 'number' || !(r.graceMs >= 0)) problems.push('graceMs');
  if (r.stopping !== undefined && !isStopping(r.stopping)) problems.push('stopping');
  const ns = r.supervisorPidNamespace;
  if (ns !== undefined && ns !== null && (typeof ns !== 'string' || !PID_NAMESPACE.test(ns)))
    problems.push('supervisorPidNamespace');
  const timeNs = r.supervisorTimeNamespace;
  if (timeNs !== undefined && timeNs !== null && (typeof timeNs !== 'string' || !TIME_NAMESPACE.test(timeNs)))
    problems.push('supervisorTimeNamespace');
  if (problems.length > 0) return `invalid field(s): ${problems.join(', ')}`;
  return r as unknown as RunRecord;
}

function isStopping(v: unknown): v is StoppingRecord {
  if (typeof v !== 'object' || v === null) return false;
  const s = v as Record<string, unknown>;
  return (
    typeof s.signal === 'string' &&
    s.signal !== '' &&
    typeof s.atMs === 'number' &&
    Number.isFinite(s.atMs) &&
    typeof s.graceMs === 'number' &&
    s.graceMs >= 0 &&
    Array.isArray(s.signalled) &&
    s.signalled.length <= MAX_SIGNALLED &&
    s.signalled.every((k) => typeof k === 'string' && /^\d{1,10}@[^\s@]{1,64}$/.test(k)) &&
    (s.bornFrom === undefined || (typeof s.bornFrom === 'string' && /^\d{1,20}$/.test(s.bornFrom)))
  );
}
