import { isProcwardenError } from '../errors.js';
import { terminateTree } from '../kill/index.js';
import { normalizeSignal, parseDuration } from '../options/index.js';
import { isBlindTable, type ProcessTable, platformTable } from '../tree/index.js';
import type { MemberReport, TerminateReport } from '../types.js';
import { parseOptions, parsePid, UsageError } from './args.js';
import { painter, useColour } from './colour.js';
import { distinctRoots } from './distinct-roots.js';
import { EXIT_FAILURE, EXIT_USAGE } from './exit-codes.js';
import { formatMs, printable, processes, sigkillRefused, sigkillSent } from './format.js';
import { KILL_HELP } from './help.js';
import { platformDetails } from './proc-details.js';
import { writeNow } from './write-now.js';

const OPTIONS = {
  grace: { type: 'string' },
  signal: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export type Outcome =
  | { pid: number; report: TerminateReport }
  | { pid: number; error: { code: string; message: string } };

function usage<T>(make: () => T): T {
  try {
    return make();
  } catch (error) {
    if (isProcwardenError(error)) throw new UsageError(error.message, EXIT_USAGE);
    throw error;
  }
}

const OUTCOME_TEXT: Record<MemberReport['outcome'], string> = {
  'gone-before-signal': 'already gone',
  'exited-in-grace': 'exited in the grace',
  killed: 'killed',
  escaped: 'SURVIVED SIGKILL',
};

/**
 * Targets no signal can end are refused before any is sent, once and plainly: a kernel thread, and
 * a process we may not signal (EPERM does not go away by retrying for the SIGKILL bound).
 */
function refusal(pid: number, table: ProcessTable | null): Outcome | null {
  // A /proc of another PID namespace describes another process by this number: terminateTree
  // refuses the blind table, and says why.
  if (!table || isBlindTable(table)) return null;
  if (platformDetails().kernelThread(pid)) {
    return {
      pid,
      error: {
        code: 'KERNEL_THREAD',
        message: `pid ${pid} is a kernel thread: the kernel runs it and no signal can end it; nothing was sent.`,
      },
    };
  }
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EPERM') {
      return {
        pid,
        error: {
          code: 'NOT_PERMITTED',
          message: `not permitted to signal pid ${pid}: run as the process's owner or root; nothing was sent.`,
        },
      };
    }
  }
  return null;
}

function tableOrNull(): ProcessTable | null {
  try {
    return platformTable();
  } catch (error) {
    if (isProcwardenError(error)) return null;
    throw error;
  }
}

/** Whatever got SIGKILL is said so: "no SIGKILL needed" only when none was sent. */
function sigkillText(report: TerminateReport): string {
  const sent = sigkillSent(report);
  // None reached a survivor that was due one: it was not ours to signal (EPERM).
  if (sent === 0) return sigkillRefused(report) ? 'SIGKILL could not be sent' : 'no SIGKILL needed';
  if (sent === report.killed) return `${report.killed} needed SIGKILL`;
  return `SIGKILL sent to ${sent}, ${report.killed} died of it`;
}

/** Each distinct note once, with how often it came (a retried signal fails the same way each time). */
function countSame(notes: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const note of notes) counts.set(note, (counts.get(note) ?? 0) + 1);
  return counts;
}

/** The text report of one PID: a summary line, a row per member, the notes. */
export function describeOutcome(outcome: Outcome, paint: ReturnType<typeof painter>): string {
  if ('error' in outcome)
    return `${paint('red', `pid ${outcome.pid}:`)} ${printable(outcome.error.message)}\n`;
  const { report } = outcome;
  const root = report.members.find((m) => m.pid === outcome.pid);
  const head = [
    `pid ${outcome.pid}${root ? ` (${printable(root.command)})` : ''}: ${processes(report.signalled)} signalled`,
    sigkillText(report),
    report.escaped > 0
      ? paint('red', `${report.escaped} survived`)
      : `all gone in ${formatMs(report.durationMs)}`,
  ].join('; ');
  const rows = report.members.map((m) => {
    const got = m.signals.map((s) => `${s.signal} +${s.atMs}ms`).join(', ');
    // Escaped without our SIGKILL reaching it: it was refused (see the notes), not survived.
    const refused = m.outcome === 'escaped' && !m.signals.some((s) => s.signal === 'SIGKILL');
    const outcome = refused ? 'NOT PERMITTED' : OUTCOME_TEXT[m.outcome];
    return `  ${String(m.pid).padStart(7)}  ${printable(m.command).padEnd(16)}  ${got.padEnd(30)}  ${outcome}`;
  });
  const notes = [...countSame(report.notes)].map(
    ([n, times]) => `  note: ${printable(n)}${times > 1 ? ` (×${times})` : ''}`,
  );
  return `${[head, ...rows, ...notes].join('\n')}\n`;
}

