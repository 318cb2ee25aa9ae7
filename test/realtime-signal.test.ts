import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor } from '../src/supervisor/supervisor.js';
import type { RunSpec } from '../src/types.js';
import { cgroupSkipReason } from './helpers/cgroups.js';
import { LeakGuard, waitFor } from './helpers/procs.js';
import { ptySkipReason } from './helpers/pty.js';

// Node names no real-time signal (os.constants.signals stops at 31), yet `timeout -s 44` makes one
// a run's killSignal: every path that sends it must send it by number, none may throw.
const leaks = new LeakGuard();
afterEach(() => leaks.check());

const linux = process.platform === 'linux' ? null : 'real-time signals are Linux only here';
const cases: [RunSpec['containment'], 'child' | 'pty', string | null][] = [
  ['process-group', 'child', linux],
  ['none', 'child', linux],
  ['cgroup', 'child', linux ?? cgroupSkipReason()],
  ['process-group', 'pty', linux ?? ptySkipReason()],
];

describe('a real-time killSignal (SIGRTMIN+1)', () => {
  for (const [containment, mode, skip] of cases) {
    it.skipIf(skip !== null)(
      `reaches a trap in ${containment} containment, ${mode} mode${skip ? ` (skipped: ${skip})` : ''}`,
      async () => {
        const sup = new Supervisor({ watchdog: false });
        try {
          const handle = sup.spawn({
            argv: ['bash', '-c', 'trap "echo got; exit 7" RTMIN+1; echo ready; while :; do sleep 0.05; done'],
            containment,
            mode,
            killSignal: 'SIGRTMIN+1' as NodeJS.Signals,
            graceMs: 10_000,
          });
          leaks.track(handle.pid);
          await waitFor(() => sup.read(handle.id).text.includes('ready'), { what: 'the trap set' });
          handle.cancel();
          const r = await handle.result;
          expect(r.reason).toBe('cancelled');
          expect(r.exitCode).toBe(7);
          expect(r.escalated).toBe(false);
          expect(sup.read(handle.id).text).toContain('got');
        } finally {
          await sup.shutdown({ graceMs: 0 });
        }
      },
    );
  }

  it.skipIf(linux !== null)(
    'a command it kills: Node says exit 0; the result says that may be the signal',
    async () => {
      const sup = new Supervisor({ watchdog: false });
      try {
        const handle = sup.spawn({
          argv: ['sleep', '30'],
          containment: 'process-group',
          killSignal: 'SIGRTMIN+1' as NodeJS.Signals,
        });
        leaks.track(handle.pid);
        handle.cancel();
        const r = await handle.result;
        expect(r.reason).toBe('cancelled');
        // What Node reports for a death by a signal it has no name for.
        expect({ exitCode: r.exitCode, exitSignal: r.exitSignal }).toEqual({ exitCode: 0, exitSignal: null });
        expect(r.notes.join('\n')).toContain('may be its death by SIGRTMIN+1');
        // Sent instead of a cancel's SIGINT that the command ignores: the same.
        const ignoring = sup.spawn({
          argv: ['sh', '-c', 'trap "" INT; echo ready; sleep 30'],
          containment: 'process-group',
          killSignal: 'SIGRTMIN+1' as NodeJS.Signals,
        });
        leaks.track(ignoring.pid);
        await waitFor(() => sup.read(ignoring.id).text.includes('ready'), { what: 'the trap set' });
        ignoring.cancel('x', { signal: 'SIGINT' });
        const s = await ignoring.result;
        expect({ exitCode: s.exitCode, exitSignal: s.exitSignal }).toEqual({ exitCode: 0, exitSignal: null });
        expect(s.notes.join('\n')).toContain('may be its death by SIGRTMIN+1');
      } finally {
        await sup.shutdown({ graceMs: 0 });
      }
    },
  );
});
