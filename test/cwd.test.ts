import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ProcwardenError, type RunSpec, run, Supervisor } from '../src/index.js';
import { cgroupSkipReason, sweepCgroups } from './helpers/cgroups.js';
import { CLI, runCli } from './helpers/cli.js';
import { LeakGuard, makeTmp } from './helpers/procs.js';
import { ptySkipReason } from './helpers/pty.js';

/**
 * A cwd the run cannot enter is reported as the cwd's fault, naming it and what is wrong with it
 * (does not exist, is not a directory, permission denied), in every mode: before anything starts
 * when spawn() can see it, and as the spawn error when it went bad while the run waited to launch.
 * It used to be the command's fault: "pwd: permission denied; is the file executable?".
 */
const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
const cgroupSkip = process.platform === 'linux' ? cgroupSkipReason() : 'not Linux';
const ptySkip = ptySkipReason();
afterEach(async () => {
  const left = cgroupSkip === null ? await sweepCgroups() : [];
  await leaks.check();
  expect(left, 'cgroups left behind (now removed)').toEqual([]);
});

const MODES = [
  { name: 'child', spec: { mode: 'child', containment: 'process-group' }, skip: null },
  { name: 'pty', spec: { mode: 'pty', containment: 'process-group' }, skip: ptySkip },
  { name: 'cgroup', spec: { mode: 'child', containment: 'cgroup' }, skip: cgroupSkip },
  { name: 'pty + cgroup', spec: { mode: 'pty', containment: 'cgroup' }, skip: ptySkip ?? cgroupSkip },
] as const satisfies readonly { name: string; spec: Partial<RunSpec>; skip: string | null }[];

const named = (m: (typeof MODES)[number]) => `${m.name}${m.skip ? ` (skipped: ${m.skip})` : ''}`;

function thrown(make: () => unknown): ProcwardenError {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(ProcwardenError);
    return error as ProcwardenError;
  }
  throw new Error('nothing was thrown');
}

describe('spawn() refuses a cwd it cannot enter, before anything starts', () => {
  function cases(dir: string) {
    const file = join(dir, 'file');
    writeFileSync(file, '');
    return [
      [join(dir, 'missing'), 'CWD_NOT_FOUND', `cwd "${join(dir, 'missing')}" does not exist; create it`],
      [file, 'CWD_NOT_FOUND', `cwd "${file}" is not a directory (it is a file)`],
      [
        join(file, 'below'),
        'CWD_NOT_FOUND',
        `cwd "${join(file, 'below')}" is not a directory ("${file}" on its path is a file)`,
      ],
    ] as const;
  }

  for (const m of MODES) {
    it.skipIf(m.skip !== null)(named(m), () => {
      const dir = leaks.trackDir(makeTmp());
      for (const [cwd, code, message] of cases(dir)) {
        const error = thrown(() => sup.spawn({ argv: ['pwd'], cwd, ...m.spec }));
        expect(error.code).toBe(code);
        expect(error.message).toContain(message);
        expect(error.message).not.toContain('pwd');
      }
      expect(sup.running()).toEqual([]);
    });
  }

  it('run() the same', () => {
    const dir = leaks.trackDir(makeTmp());
    for (const [cwd, code, message] of cases(dir)) {
      const error = thrown(() => run({ argv: ['pwd'], cwd }));
      expect(error.code).toBe(code);
      expect(error.message).toContain(message);
    }
  });

  it('procwarden run --cwd: one line naming the cwd, status 125', async () => {
    const dir = leaks.trackDir(makeTmp());
    const missing = join(dir, 'missing');
    const r = await runCli(['run', '--cwd', missing, '--', 'pwd']);
    leaks.track(r.pid);
    expect(r.status).toBe(125);
    expect(r.stdout.toString()).toBe('');
    expect(r.stderr.split('\n')[0]).toBe(
      `procwarden run: cwd "${missing}" does not exist; create it or give a directory that does.`,
    );
  });
});

describe('a cwd gone by the time a waiting run launches is its spawn error, naming the cwd', () => {
  for (const m of MODES) {
    it.skipIf(m.skip !== null)(named(m), async () => {
      const dir = leaks.trackDir(makeTmp());
      const cwd = join(dir, 'gone');
      mkdirSync(cwd);
      // The second run waits for the first one's tree to be extinct (replaceScope); its cwd goes
      // meanwhile.
      const first = sup.spawn({ argv: ['sleep', '30'], scope: 'cwd-race' });
      leaks.track(first.pid);
      const second = sup.spawn({ argv: ['pwd'], cwd, scope: 'cwd-race', replaceScope: true, ...m.spec });
      rmdirSync(cwd);
      const result = await second.result;
      expect((await first.result).reason).toBe('cancelled');
      expect(result.reason).toBe('spawn-error');
      expect(result.error).toEqual({
        code: 'ENOENT',
        message: `cwd "${cwd}" does not exist; create it or give a directory that does.`,
      });
      expect(result.stdout.text).toBe('');
    });
  }
});

