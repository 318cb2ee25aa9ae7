import { describe, expect, it } from 'vitest';
import { Taskkill, terminateTree } from '../src/kill/index.js';
import { WindowsTable } from '../src/tree/index.js';
import { FakeWindows, recording, TASKKILL } from './helpers/fake-windows.js';

const A = 41000; // cmd.exe
const B = 42000; // Build Tool.exe, child of A
const C = 43000; // worker.exe, child of B

/** A fake Windows host; its dead parents' links cut unless `dangling` (see withoutDanglingParents). */
function host(recordingName = 'three-level.json', dangling = false) {
  const win = new FakeWindows(recordingName);
  if (!dangling) win.withoutDanglingParents();
  const table = new WindowsTable({ runner: win.runner, env: {} });
  const end = (pid: number, graceMs = 150) => terminateTree(pid, { table, send: win.send, graceMs });
  return { win, table, end };
}

const outcome = (report: Awaited<ReturnType<typeof terminateTree>>, pid: number) =>
  report.members.find((m) => m.pid === pid)?.outcome;

describe('Windows termination through recorded taskkill and PowerShell outputs', () => {
  it('a graceful close that ends the tree within the grace sends no /F', async () => {
    const { win, end } = host();
    for (const pid of [A, B, C]) win.behaviour.set(pid, { closesOnRequest: true });
    const report = await end(A, 5000);
    expect(win.taskkillCalls()).toEqual([['/PID', String(A), '/T']]);
    expect(win.calls.filter((c) => c.file.endsWith('taskkill.exe')).every((c) => c.file === TASKKILL)).toBe(
      true,
    );
    expect(report.escalated).toBe(false);
    expect(report.durationMs).toBeLessThan(4000);
    expect(report.members.map((m) => [m.pid, m.outcome]).sort()).toEqual([
      [A, 'exited-in-grace'],
      [B, 'exited-in-grace'],
      [C, 'exited-in-grace'],
    ]);
    expect(win.sent).toEqual([]);
  });

  it("a pid some process names as its dead parent is never walked with /T: an unrelated tree whose dead parent's pid a new member gets stays", async () => {
    // As recorded: explorer.exe (3000) names the dead pid 2944 as its parent. Just before the
    // force step, worker.exe (C) starts a child, and Windows gives it pid 2944.
    const { win, end } = host('three-level.json', true);
    win.beforeCall = (call) => {
      if (call.args.includes('/F') && !win.alive(2944)) win.reuse(2944, 'helper.exe', C, Date.now());
    };
    const report = await end(A, 50);
    expect(win.taskkillCalls().some((c) => c.includes('/T'))).toBe(false);
    expect(win.alive(3000)).toBe(true);
    expect(report.notes.join('\n')).toContain('a process names a dead pid as its parent');
    for (const pid of [A, B, C]) expect(win.alive(pid)).toBe(false);
    win.exit(2944);
  });

  it('the middle process exits during the grace: its child is still forced, by its own pid', async () => {
    const { win, end } = host();
    // B has a window and closes on request; A and C are console processes that only /F ends.
    win.behaviour.set(B, { closesOnRequest: true });
    const report = await end(A);
    expect(win.alive(B)).toBe(false);
    expect(win.alive(A)).toBe(false);
    expect(win.alive(C)).toBe(false);
    const calls = win.taskkillCalls();
    // After the grace, C names the dead B as its parent (Windows never re-parents): B's pid could
    // be handed to a new process, so no /T is walked any more; A and C are forced by their own pids.
    expect(calls).toEqual([
      ['/PID', String(A), '/T'],
      ['/PID', String(A), '/F'],
      ['/PID', String(C), '/F'],
    ]);
    expect(report.escalated).toBe(true);
    expect(outcome(report, C)).toBe('killed');
    expect(outcome(report, A)).toBe('killed');
    expect(report.escaped).toBe(0);
    // B closed, A and C refused (console processes): taskkill reports a partial result.
    expect(report.notes.join('\n')).toMatch(
      /\/PID 41000 \/T: exit 255, only part of the tree was reached.*forcefully/,
    );
  });

  it('the middle process exits while the /T /F walk runs: the snapshotted survivor is forced by pid', async () => {
    const { win, end } = host();
    win.beforeCall = (call) => {
      if (call.args.join(' ') === `/PID ${A} /T /F`) win.exit(B); // the link A -> B -> C breaks mid-walk
    };
    const report = await end(A, 50);
    const calls = win.taskkillCalls();
    const forceOnA = calls.findIndex((c) => c.join(' ') === `/PID ${A} /T /F`);
    expect(forceOnA).toBeGreaterThan(0);
    expect(calls[forceOnA + 1]).toEqual(['/PID', String(C), '/F']);
    expect(win.alive(C)).toBe(false);
    expect(outcome(report, C)).toBe('killed');
    expect(report.escaped).toBe(0);
  });

  it('a pid reused by an unrelated process between snapshot and kill is never signalled', async () => {
    const { win, end } = host();
    let enumerations = 0;
    win.beforeCall = (call) => {
      if (!call.file.endsWith('powershell.exe')) return;
      // Right after the first full snapshot, C exits and an unrelated service gets its pid.
      if (++enumerations === 4) win.reuse(C, 'svchost.exe', 800, Date.UTC(2026, 10, 30, 1, 40));
    };
    const report = await end(A, 50);
    expect(win.alive(C)).toBe(true);
    expect(win.rows.get(C)?.Name).toBe('svchost.exe');
    expect(win.taskkillCalls().some((args) => args.includes(String(C)))).toBe(false);
    expect(win.sent).toEqual([]);
    expect(win.alive(A)).toBe(false);
    expect(win.alive(B)).toBe(false);
    expect(report.notes.join('\n')).toMatch(/pid 43000 was reused by "svchost.exe" .*not signalled/);
  });

  it('never follows a stale parent link with /T: the older process that names our root as parent survives', async () => {
    const { win, end } = host('stale-parent.json');
    const report = await end(A, 50);
    expect(win.alive(51000)).toBe(true); // updater.exe: its real parent died long ago; A got that pid later
    expect(win.alive(A)).toBe(false);
    expect(win.alive(43000)).toBe(false);
    const calls = win.taskkillCalls();
    expect(calls.some((args) => args.includes('/T'))).toBe(false);
    expect(calls.some((args) => args.includes('51000'))).toBe(false);
    expect(report.members.map((m) => m.pid).sort()).toEqual([A, 43000]);
  });

  it('never our own process: not as a target, nor through a stale link taskkill /T would follow', async () => {
    const { win, end } = host();
    // We are a child of A: A is our ancestor.
    win.rows.set(process.pid, {
      ProcessId: process.pid,
      ParentProcessId: A,
      CreationDate: '/Date(1796002640000)/',
      Name: 'node.exe',
    });
    await expect(end(A)).rejects.toMatchObject({ code: 'FORBIDDEN_TARGET' });
    await expect(end(B)).resolves.toBeDefined();
    expect(win.alive(process.pid)).toBe(true);
    // Now an older us names A as parent: a stale link, so A is not our ancestor, but /T from A would reach us.
    win.rows.set(process.pid, {
      ...win.rows.get(process.pid),
      CreationDate: '/Date(1796000000000)/',
    } as never);
    await end(A, 50);
    expect(win.alive(A)).toBe(false);
    expect(win.alive(process.pid)).toBe(true);
    expect(win.taskkillCalls().filter((a) => a.includes(String(A)))).not.toContainEqual([
      '/PID',
      String(A),
      '/T',
      '/F',
    ]);
  });

  it('includeRoot: false ends the descendants only, never walking /T from the root', async () => {
    const { win, table } = host();
    const report = await terminateTree(A, { table, send: win.send, graceMs: 50, includeRoot: false });
    expect(win.alive(A)).toBe(true);
    expect(win.alive(B)).toBe(false);
    expect(win.alive(C)).toBe(false);
    expect(win.taskkillCalls().some((args) => args.includes(String(A)))).toBe(false);
    expect(win.taskkillCalls()[0]).toEqual(['/PID', String(B), '/T']);
    expect(report.killed).toBe(2);
    win.exit(A);
  });

  it('taskkill exit 128 (the process exited first) is reported as such, not as a failure', async () => {
    const { win, end } = host();
    win.beforeCall = (call) => {
      if (call.file.endsWith('taskkill.exe')) for (const pid of [A, B, C]) win.exit(pid);
    };
    const report = await end(A);
    expect(win.taskkillCalls()).toEqual([['/PID', String(A), '/T']]);
    expect(report.escalated).toBe(false);
    expect(report.escaped).toBe(0);
    expect(report.notes).toContain(`taskkill /PID ${A} /T: exit 128, no such process (it exited first)`);
  });

  it('taskkill exit 1 (access denied): process.kill is tried from the snapshot, the member is reported escaped', async () => {
    const { win, end } = host();
    win.behaviour.set(C, { protected: true });
    const report = await end(A, 50);
    expect(win.alive(A)).toBe(false);
    expect(win.alive(B)).toBe(false);
    expect(win.alive(C)).toBe(true);
    expect(win.taskkillCalls()).toContainEqual(['/PID', String(C), '/F']);
    expect(win.sent.some((s) => s.pid === C && s.signal === 'SIGKILL')).toBe(true);
    expect(report.escaped).toBe(1);
    expect(report.killed).toBe(2);
    expect(outcome(report, C)).not.toBe('killed');
    const notes = report.notes.join('\n');
    expect(notes).toContain(`taskkill /PID ${C} /F: exit 1, access denied`);
    expect(notes).toContain(`pid ${C} (worker.exe): fell back to process.kill by pid from the snapshot`);
    expect(notes).toContain(`process.kill(${C}) failed: EPERM`);
    // Refused, not survived: said so.
    expect(notes).toContain(`1 process(es) could not be signalled (not permitted`);
    expect(notes).not.toContain('still alive after SIGKILL');
  });

  it('taskkill missing (ENOENT): no graceful step is possible; the force step uses process.kill per pid', async () => {
    const { win, end } = host();
    win.taskkillMissing = true;
    const report = await end(A, 100);
    for (const pid of [A, B, C]) expect(win.alive(pid)).toBe(false);
    expect(win.sent.map((s) => s.signal)).toEqual(['SIGKILL', 'SIGKILL', 'SIGKILL']);
    expect(win.sent.map((s) => s.pid).sort()).toEqual([A, B, C]);
    // taskkill was tried once, then remembered as unavailable.
    expect(win.taskkillCalls()).toEqual([['/PID', String(A), '/T']]);
    expect(report.escalated).toBe(true);
    // Nobody could be asked to close: the grace (100 ms) is not waited out for nothing.
    expect(report.graceUsedMs).toBeLessThan(90);
    expect(report.killed).toBe(3);
    const notes = report.notes.join('\n');
    expect(notes).toContain(`${TASKKILL} could not be run (ENOENT)`);
    expect(notes).toContain('graceful step skipped');
    expect(notes).toContain('nobody was asked, so the force step does not wait for the grace');
    expect(notes).toContain('fell back to process.kill by pid from the snapshot');
  });

  it('builds taskkill command lines only from positive integer pids', () => {
    expect(Taskkill.args({ pid: 8, tree: true, force: true })).toEqual(['/PID', '8', '/T', '/F']);
    expect(Taskkill.args({ pid: 8, tree: false, force: false })).toEqual(['/PID', '8']);
    for (const pid of [0, -4, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60]) {
      expect(() => Taskkill.args({ pid, tree: true, force: true })).toThrow(/refusing to pass pid/);
    }
  });
});

