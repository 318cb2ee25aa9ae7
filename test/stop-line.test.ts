import { describe, expect, it } from 'vitest';
import { painter } from '../src/cli/colour.js';
import { stopLine } from '../src/cli/stop-line.js';
import type { RunResult, TerminateReport } from '../src/types.js';

const ctx = {
  timeoutMs: 2000,
  idleTimeoutMs: 0,
  graceMs: 1000,
  received: null,
  killSignal: 'SIGTERM' as const,
};

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

  describe('a signal passed on from the terminal', () => {
    const member = (pid: number, ...signals: NodeJS.Signals[]) => ({
      pid,
      command: 'sleep',
      signals: signals.map((signal, i) => ({ signal, atMs: 5 + i * 1000 })),
      outcome: signals.includes('SIGKILL') ? ('killed' as const) : ('exited-in-grace' as const),
    });
    const report = (...members: ReturnType<typeof member>[]): TerminateReport => ({
      members,
      signalled: members.length,
      killed: members.filter((m) => m.outcome === 'killed').length,
      escaped: 0,
      escalated: members.some((m) => m.outcome === 'killed'),
      durationMs: 40,
      graceUsedMs: null,
      notes: [],
    });
    const line = (r: TerminateReport) =>
      stopLine({ ...timedOut(r), reason: 'cancelled' }, { ...ctx, received: 'SIGINT' }, painter(false));

    it('names the signal the members that ignore it got instead, whoever comes first in the report', () => {
      expect(line(report(member(20, 'SIGTERM'), member(12, 'SIGINT'), member(21, 'SIGTERM')))).toBe(
        'procwarden: got SIGINT, stopping the command; SIGINT to 1 process, SIGTERM to 2 that ignore SIGINT; no SIGKILL needed; all gone in 40 ms',
      );
    });

    it('when every member ignored it', () => {
      expect(line(report(member(20, 'SIGTERM')))).toBe(
        'procwarden: got SIGINT, stopping the command; SIGTERM to 1 process that ignores SIGINT; no SIGKILL needed; all gone in 40 ms',
      );
    });

    it('a member found only after the grace, first signalled with SIGKILL or SIGSTOP, is not one that ignored it', () => {
      expect(
        line(
          report(member(12, 'SIGINT', 'SIGKILL'), member(30, 'SIGKILL'), member(31, 'SIGSTOP', 'SIGKILL')),
        ),
      ).toBe(
        'procwarden: got SIGINT, stopping the command; SIGINT to 3 processes; 3 needed SIGKILL after 1 s; all gone in 40 ms',
      );
      expect(
        line(
          report(member(12, 'SIGINT', 'SIGKILL'), member(20, 'SIGTERM'), member(31, 'SIGSTOP', 'SIGKILL')),
        ),
      ).toBe(
        'procwarden: got SIGINT, stopping the command; SIGINT to 2 processes, SIGTERM to 1 that ignores SIGINT; 2 needed SIGKILL after 1 s; all gone in 40 ms',
      );
    });

    it('a SIGINT that came after a timeout began the sequence changed nothing: no split (review)', () => {
      const r = report(member(12, 'SIGTERM'), member(20, 'SIGTERM'));
      expect(stopLine(timedOut(r), { ...ctx, received: 'SIGINT' }, painter(false))).toBe(
        'procwarden: got SIGINT, stopping the command; SIGTERM to 2 processes; no SIGKILL needed; all gone in 40 ms',
      );
    });
  });

  // Issue 46: `procwarden kill` of a run signals the command and procwarden at once. When the
  // command's death had ended the run before procwarden's own SIGTERM was heard, nothing was
  // stopped, and the line was "got SIGTERM, stopping the command" with nothing after it.
  it('a signal heard once the run had ended says so, not "stopping the command" with no summary', () => {
    const ended = {
      ...timedOut({
        members: [],
        signalled: 0,
        killed: 0,
        escaped: 0,
        escalated: false,
        durationMs: 0,
        graceUsedMs: null,
        notes: [],
      } as unknown as TerminateReport),
      reason: 'exit',
      timedOut: false,
      exitSignal: 'SIGTERM',
    } as RunResult;
    ended.tree.report = null;
    const line = stopLine(ended, { ...ctx, received: 'SIGTERM' }, painter(false));
    expect(line).toBe('procwarden: got SIGTERM after the command had ended (it died of SIGTERM)');
    // The run ended with reason 'signal' (the command's death was heard before our own SIGTERM),
    // and no termination ran: the report is null, not undefined. CI saw the bare line on Node 24.
    ended.reason = 'signal';
    expect(stopLine(ended, { ...ctx, received: 'SIGTERM' }, painter(false))).toBe(
      'procwarden: got SIGTERM after the command had ended (it died of SIGTERM)',
    );
  });
});
