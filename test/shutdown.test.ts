import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor, TERMINATING_SIGNALS } from '../src/index.js';
import { journalFiles, startHost } from './helpers/host.js';
import { alive, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

describe('shutdown', () => {
  it('200 concurrent runs: one grace window for all, in parallel, nothing survives, then spawn is refused', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const sup = new Supervisor({ stateDir });
    leaks.trackCookie(sup.id);
    const graceMs = 1500;
    let ready = 0;
    const handles = Array.from({ length: 200 }, (_, i) =>
      // Every 20th ignores SIGTERM and needs the SIGKILL at the end of the window.
      i % 20 === 0
        ? sup.spawn({
            argv: ['/bin/sh', '-c', 'trap "" TERM; echo ready; while :; do sleep 0.2; done'],
            output: {
              onData: (t) => {
                if (t.includes('ready')) ready++;
              },
            },
            graceMs: 60_000,
          })
        : sup.spawn({ argv: ['sleep', '300'] }),
    );
    for (const h of handles) leaks.track(h.pid);
    await waitFor(() => ready === 10 && handles.every((h) => h.state === 'running'), {
      timeoutMs: 30_000,
      what: '200 runs up',
    });
    await waitFor(() => journalFiles(stateDir).length === 400, { what: '200 runs recorded' });

    const t0 = Date.now();
    const results = await sup.shutdown({ graceMs });
    const elapsed = Date.now() - t0;
    console.info(`shutdown of 200 runs (grace ${graceMs} ms): ${elapsed} ms`);
    // One window for all: the stubborn runs' own 60 s grace does not apply, and they are not
    // waited for one after another. The margin is loose on purpose (a shared, loaded machine).
    expect(elapsed).toBeGreaterThanOrEqual(graceMs - 50);
    expect(elapsed).toBeLessThan(graceMs + 15_000);
    expect(results).toHaveLength(200);
    expect(new Set(results.map((r) => r.reason))).toEqual(new Set(['shutdown']));
    expect(results.filter((r) => r.escalated)).toHaveLength(10);
    expect(handles.filter((h) => h.pid !== undefined && alive(h.pid))).toEqual([]);
    expect(journalFiles(stateDir)).toEqual([]);
    expect(sup.shutdown()).toBe(sup.shutdown());
    expect(() => sup.spawn({ argv: ['true'] })).toThrow(
      expect.objectContaining({ code: 'SUPERVISOR_CLOSED' }),
    );
  });

  it('SIGTERM to a host with installSignalHandlers(): every run gets its graceful signal, the host exits 143', async () => {
    const dir = leaks.trackDir(makeTmp('pw-host-'));
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const host = startHost('host-signals.mjs', [dir, stateDir]);
    leaks.track(host.child.pid);
    leaks.trackCookie(await host.line('ready'));
    const subs = ['1', '2', '3'].map((n) => leaks.trackDir(join(dir, n)));
    const pids = subs.map((d) => readPids(d).get('main') as number);
    expect(pids.every(alive)).toBe(true);
    expect(journalFiles(stateDir)).toHaveLength(6);

    host.child.kill('SIGTERM');
    const { code, signal } = await host.exited;
    expect({ code, signal }).toEqual({ code: 143, signal: null });
    for (const d of subs) expect(existsSync(join(d, 'cleanup.done'))).toBe(true);
    expect(pids.filter(alive)).toEqual([]);
    expect(journalFiles(stateDir)).toEqual([]);
  });

  /**
   * host-two-supervisors.mjs with `args`, sent `signal` once its busy run is up: how it exited, and
   * whether that run's cleanup was done and its tree and records are gone.
   */
  async function twoSupervisors(args: string[], signal: NodeJS.Signals = 'SIGTERM') {
    const dir = leaks.trackDir(makeTmp('pw-host-'));
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const host = startHost('host-two-supervisors.mjs', [dir, stateDir, ...args]);
    leaks.track(host.child.pid);
    leaks.trackCookie(await host.line('ready'));
    const pid = readPids(dir).get('main') as number;
    host.child.kill(signal);
    const exited = await host.exited;
    // Its last lines may still be in the pipes when its exit is heard.
    // (A `once(child, 'close')` made here missed a close that came first, and waited out 5 s.)
    await Promise.race([host.closed, new Promise((r) => setTimeout(r, 5000))]);
    // The busy supervisor's run finished its cleanup: the idle one did not end the process first.
    expect(existsSync(join(dir, 'cleanup.done'))).toBe(true);
    expect(alive(pid)).toBe(false);
    expect(journalFiles(stateDir)).toEqual([]);
    return { ...exited, host, exits: host.lines.filter((l) => l.startsWith('exit ')) };
  }

  it('two supervisors with installSignalHandlers (one installed twice): SIGTERM waits for both, the exit callback runs once', async () => {
    const { code, signal, exits } = await twoSupervisors([]);
    expect({ code, signal }).toEqual({ code: 143, signal: null });
    expect(exits).toEqual(['exit 143']);
  });

  it('two supervisors, default exit: the idle one does not exit the process before the busy one is done', async () => {
    const { code } = await twoSupervisors(['default-exit']);
    expect(code).toBe(143);
  });

  it('an exit callback that throws keeps no other from running, the default exit included (which runs last); its error is said', async () => {
    const { code, exits, host } = await twoSupervisors(['mixed-throw']);
    expect(code).toBe(143);
    expect(exits).toEqual(['exit 143']);
    expect(host.stderr()).toContain(
      'an exit callback of installSignalHandlers threw: the exit callback failed',
    );
  });

  it('installSignalHandlers({ signals: TERMINATING_SIGNALS }): SIGUSR2 shuts down too, exit 140', async () => {
    const { code, exits } = await twoSupervisors([...TERMINATING_SIGNALS], 'SIGUSR2');
    expect(code).toBe(140);
    expect(exits).toEqual(['exit 140']);
  });
});
