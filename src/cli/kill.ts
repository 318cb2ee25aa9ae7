import { isProcwardenError } from '../errors.js';
import { terminateTree } from '../kill/index.js';
import { normalizeSignal, parseDuration } from '../options/index.js';
import type { MemberReport, TerminateReport } from '../types.js';
import { parseOptions, UsageError } from './args.js';
import { painter, useColour } from './colour.js';
import { EXIT_FAILURE, EXIT_USAGE } from './exit-status.js';
import { formatMs, processes } from './format.js';
import { KILL_HELP } from './help.js';

const OPTIONS = {
  grace: { type: 'string' },
  signal: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Outcome =
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

function parsePid(text: string): number {
  if (!/^\d+$/.test(text) || Number(text) === 0) {
    throw new UsageError(`'${text}' is not a process id; give positive whole numbers`, EXIT_USAGE);
  }
  return Number(text);
}

const OUTCOME_TEXT: Record<MemberReport['outcome'], string> = {
  'gone-before-signal': 'already gone',
  'exited-in-grace': 'exited in the grace',
  killed: 'killed',
  escaped: 'SURVIVED SIGKILL',
};

function describe(outcome: Outcome, paint: ReturnType<typeof painter>): string {
  if ('error' in outcome) return `${paint('red', `pid ${outcome.pid}:`)} ${outcome.error.message}\n`;
  const { report } = outcome;
  const root = report.members.find((m) => m.pid === outcome.pid);
  const head = [
    `pid ${outcome.pid}${root ? ` (${root.command})` : ''}: ${processes(report.signalled)} signalled`,
    report.killed > 0 ? `${report.killed} needed SIGKILL` : 'no SIGKILL needed',
    report.escaped > 0
      ? paint('red', `${report.escaped} survived`)
      : `all gone in ${formatMs(report.durationMs)}`,
  ].join('; ');
  const rows = report.members.map((m) => {
    const got = m.signals.map((s) => `${s.signal} +${s.atMs}ms`).join(', ');
    return `  ${String(m.pid).padStart(7)}  ${m.command.padEnd(16)}  ${got.padEnd(30)}  ${OUTCOME_TEXT[m.outcome]}`;
  });
  const notes = report.notes.map((n) => `  note: ${n}`);
  return `${[head, ...rows, ...notes].join('\n')}\n`;
}

export async function killCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseOptions(args, OPTIONS, EXIT_USAGE);
  if (values.help) {
    process.stdout.write(KILL_HELP);
    return 0;
  }
  if (positionals.length === 0) throw new UsageError('missing PID; e.g. procwarden kill 4242', EXIT_USAGE);
  const pids = positionals.map(parsePid);
  const graceMs = usage(() => (values.grace ? parseDuration(values.grace, '--grace') : 5000));
  const signal = usage(() => normalizeSignal(values.signal ?? 'SIGTERM', '--signal'));

  // In parallel: each tree's grace runs at the same time, so N trees take one grace, not N.
  const outcomes: Outcome[] = await Promise.all(
    [...new Set(pids)].map(async (pid): Promise<Outcome> => {
      try {
        return { pid, report: await terminateTree(pid, { graceMs, signal }) };
      } catch (error) {
        if (!isProcwardenError(error)) throw error;
        return { pid, error: { code: error.code, message: error.message } };
      }
    }),
  );

  if (values.json) {
    process.stdout.write(`${JSON.stringify(outcomes, null, 2)}\n`);
  } else {
    const paint = painter(useColour(process.stdout));
    for (const o of outcomes) ('error' in o ? process.stderr : process.stdout).write(describe(o, paint));
  }
  const failed = outcomes.some((o) => 'error' in o || o.report.escaped > 0);
  return failed ? EXIT_FAILURE : 0;
}
