// A run that replaces a scope's runs opens its output.file when it starts, not at spawn(): the
// runs it replaces may still be writing the same file (a dev server's log, restarted).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type RunSpec, Supervisor } from '../src/index.js';
import { LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

const sup = new Supervisor({ watchdog: false });
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

/** Writes 200 lines, then says goodbye on SIGTERM after a moment. */
const OLD: RunSpec['argv'] = [
  'sh',
  '-c',
  'trap "sleep 0.2; echo old-goodbye; exit 0" TERM; seq 1 200; echo ready; while :; do sleep 0.05; done',
];

describe("a replacing run's output.file", () => {
  it('is opened when the run starts: the old run finishes its log first, then the new one begins it', async () => {
    const dir = leaks.trackDir(makeTmp());
    const log = join(dir, 'dev.log');
    const old = sup.spawn({ argv: OLD, scope: 'dev', output: { file: log } });
    leaks.track(old.pid);
    await waitFor(() => readFileSync(log, 'utf8').includes('ready'), { what: 'the old log' });
    const fresh = sup.spawn({
      argv: ['echo', 'new-start'],
      scope: 'dev',
      replaceScope: true,
      output: { file: log },
    });
    // While the new run waits, the old run's log is whole.
    expect(readFileSync(log, 'utf8')).toContain('200\nready\n');
    expect((await old.result).reason).toBe('cancelled');
    expect((await fresh.result).reason).toBe('exit');
    // No hole of NUL bytes where the old run's writes landed after a truncation: only the new log.
    expect(readFileSync(log, 'utf8')).toBe('new-start\n');
  });

  it('is never touched by a run cancelled before it started', async () => {
    const dir = leaks.trackDir(makeTmp());
    const log = join(dir, 'dev.log');
    const old = sup.spawn({ argv: OLD, scope: 'dev2', output: { file: log }, graceMs: 5000 });
    leaks.track(old.pid);
    await waitFor(() => readFileSync(log, 'utf8').includes('ready'), { what: 'the old log' });
    const never = sup.spawn({
      argv: ['echo', 'never'],
      scope: 'dev2',
      replaceScope: true,
      output: { file: log },
    });
    never.cancel('not wanted after all');
    expect((await never.result).reason).toBe('cancelled');
    expect((await old.result).reason).toBe('cancelled');
    const text = readFileSync(log, 'utf8');
    expect(text.startsWith('1\n2\n3\n')).toBe(true);
    expect(text).toContain('old-goodbye\n');
    expect(text).not.toContain('never');
  });

  it('that cannot be opened is still refused at spawn() (INVALID_OPTION)', () => {
    const old = sup.spawn({ argv: ['sleep', '5'], scope: 'dev3' });
    leaks.track(old.pid);
    expect(() =>
      sup.spawn({
        argv: ['true'],
        scope: 'dev3',
        replaceScope: true,
        output: { file: '/nonexistent/dir/log' },
      }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
    old.kill();
  });
});
