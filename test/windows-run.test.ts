import { describe, expect, it } from 'vitest';
import { createContainment } from '../src/containment/index.js';
import { Supervisor } from '../src/index.js';
import type { LaunchEvents, Launcher } from '../src/spawn/index.js';
import { WindowsTable } from '../src/tree/index.js';
import { FakeWindows } from './helpers/fake-windows.js';

const A = 41000;
const B = 42000;
const C = 43000;

/**
 * Stands in for node:child_process on Windows: the run's direct child is A of the recorded tree.
 * `pty`: the launcher is the PTY one, and reports A's exit `lateMs` after A is gone from the table
 * with its pid free (node-pty's ConPTY thread closes the process handle before the exit reaches
 * JavaScript, and the exit waits for the output to be drained).
 */
function windowsRun({ pty = false, lateMs = 0, dangling = false } = {}) {
  const win = new FakeWindows('three-level.json');
  if (!dangling) win.withoutDanglingParents();
  const table = new WindowsTable({ runner: win.runner, env: { SystemRoot: 'C:\\Windows' } });
  const childKills: (string | undefined)[] = [];
  let events: LaunchEvents | undefined;
  let outputEnded: () => void = () => {};
  win.onExit = (pid) => {
    if (pid !== A) return;
    const report = () => {
      events?.exited(1, null);
      outputEnded();
    };
    if (lateMs > 0) setTimeout(report, lateMs);
    else report();
  };
  const launcher: Launcher = (plan, _options, ev) => {
    expect(plan.newSession).toBe(false);
    events = ev;
    queueMicrotask(() => ev.spawned());
    return {
      pid: A,
      stdin: undefined,
      outputDone: new Promise<void>((resolve) => {
        outputEnded = resolve;
      }),
      releaseOutput() {},
      kill(signal) {
        childKills.push(signal);
        win.rows.delete(A);
        win.onExit?.(A);
        return true;
      },
    };
  };
  const sup = new Supervisor({
    table,
    send: win.send,
    launchers: pty ? { pty: launcher } : { child: launcher },
  });
  return { win, table, sup, childKills };
}

