import { existsSync, readdirSync } from 'node:fs';
import { isProcwardenError } from '../errors.js';
import { checkStateDir, fallbackDirs, type ReapedRun, type ReapReport, reap } from '../journal/index.js';
import { parseDuration } from '../options/index.js';
import { parseOptions, UsageError } from './args.js';
import { EXIT_FAILURE, EXIT_USAGE } from './exit-codes.js';
import { printable, processes } from './format.js';
import { REAP_HELP } from './help.js';
import { writeNow } from './write-now.js';

const OPTIONS = {
  'dry-run': { type: 'boolean' },
  json: { type: 'boolean' },
  grace: { type: 'string' },
  'state-dir': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const ACTION_TEXT: Record<ReapedRun['action'], string> = {
  reaped: 'reaped',
  'would-reap': 'would reap',
  'supervisor-alive': 'left alone (its supervisor is alive)',
  'not-judged': 'NOT JUDGED (whether its supervisor lives cannot be told from here; record kept)',
  claimed: 'left to the reaper already ending it',
  incomplete: 'INCOMPLETE (its end did not complete; record kept)',
  refused: "REFUSED in part (the record names what reap cannot prove is the run's; record kept)",
};

/** The text report; what a member could name (its command, a cgroup's name in a note) is printable. */
export function describeReap(report: ReapReport): string {
  const lines = [`journal: ${report.stateDir}${report.dryRun ? ' (dry run: nothing was signalled)' : ''}`];
  // A mistyped --state-dir is told from a clean journal.
  if (report.runs.length === 0)
    lines.push(
      existsSync(report.stateDir) ? 'no runs recorded' : 'no runs recorded (the directory does not exist)',
    );
  for (const run of report.runs) {
    const untouched =
      run.action === 'supervisor-alive' || run.action === 'not-judged' || run.action === 'claimed';
    const tree = untouched ? '' : `; ${processes(run.members.length)} left`;
    const killed = run.killed > 0 ? `, ${run.killed} needed SIGKILL` : '';
    lines.push(
      `${run.runId} (supervisor pid ${run.supervisorPid}): ${ACTION_TEXT[run.action]}${tree}${killed}`,
    );
    for (const m of run.members) lines.push(`  ${String(m.pid).padStart(7)}  ${printable(m.command)}`);
    for (const note of run.notes) lines.push(`  note: ${printable(note)}`);
    for (const why of run.refused) lines.push(`  refused: ${printable(why)}`);
  }
  for (const s of report.skipped) lines.push(`skipped ${printable(s.file)}: ${printable(s.problem)}`);
  return `${lines.join('\n')}\n`;
}

/** procwarden reap: ends what is left of the runs of supervisors that died (crash, SIGKILL). */
export async function reapCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseOptions(args, OPTIONS, EXIT_USAGE);
  if (values.help) {
    writeNow(1, REAP_HELP);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`, EXIT_USAGE);
  let graceMs: number | undefined;
  let stateDir: string | undefined;
  try {
    graceMs = values.grace === undefined ? undefined : parseDuration(values.grace, '--grace');
    stateDir =
      values['state-dir'] === undefined ? undefined : checkStateDir(values['state-dir'], '--state-dir');
  } catch (error) {
    if (isProcwardenError(error)) throw new UsageError(error.message, EXIT_USAGE);
    throw error;
  }
  const report = await reap({
    dryRun: values['dry-run'] === true,
    ...(stateDir !== undefined ? { stateDir } : {}),
    ...(graceMs !== undefined ? { graceMs } : {}),
  });
  writeNow(1, values.json ? `${JSON.stringify(report, null, 2)}\n` : describeReap(report));
  // Records a supervisor wrote elsewhere because its state directory took none: named, not read.
  if (stateDir === undefined)
    for (const dir of fallbackDirs().filter((d) => d !== report.stateDir && holdsRecords(d)))
      writeNow(
        2,
        `procwarden reap: records also in ${printable(dir)}: procwarden reap --state-dir ${printable(dir)}\n`,
      );
  return failed(report) ? EXIT_FAILURE : 0;
}

function holdsRecords(dir: string): boolean {
  try {
    return readdirSync(dir).some((name) => name.endsWith('.json'));
  } catch {
    return false;
  }
}

/**
 * Non-zero when anything may be left behind: survivors, a run whose end did not complete (a
 * cgroup that could not be removed), a record that could not be judged from here, a journal (or
 * record) that could not be read, one that was not trusted, or a record naming what reap would not
 * touch. Foreign and corrupt files in a trusted directory are only reported. A run another live
 * reaper is ending is that reaper's to report.
 */
function failed(report: ReapReport): boolean {
  return (
    report.survivors > 0 ||
    report.runs.some((r) => r.action === 'incomplete' || r.action === 'not-judged') ||
    report.skipped.some((s) => s.kind === 'untrusted' || s.kind === 'unreadable') ||
    report.runs.some((r) => r.refused.length > 0)
  );
}