describe('taskkill exit codes mapped to report notes', () => {
  const MESSAGES = JSON.parse(recording('taskkill.json')) as Record<string, string>;
  const say = (name: string, pid: number) => `${(MESSAGES[name] ?? '').replaceAll('{pid}', String(pid))}\r\n`;
  const answer = (code: number | null, stdout = '', stderr = '') =>
    new Taskkill(
      async () => ({
        code,
        stdout,
        stderr,
        ...(code === null ? { error: Object.assign(new Error('spawn'), { code: 'ENOENT' }) } : {}),
      }),
      {},
    );
  const request = { pid: 7, tree: true, force: false };

  it.each([
    [0, say('gracefulSent', 7), '', 'ok', null],
    [
      128,
      '',
      say('notFound', 7),
      'not-found',
      'taskkill /PID 7 /T: exit 128, no such process (it exited first)',
    ],
    [
      1,
      '',
      say('needsForce', 7),
      'needs-force',
      'taskkill /PID 7 /T: exit 1, the process has no window to close; Windows can end it only by force',
    ],
    [
      1,
      '',
      say('denied', 7),
      'denied',
      "taskkill /PID 7 /T: exit 1, access denied (another user's or a protected process; run elevated to end it)",
    ],
    [
      255,
      say('gracefulSent', 7),
      say('needsForceChild', 9).replace('{parent}', '7'),
      'partial',
      'taskkill /PID 7 /T: exit 255, only part of the tree was reached (Reason: This process can only be terminated forcefully (with /F option).)',
    ],
    [
      255,
      'ERFOLGREICH: Das Signal zum Beenden wurde an den Prozess mit der PID 7 (untergeordneter Prozess von PID 3) gesendet.\r\n',
      'FEHLER: Der Prozess mit der PID 9 (untergeordneter Prozess von PID 7) konnte nicht beendet werden.\r\n',
      'partial',
      'taskkill /PID 7 /T: exit 255, only part of the tree was reached (FEHLER: Der Prozess mit der PID 9 (untergeordneter Prozess von PID 7) konnte nicht beendet werden.)',
    ],
    [
      5,
      '',
      'ERROR: Invalid argument/option\r\n',
      'failed',
      'taskkill /PID 7 /T: exit 5 (ERROR: Invalid argument/option)',
    ],
    [null, '', '', 'unavailable', `taskkill /PID 7 /T: ${TASKKILL} could not be run (ENOENT)`],
  ])('exit %s', async (code, stdout, stderr, outcome, note) => {
    const result = await answer(code, stdout, stderr).run(request);
    expect(result.outcome).toBe(outcome);
    expect(result.note).toBe(note);
    expect(result.confirmed).toEqual(stdout ? [7] : []);
  });
});
