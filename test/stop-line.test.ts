import { describe, expect, it } from 'vitest';
import { painter } from '../src/cli/colour.js';
import { stopLine } from '../src/cli/stop-line.js';
import type { RunResult, TerminateReport } from '../src/types.js';

const ctx = { timeoutMs: 2000, idleTimeoutMs: 0, graceMs: 1000, received: null };

function timedOut(report: TerminateReport): RunResult {
  return {
    id: 'pw-test-1',
    reason: 'overall-timeout',
    exitCode: null,
    exitSignal: 'SIGKILL',
    timedOut: true,
    escalated: report.escalated,
    durationMs: 4000,
    stdout: { text: '', bytes: 0, truncated: false },
    stderr: { text: '', bytes: 0, truncated: false },
    tree: {
      signalled: report.signalled,
      killed: report.killed,
      escaped: report.escaped,
      leftovers: 0,
      report,
    },
  } as unknown as RunResult;
}

describe('stopLine', () => {
  // Seen as PID 1 of `unshare --pid --fork` (no --mount-proc): the group keeps an unreapable zombie,
  // SIGKILL is sent again and again, the member is reported escaped, and the line said
  // "no SIGKILL needed; 1 could not be killed".
  it('never says "no SIGKILL needed" when SIGKILL was sent to a member that survived it', () => {
    const report: TerminateReport = {
      members: [
        {
          pid: 12,
          command: '',
          signals: [
            { signal: 'SIGTERM', atMs: 9 },
            { signal: 'SIGKILL', atMs: 1010 },
            { signal: 'SIGKILL', atMs: 1016 },
          ],
          outcome: 'escaped',
        },
      ],
      signalled: 1,
      killed: 0,
      escaped: 1,
      escalated: true,
      durationMs: 4018,
      graceUsedMs: 1001,
      notes: [],
    };
    const line = stopLine(timedOut(report), ctx, painter(false));
    expect(line).not.toContain('no SIGKILL needed');
    expect(line).toBe(
      'procwarden: timed out after 2 s; SIGTERM to 1 process; SIGKILL after 1 s to 1, 0 died of it; 1 could not be killed',
    );
  });

  it('says "no SIGKILL needed" when none was sent', () => {
    const report: TerminateReport = {
      members: [
        { pid: 12, command: 'sh', signals: [{ signal: 'SIGTERM', atMs: 9 }], outcome: 'exited-in-grace' },
      ],
      signalled: 1,
      killed: 0,
      escaped: 0,
      escalated: false,
      durationMs: 30,
      graceUsedMs: null,
      notes: [],
    };
    expect(stopLine(timedOut(report), ctx, painter(false))).toBe(
      'procwarden: timed out after 2 s; SIGTERM to 1 process; no SIGKILL needed; all gone in 30 ms',
    );
  });
});
