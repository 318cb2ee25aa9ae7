import type { RunResult } from '../types.js';
import type { Paint } from './colour.js';
import { formatMs, processes, sigkillRefused, sigkillSent } from './format.js';
import { TERMINAL_SIGNALS } from './signals.js';

export interface StopContext {
  timeoutMs: number;
  idleTimeoutMs: number;
  graceMs: number;
  /** The signal procwarden itself received, when that is what stopped the run. */
  received: NodeJS.Signals | null;
  /** The run's graceful signal (--signal): what a member that ignores a passed-on signal got instead. */
  killSignal: NodeJS.Signals;
}

function why(result: RunResult, ctx: StopContext): string | null {
  // A signal that came once the run had ended (`procwarden kill` signals the command and us at once:
  // the command died first and the run was over) stopped nothing: there is no stop to report. It
  // read "got SIGTERM, stopping the command" and no more, the run having no termination to tell.
  // The same when the stop came as the run was settling: no termination ran, so none is told.
  const endedAlone = result.tree.report === null && (result.exitSignal !== null || result.exitCode !== null);
  if (ctx.received && (result.reason === 'exit' || endedAlone)) {
    const ended = result.exitSignal ? `died of ${result.exitSignal}` : `exited ${result.exitCode}`;
    const left = result.tree.report && result.tree.report.signalled > 0 ? ' and left processes behind' : '';
    return `got ${ctx.received} after the command had ended (it ${ended}${left})`;
  }
  if (ctx.received) return `got ${ctx.received}, stopping the command`;
  switch (result.reason) {
    case 'overall-timeout':
      return `timed out after ${formatMs(ctx.timeoutMs)}`;
    case 'no-output-timeout':
      return `no output for ${formatMs(ctx.idleTimeoutMs)}`;
    case 'cancelled':
    case 'aborted':
    case 'shutdown':
      return result.detail ? `stopped (${result.detail})` : 'stopped';
    default: {
      const report = result.tree.report;
      if (!report || report.signalled === 0) return null;
      const ended = result.exitSignal ? `died of ${result.exitSignal}` : `exited ${result.exitCode}`;
      if (result.tree.held?.endedBy === 'hold-timeout')
        return `the command ${ended}; what it left was held for ${formatMs(result.tree.held.heldMs)}, the --hold-limit`;
      return `the command ${ended} and left ${processes(report.signalled)} behind`;
    }
  }
}

/**
 * The graceful signal and how many got it: "SIGTERM to 3 processes". A signal passed on from the
 * terminal goes to the members that heed it; those that ignore it (a shell's background jobs and
 * SIGINT) got the run's own: "SIGINT to 1 process, SIGTERM to 2 that ignore it". A member whose
 * first signal was a SIGKILL or a SIGSTOP (found in the chase after the grace) counts with the rest.
 */
function firstSignals(
  report: NonNullable<RunResult['tree']['report']>,
  passedOn: NodeJS.Signals | null,
  killSignal: NodeJS.Signals,
): string {
  const firsts = report.members.flatMap((m) => (m.signals[0] ? [m.signals[0].signal] : []));
  const main = passedOn ?? firsts[0] ?? 'a signal';
  const instead = passedOn && passedOn !== killSignal ? firsts.filter((s) => s === killSignal).length : 0;
  const heeded = report.signalled - instead;
  if (instead === 0) return `${main} to ${processes(heeded)}`;
  const ignoring = `${killSignal} to ${heeded > 0 ? instead : processes(instead)} that ignore${instead === 1 ? 's' : ''} ${main}`;
  return heeded > 0 ? `${main} to ${processes(heeded)}, ${ignoring}` : ignoring;
}

/**
 * The one human line printed when procwarden stopped a run (or cleaned up after it): why, what was
 * signalled, whether SIGKILL was needed, how long it took. Null when there is nothing to say.
 */
export function stopLine(result: RunResult, ctx: StopContext, paint: Paint): string | null {
  const reason = why(result, ctx);
  const report = result.tree.report;
  if (reason === null) return null;
  const parts = [reason];
  if (report && report.signalled > 0) {
    // Only when the passed-on signal began the sequence: one that came after a timeout began it
    // changed nothing (the first reason wins).
    const passedOn =
      ctx.received && TERMINAL_SIGNALS.includes(ctx.received) && result.reason === 'cancelled'
        ? ctx.received
        : null;
    parts.push(firstSignals(report, passedOn, ctx.killSignal));
    // "no SIGKILL needed" only when none was sent: a member that survived it was sent it too.
    const sent = sigkillSent(report);
    const grace = formatMs(report.graceUsedMs ?? ctx.graceMs);
    if (sent === 0) parts.push(sigkillRefused(report) ? 'SIGKILL could not be sent' : 'no SIGKILL needed');
    else if (sent === report.killed) parts.push(`${report.killed} needed SIGKILL after ${grace}`);
    else parts.push(`SIGKILL after ${grace} to ${sent}, ${report.killed} died of it`);
    parts.push(
      report.escaped > 0
        ? paint('red', `${report.escaped} could not be killed`)
        : `all gone in ${formatMs(report.durationMs)}`,
    );
  } else if (report) {
    parts.push('nothing was left to signal');
  }
  return `${paint('bold', paint('yellow', 'procwarden:'))} ${parts.join('; ')}`;
}