/**
 * Ends the trees of the given pids in parallel, each pid once: those another covers (see
 * distinctRoots) are ended with it. One whose covering root could not be ended (it exited between
 * the look that dropped the pid and its own termination) is in no report: it is taken up in the
 * next round, with the rest of those. Outcomes come in the order the pids were given.
 */
export async function endTrees(
  given: readonly number[],
  refusalOf: (pid: number) => Outcome | null,
  distinct: (pids: readonly number[]) => Promise<number[]>,
  end: (pid: number) => Promise<Outcome>,
  processOf: (pid: number) => number,
): Promise<Outcome[]> {
  const outcomes = given.map(refusalOf).filter((o) => o !== null);
  let pending = given.filter((pid) => refusalOf(pid) === null);
  // Read before any signal: a thread's process cannot be read once it is gone.
  const owners = new Map(pending.map((pid) => [pid, processOf(pid)]));
  while (pending.length > 0) {
    const found = await distinct(pending);
    // Never none, or the loop would not end: a listing that covered every pid proves nothing.
    const roots = new Set(found.length > 0 ? found : pending);
    const round = await Promise.all([...roots].map(end));
    outcomes.push(...round);
    const ended = new Set(round.flatMap((o) => ('report' in o ? o.report.members.map((m) => m.pid) : [])));
    pending = pending.filter((pid) => !roots.has(pid) && !ended.has(owners.get(pid) ?? pid));
  }
  return outcomes.sort((a, b) => given.indexOf(a.pid) - given.indexOf(b.pid));
}

export async function killCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseOptions(args, OPTIONS, EXIT_USAGE);
  if (values.help) {
    writeNow(1, KILL_HELP);
    return 0;
  }
  if (positionals.length === 0) throw new UsageError('missing PID; e.g. procwarden kill 4242', EXIT_USAGE);
  const pids = positionals.map((text) => parsePid(text, EXIT_USAGE));
  const graceMs = usage(() => (values.grace !== undefined ? parseDuration(values.grace, '--grace') : 5000));
  const signal = usage(() => normalizeSignal(values.signal ?? 'SIGTERM', '--signal'));

  // In parallel: each tree's grace runs at the same time, so N trees take one grace, not N.
  // Unsupported here: each pid's termination says so.
  const table = tableOrNull();
  const given = [...new Set(pids)];
  const refusals = new Map(given.map((pid) => [pid, refusal(pid, table)]));
  // One covered by another given pid (its thread, its descendant) is ended with that one's tree.
  const outcomes = await endTrees(
    given,
    (pid) => refusals.get(pid) ?? null,
    (pids) => distinctRoots(pids, table),
    async (pid): Promise<Outcome> => {
      try {
        return { pid, report: await terminateTree(pid, { graceMs, signal }) };
      } catch (error) {
        if (!isProcwardenError(error)) throw error;
        return { pid, error: { code: error.code, message: error.message } };
      }
    },
    (pid) => table?.processOf?.(pid) ?? pid,
  );

  if (values.json) {
    writeNow(1, `${JSON.stringify(outcomes, null, 2)}\n`);
  } else {
    const paint = painter(useColour(process.stdout));
    // write(2), as every other report of ours: a failed write (ENOSPC) is "write error", status 1.
    for (const o of outcomes) writeNow('error' in o ? 2 : 1, describeOutcome(o, paint));
  }
  const failed = outcomes.some((o) => 'error' in o || o.report.escaped > 0);
  return failed ? EXIT_FAILURE : 0;
}
