import type { RunResult } from '../types.js';
import type { Paint } from './colour.js';
import { formatMs, processes, sigkillRefused, sigkillSent } from './format.js';

export interface StopContext {
  timeoutMs: number;
  idleTimeoutMs: number;
  graceMs: number;
  /** The signal procwarden itself received, when that is what stopped the run. */
  received: NodeJS.Signals | null;
}

function why(result: RunResult, ctx: StopContext): string | null {
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
      return `the command ${ended} and left ${processes(report.signalled)} behind`;
    }
  }
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
    const first = report.members.find((m) => m.signals.length > 0)?.signals[0]?.signal ?? 'a signal';
    parts.push(`${first} to ${processes(report.signalled)}`);
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
