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
            output: { onData: (t) => t.includes('ready') && ready++ },
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

  it('two supervisors with installSignalHandlers (one installed twice): SIGTERM waits for both, the exit callback runs once', async () => {
    const dir = leaks.trackDir(makeTmp('pw-host-'));
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const host = startHost('host-two-supervisors.mjs', [dir, stateDir]);
    leaks.track(host.child.pid);
    leaks.trackCookie(await host.line('ready'));
    const pid = readPids(dir).get('main') as number;

    host.child.kill('SIGTERM');
    const { code, signal } = await host.exited;
    expect({ code, signal }).toEqual({ code: 143, signal: null });
    // The busy supervisor's run finished its cleanup: the idle one did not end the process first.
    expect(existsSync(join(dir, 'cleanup.done'))).toBe(true);
    expect(host.lines.filter((l) => l.startsWith('exit '))).toEqual(['exit 143']);
    expect(alive(pid)).toBe(false);
    expect(journalFiles(stateDir)).toEqual([]);
  });

  it('two supervisors, default exit: the idle one does not exit the process before the busy one is done', async () => {
    const dir = leaks.trackDir(makeTmp('pw-host-'));
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const host = startHost('host-two-supervisors.mjs', [dir, stateDir, 'default-exit']);
    leaks.track(host.child.pid);
    leaks.trackCookie(await host.line('ready'));
    const pid = readPids(dir).get('main') as number;
    host.child.kill('SIGTERM');
    const { code } = await host.exited;
    expect(code).toBe(143);
    expect(existsSync(join(dir, 'cleanup.done'))).toBe(true);
    expect(alive(pid)).toBe(false);
    expect(journalFiles(stateDir)).toEqual([]);
  });

  it('installSignalHandlers({ signals: TERMINATING_SIGNALS }): SIGUSR2 shuts down too, exit 140', async () => {
    const dir = leaks.trackDir(makeTmp('pw-host-'));
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const host = startHost('host-two-supervisors.mjs', [dir, stateDir, ...TERMINATING_SIGNALS]);
    leaks.track(host.child.pid);
    leaks.trackCookie(await host.line('ready'));
    host.child.kill('SIGUSR2');
    const { code } = await host.exited;
    expect(code).toBe(140);
    expect(existsSync(join(dir, 'cleanup.done'))).toBe(true);
    expect(host.lines.filter((l) => l.startsWith('exit '))).toEqual(['exit 140']);
  });
});