/**
 * Root enters any directory, so these run as nobody (setpriv). The script drives the built library
 * and the built CLI from a directory nobody can read.
 */
const nobodySkip =
  process.platform !== 'linux'
    ? 'not Linux'
    : process.getuid?.() !== 0
      ? 'not root: cannot switch to nobody to meet a permission the test user has'
      : spawnSync('setpriv', ['--version']).status !== 0
        ? 'setpriv(1) is not installed'
        : null;
const NOBODY = 65534;
const asNobody = ['--reuid', `${NOBODY}`, '--regid', `${NOBODY}`, '--clear-groups', process.execPath];

describe.skipIf(nobodySkip !== null)(
  `permission denied, as a user who may not enter the cwd${nobodySkip ? ` (skipped: ${nobodySkip})` : ''}`,
  () => {
    function setUp() {
      const dir = leaks.trackDir(makeTmp());
      chmodSync(dir, 0o755);
      const closed = join(dir, 'closed');
      mkdirSync(closed, { mode: 0o000 });
      chmodSync(closed, 0o000);
      const locked = join(dir, 'locked');
      mkdirSync(join(locked, 'inner'), { recursive: true });
      chmodSync(locked, 0o700);
      const state = join(dir, 'state');
      mkdirSync(state, { mode: 0o700 });
      chownSync(state, NOBODY, NOBODY);
      return { dir, closed, locked, inner: join(locked, 'inner'), state };
    }

    it('the library: CWD_NOT_ACCESSIBLE naming the cwd, or the directory above it that is closed', () => {
      const { dir, closed, locked, inner } = setUp();
      const library = join(fileURLToPath(new URL('..', import.meta.url)), 'dist', 'index.js');
      const script = join(dir, 'try.mjs');
      writeFileSync(
        script,
        `import { Supervisor } from ${JSON.stringify(library)};
const sup = new Supervisor({ journal: false, watchdog: false });
const out = [];
for (const spec of ${JSON.stringify(MODES.filter((m) => m.spec.mode !== 'pty' || ptySkip === null).map((m) => m.spec))})
  for (const cwd of ${JSON.stringify([closed, inner])}) {
    try { sup.spawn({ argv: ['pwd'], cwd, ...spec }); out.push({ spec, cwd, started: true }); }
    catch (error) { out.push({ spec, cwd, code: error.code, message: error.message }); }
  }
await sup.shutdown();
console.log(JSON.stringify(out));
`,
      );
      const r = spawnSync('setpriv', [...asNobody, script], { encoding: 'utf8', timeout: 30_000 });
      expect(r.stderr).toBe('');
      const out = JSON.parse(r.stdout) as { cwd: string; code?: string; message?: string }[];
      expect(out.length).toBeGreaterThanOrEqual(2);
      for (const o of out) {
        expect(o.code).toBe('CWD_NOT_ACCESSIBLE');
        expect(o.message).toBe(
          o.cwd === closed
            ? `cwd "${closed}": permission denied: this process (uid ${NOBODY}) may not enter it (no search permission); give a directory this user can enter, or change its permissions.`
            : `cwd "${inner}": permission denied: this process (uid ${NOBODY}) may not search "${locked}"; give a directory this user can enter, or change its permissions.`,
        );
      }
    });

    it('procwarden run --cwd: one line naming the cwd, status 125, not 126 blaming the command', () => {
      const { closed, state } = setUp();
      const r = spawnSync('setpriv', [...asNobody, CLI, 'run', '--cwd', closed, '--', 'pwd'], {
        encoding: 'utf8',
        timeout: 30_000,
        env: { ...process.env, PROCWARDEN_STATE_DIR: state, NODE_DISABLE_COMPILE_CACHE: '1' },
      });
      leaks.track(r.pid);
      expect(r.status).toBe(125);
      expect(r.stdout).toBe('');
      expect(r.stderr.split('\n')[0]).toBe(
        `procwarden run: cwd "${closed}": permission denied: this process (uid ${NOBODY}) may not enter it (no search permission); give a directory this user can enter, or change its permissions.`,
      );
    });
  },
);
