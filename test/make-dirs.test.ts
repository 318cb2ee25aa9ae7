import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeDir, makeDirs } from '../src/make-dirs.js';
import { Supervisor } from '../src/supervisor/index.js';
import { LeakGuard } from './helpers/procs.js';

const made: string[] = [];
const leaks = new LeakGuard();
afterEach(async () => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  await leaks.check();
});

const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'pw-mkdirs-'));
  made.push(dir);
  return dir;
};

describe('makeDirs (mkdir -p)', () => {
  it('makes every missing directory with the mode, and leaves an existing one as it is', () => {
    const root = scratch();
    const deep = join(root, 'a', 'b', 'c');
    makeDirs(deep, 0o700);
    for (const d of [join(root, 'a'), join(root, 'a', 'b'), deep])
      expect(statSync(d).mode & 0o777).toBe(0o700);
    makeDirs(deep, 0o755);
    expect(statSync(deep).mode & 0o777).toBe(0o700);
  });

  it('makeDir: one level; there already (another process made it first) is success', () => {
    const root = scratch();
    makeDir(join(root, 'one'), 0o700);
    makeDir(join(root, 'one'), 0o700);
    expect(statSync(join(root, 'one')).mode & 0o777).toBe(0o700);
    expect(() => makeDir(join(root, 'no', 'parent'))).toThrow(/ENOENT/);
  });

  it('a file in the way is an error', () => {
    const root = scratch();
    writeFileSync(join(root, 'file'), '');
    expect(() => makeDirs(join(root, 'file', 'below'))).toThrow(/ENOTDIR/);
  });

  // Node's own recursive mkdir retries this forever: a variable pointing into /proc hung the host.
  it('below a procfs directory that refuses new names: ENOENT at once, not a loop', () => {
    expect(() => makeDirs('/proc/self/procwarden/state', 0o700)).toThrow(/ENOENT/);
  });

  it('a state directory that cannot be made costs the run its journal, not the host a hang', async () => {
    const sup = new Supervisor({ stateDir: '/proc/self/procwarden', watchdog: false });
    leaks.trackCookie(sup.id);
    const r = await sup.spawn({ argv: ['/bin/true'], containment: 'process-group' }).result;
    expect(r.reason).toBe('exit');
    expect(r.exitCode).toBe(0);
    expect(sup.journalProblems.join('\n')).toMatch(/ENOENT/);
  }, 20_000);
});