describe('a run on Windows (recorded outputs, injected launcher)', () => {
  it('createContainment holds every run on a Windows table as a windows-tree', () => {
    const { table } = windowsRun();
    for (const mode of ['auto', 'process-group', 'none'] as const) {
      expect(createContainment(mode, { table, cookie: 'pw-x', name: 'pw-x' }).kind).toBe('windows-tree');
    }
  });

  it('a timed-out run: graceful taskkill /T, then /F for the tree, every member verified gone', async () => {
    const { win, sup } = windowsRun();
    const handle = sup.spawn({ argv: ['cmd.exe', '/c', 'build.cmd'], timeoutMs: 30, graceMs: 100 });
    const result = await handle.result;
    expect(result.reason).toBe('overall-timeout');
    expect(result.containment).toBe('windows-tree');
    expect(result.escalated).toBe(true);
    expect(result.tree.killed).toBe(3);
    expect(result.tree.escaped).toBe(0);
    expect(win.taskkillCalls().slice(0, 2)).toEqual([
      ['/PID', String(A), '/T'],
      ['/PID', String(A), '/T', '/F'],
    ]);
    for (const pid of [A, B, C]) expect(win.alive(pid)).toBe(false);
  });

  it('the last resort: taskkill missing and process.kill denied, the direct child ends through child.kill()', async () => {
    const { win, sup, childKills } = windowsRun();
    win.taskkillMissing = true;
    win.behaviour.set(A, { protected: true });
    const handle = sup.spawn({ argv: ['cmd.exe'], graceMs: 50 });
    await new Promise((r) => setTimeout(r, 20));
    handle.cancel('test');
    const result = await handle.result;
    expect(childKills).toEqual(['SIGKILL']);
    expect(result.reason).toBe('cancelled');
    expect(win.alive(A)).toBe(false);
    expect(win.alive(B)).toBe(false);
    expect(win.alive(C)).toBe(false);
    const notes = result.tree.report?.notes.join('\n') ?? '';
    expect(notes).toContain(`process.kill(${A}) failed: EPERM`);
    expect(notes).toContain(`pid ${A}: fell back to child.kill() through the launcher's process handle`);
  });

  it('without a process table (PowerShell missing) only the direct child is ended, through its handle', async () => {
    const { win, sup, childKills } = windowsRun();
    const runner = win.runner;
    let broken = false;
    win.beforeCall = () => {};
    const table = (sup as unknown as { table: WindowsTable }).table;
    Object.defineProperty(table, 'runner', {
      value: async (file: string, args: readonly string[]) => {
        if (broken && file.endsWith('powershell.exe')) {
          return {
            code: null,
            stdout: '',
            stderr: '',
            error: Object.assign(new Error('nope'), { code: 'ENOENT' }),
          };
        }
        return runner(file, args);
      },
    });
    const handle = sup.spawn({ argv: ['cmd.exe'], graceMs: 50 });
    await new Promise((r) => setTimeout(r, 20));
    broken = true;
    handle.kill();
    const result = await handle.result;
    expect(childKills).toEqual(['SIGKILL']);
    expect(win.alive(A)).toBe(false);
    expect(win.alive(C)).toBe(true); // honestly unreachable: reported, not claimed
    const notes = result.tree.report?.notes.join('\n') ?? '';
    expect(notes).toContain('process table unavailable');
    expect(notes).toContain('descendants of the direct child could not be seen or verified');
    win.exit(B);
    win.exit(C);
  });

  it('a command that exited at once and whose pid went to a newer process before the first read: that process is left alone', async () => {
    const { win, sup } = windowsRun();
    // The first PowerShell call answers after A exited (Node closed its handle) and Windows gave
    // A's pid to an unrelated program, created since, which has a child of its own.
    let reused = false;
    win.beforeCall = (call) => {
      if (reused || !call.file.toLowerCase().endsWith('powershell.exe')) return;
      reused = true;
      win.exit(A);
      win.exit(B);
      win.exit(C);
      win.reuse(A, 'OUTLOOK.EXE', 3000, Date.now() + 50);
      win.reuse(46000, 'outlook-helper.exe', A, Date.now() + 60);
    };
    const handle = sup.spawn({ argv: ['git.exe', '--version'] });
    const result = await handle.result;
    expect(result.reason).toBe('exit');
    expect(win.taskkillCalls()).toEqual([]);
    expect(win.sent).toEqual([]);
    expect(win.alive(A) && win.alive(46000)).toBe(true);
    expect(result.tree.leftovers).toBe(0);
    expect(result.notes.join('\n')).toContain(`pid ${A} was read after the command had exited`);
  });

  it('a command read alive whose exit is heard before the answer: it is the root, and its leftovers end', async () => {
    const { win, sup } = windowsRun();
    // PowerShell enumerated A alive; A exited (leaving B and C) before the answer came back.
    const result = await runExitingDuringFirstRead(win, sup, () => win.exit(A));
    expect(result.reason).toBe('exit');
    expect(result.tree.leftovers).toBe(2);
    expect(win.alive(B) || win.alive(C)).toBe(false);
    expect(result.notes.join('\n')).not.toContain('was read after the command had exited');
  });

  it("a dead root's pid given to a newer process: its old children end, the newer process's child is left alone", async () => {
    const { win, sup } = windowsRun();
    const result = await runExitingDuringFirstRead(win, sup, () => {
      win.exit(A);
      win.reuse(A, 'OUTLOOK.EXE', 3000, Date.now() + 50);
      win.reuse(46000, 'outlook-helper.exe', A, Date.now() + 60);
    });
    expect(result.tree.leftovers).toBe(2);
    expect(win.alive(B) || win.alive(C)).toBe(false);
    expect(win.alive(A) && win.alive(46000)).toBe(true);
    expect(JSON.stringify(win.calls)).not.toContain('46000');
  });

  describe('a PTY run, whose exit is heard after its pid is free (review)', () => {
    const isPs = (file: string) => file.toLowerCase().endsWith('powershell.exe');

    it("a newer holder of the root's pid has a child before the late exit report: the root's own children end, that child does not", async () => {
      const { win, sup } = windowsRun({ pty: true, lateMs: 40 });
      let first = true;
      win.afterCall = (call) => {
        if (!first || !isPs(call.file)) return;
        first = false; // the first read saw A alive
        win.exit(A);
        win.reuse(A, 'OUTLOOK.EXE', 3000, Date.now());
        win.reuse(46000, 'outlook-helper.exe', A, Date.now() + 1);
      };
      await sup.spawn({ argv: ['pwsh.exe'], mode: 'pty', graceMs: 50 }).result;
      expect(win.alive(B) || win.alive(C)).toBe(false);
      expect(win.alive(46000)).toBe(true);
      expect(JSON.stringify(win.taskkillCalls())).not.toContain('46000');
    });
  });

  it("a stranger given the pid a moment before the exit was heard, closer than the clocks' slack, is left alone", async () => {
    const { win, sup } = windowsRun();
    let done = false;
    win.beforeCall = (call) => {
      if (done || !call.file.toLowerCase().endsWith('powershell.exe')) return;
      done = true;
      // Its creation date reads 10 ms before Node's clock heard the exit: two clocks, either a tick sample.
      const heard = Date.now();
      win.exit(A);
      win.reuse(A, 'OUTLOOK.EXE', 3000, heard - 10);
    };
    const result = await sup.spawn({ argv: ['git.exe', '--version'] }).result;
    expect(win.taskkillCalls()).toEqual([]);
    expect(win.alive(A)).toBe(true);
    expect(result.notes.join('\n')).toContain(`pid ${A} was read after the command had exited`);
    win.exit(B);
    win.exit(C);
  });

  it("a member's child seen only in the graceful step's own read is still ended once that member is gone (review)", async () => {
    // A real host has dangling parents: no /T, each member by its own pid.
    const { win, sup } = windowsRun({ dangling: true });
    win.behaviour.set(B, { closesOnRequest: true }); // B has a window: the graceful step ends it
    let full = 0;
    win.beforeCall = (call) => {
      if (!call.file.toLowerCase().endsWith('powershell.exe')) return;
      const script = Buffer.from(call.args.at(-1) ?? '', 'base64').toString('utf16le');
      if (script.includes('-Filter')) return;
      // The second full read is the graceful step's own: D is born to B just before it.
      if (++full === 2) win.reuse(44000, 'cl.exe', B, Date.now() - 1000);
    };
    const result = await sup.spawn({ argv: ['cmd.exe', '/c', 'build.cmd'], timeoutMs: 30, graceMs: 100 })
      .result;
    expect(result.reason).toBe('overall-timeout');
    expect(win.alive(B)).toBe(false);
    expect(win.alive(44000)).toBe(false);
  });
});

/** Runs the three-level tree; `change` happens after the first read was made, before it is answered. */
function runExitingDuringFirstRead(win: FakeWindows, sup: Supervisor, change: () => void) {
  let first = true;
  win.afterCall = (call) => {
    if (!first || !call.file.toLowerCase().endsWith('powershell.exe')) return;
    first = false;
    change();
  };
  return sup.spawn({ argv: ['cmd.exe', '/c', 'start', 'build.cmd'], graceMs: 50 }).result;
}
