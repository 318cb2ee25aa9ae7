import { ProcwardenError } from '../errors.js';
import type { CommandRunner } from '../tree/index.js';
import { systemExecutable } from '../tree/windows-system.js';

export interface TaskkillRequest {
  pid: number;
  /** /T: the process and every process that names it (transitively) as parent. */
  tree: boolean;
  /** /F: TerminateProcess. Without it taskkill asks politely (WM_CLOSE to the process's windows). */
  force: boolean;
}

export type TaskkillOutcome =
  /** Exit 0: every process it addressed was signalled or ended. */
  | 'ok'
  /** Exit 255: part of a /T tree was handled; `confirmed` lists the pids it reported. */
  | 'partial'
  /** Exit 128: no process has that pid (it exited). */
  | 'not-found'
  /** Exit 1, "can only be terminated forcefully": a windowless (console) process; only /F ends it. */
  | 'needs-force'
  /** Exit 1, "Access is denied": another user's or a protected process. */
  | 'denied'
  /** taskkill.exe could not be started at all (ENOENT...). */
  | 'unavailable'
  | 'failed';

export interface TaskkillResult {
  request: TaskkillRequest;
  outcome: TaskkillOutcome;
  /** Pids taskkill printed a SUCCESS line for (English output only; empty when localised). */
  confirmed: number[];
  /** What happened, for the report; null when it went as asked. */
  note: string | null;
}

/**
 * taskkill.exe, always by absolute path under %SystemRoot% (never through PATH), with arguments
 * as an array (no shell), and a pid that is a positive integer before it reaches a command line.
 */
export class Taskkill {
  readonly path: string;

  constructor(
    private readonly runner: CommandRunner,
    env: NodeJS.ProcessEnv,
  ) {
    this.path = systemExecutable(env, 'System32', 'taskkill.exe');
  }

  static args(request: TaskkillRequest): string[] {
    const { pid } = request;
    if (!Number.isSafeInteger(pid) || pid <= 0) {
      throw new ProcwardenError('INVALID_PID', `refusing to pass pid ${String(pid)} to taskkill.`);
    }
    return ['/PID', String(pid), ...(request.tree ? ['/T'] : []), ...(request.force ? ['/F'] : [])];
  }

  async run(request: TaskkillRequest): Promise<TaskkillResult> {
    const result = await this.runner(this.path, Taskkill.args(request));
    const confirmed = successPids(result.stdout);
    const label = `taskkill ${Taskkill.args(request).join(' ')}`;
    const reason = firstError(result.stderr);
    const done = (outcome: TaskkillOutcome, note: string | null): TaskkillResult => ({
      request,
      outcome,
      confirmed,
      note,
    });
    if (result.code === null) {
      const code = result.error?.code ?? result.error?.message ?? 'unknown error';
      return done('unavailable', `${label}: ${this.path} could not be run (${code})`);
    }
    switch (result.code) {
      case 0:
        return done('ok', null);
      case 128:
        return done('not-found', `${label}: exit 128, no such process (it exited first)`);
      case 255:
        return done('partial', `${label}: exit 255, only part of the tree was reached (${reason})`);
      case 1:
        if (/forcefully|\/F\b/i.test(result.stderr)) {
          return done(
            'needs-force',
            `${label}: exit 1, the process has no window to close; Windows can end it only by force`,
          );
        }
        if (/denied/i.test(result.stderr)) {
          return done(
            'denied',
            `${label}: exit 1, access denied (another user's or a protected process; run elevated to end it)`,
          );
        }
        return done('failed', `${label}: exit 1 (${reason})`);
      default:
        return done('failed', `${label}: exit ${result.code} (${reason})`);
    }
  }
}

/**
 * The pids taskkill reports as reached: it writes a line per success on stdout (its errors go to
 * stderr), in the display language ("SUCCESS: ... PID 42000, child of PID 41000", "ERFOLGREICH: ...
 * mit der PID 42000 (untergeordneter Prozess von PID 41000)"): the first pid named on each line.
 */
function successPids(stdout: string): number[] {
  const out: number[] = [];
  for (const line of stdout.split(/\r?\n/)) {
    const m = /\bPID\s+(\d+)/.exec(line);
    if (m) out.push(Number(m[1]));
  }
  return out;
}

function firstError(stderr: string): string {
  const lines = stderr
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);
  return (lines.find((l) => /^Reason:/i.test(l)) ?? lines[0] ?? 'no message').slice(0, 200);
}
