// Issue 44, item 5: a run's processes are the OOM killer's choice before their host. By default
// the command starts with the host's oom_score_adj + 500 (capped at 1000), set by the shell that
// execs it before its first instruction, so that everything it forks inherits it; `false` leaves
// the host's value. Real processes print their own scores: the command (read by a builtin, its
// first instruction), a child and a grandchild.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { throughShim } from '../src/containment/index.js';
import { isProcwardenError, type RunSpec, Supervisor } from '../src/index.js';
import { normalizeOomScoreAdj } from '../src/options/index.js';
import { planOomScore } from '../src/spawn/index.js';
import { cgroupSkipReason, hostCgroups, sweepCgroups } from './helpers/cgroups.js';
import { startCli } from './helpers/cli.js';
import { startHost } from './helpers/host.js';
import { LeakGuard, makeTmp } from './helpers/procs.js';
import { ptySkipReason } from './helpers/pty.js';

const linux = process.platform === 'linux';
const cgroupSkip = linux ? cgroupSkipReason() : 'not Linux';
const ptySkip = ptySkipReason();

/** The command's own score (a builtin's read: no fork before it), a child's and a grandchild's. */
const PROBE = [
  'read own < /proc/$$/oom_score_adj',
  'echo "command $own"',
  "printf 'child '",
  'cat /proc/self/oom_score_adj',
  "printf 'grandchild '",
  // `; exit 0`: without it dash would exec cat in its own place, a child and not a grandchild.
  "sh -c 'cat /proc/self/oom_score_adj; exit 0'",
].join('; ');

type Scores = Record<'command' | 'child' | 'grandchild', number>;

/** The three scores the probe printed (a terminal's lines end in \r\n). */
function scores(text: string): Partial<Scores> {
  const out: Partial<Scores> = {};
  for (const m of text.matchAll(/^(command|child|grandchild) (-?\d+)\r?$/gm))
    out[m[1] as keyof Scores] = Number(m[2]);
  return out;
}

const each = (value: number): Scores => ({ command: value, child: value, grandchild: value });
const ownScore = () => Number(readFileSync('/proc/self/oom_score_adj', 'utf8'));
const raised = (host: number, by: number) => Math.min(1000, host + by);

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

/** Runs the probe with `fields`; every process of the run carries a tracked directory. */
async function probe(fields: Partial<RunSpec>, on: Supervisor = sup) {
  const dir = leaks.trackDir(makeTmp());
  const handle = on.spawn({
    argv: ['sh', '-c', PROBE],
    timeoutMs: 30_000,
    ...fields,
    env: { FIXTURE_DIR: dir, ...fields.env },
  });
  leaks.track(handle.pid);
  const result = await handle.result;
  return { result, scores: scores(result.stdout.text) };
}

describe('oomScoreAdj: the setting (no processes)', () => {
  it('is an increase from 0 to 2000, or false; anything else is INVALID_OPTION with what to give', () => {
    expect(normalizeOomScoreAdj(undefined)).toEqual({ raise: 500, explicit: false });
    expect(normalizeOomScoreAdj(false)).toBeNull();
    expect(normalizeOomScoreAdj(0)).toEqual({ raise: 0, explicit: true });
    expect(normalizeOomScoreAdj(2000)).toEqual({ raise: 2000, explicit: true });
    for (const bad of [-1, 2001, 1.5, Number.NaN, '500', true, null, {}]) {
      let caught: unknown;
      try {
        sup.spawn({ argv: ['true'], oomScoreAdj: bad as number });
      } catch (error) {
        caught = error;
      }
      expect(isProcwardenError(caught) && caught.code, String(bad)).toBe('INVALID_OPTION');
      expect((caught as Error).message).toMatch(/^oomScoreAdj: .* give a whole number from 0 to 2000/);
    }
    expect(() => sup.spawn({ argv: ['true'], oomScoreAdj: -100 })).toThrow(/needs CAP_SYS_RESOURCE/);
    // A supervisor's default is checked when the supervisor is made.
    expect(() => new Supervisor({ defaults: { oomScoreAdj: -1 } })).toThrow(/^oomScoreAdj: -1 /);
  });

  it('is planned from the host score: capped at 1000, nothing to write when nothing changes', () => {
    const dir = leaks.trackDir(makeTmp());
    const file = join(dir, 'oom_score_adj');
    const at = (score: string) => {
      writeFileSync(file, score);
      return { platform: 'linux' as const, file };
    };
    const byDefault = { raise: 500, explicit: false };
    expect(planOomScore(byDefault, at('0\n'))).toEqual({ write: { value: 500, required: false } });
    expect(planOomScore(byDefault, at('-1000\n'))).toEqual({ write: { value: -500, required: false } });
    expect(planOomScore(byDefault, at('800\n'))).toEqual({ write: { value: 1000, required: false } });
    expect(planOomScore(byDefault, at('1000\n'))).toEqual({});
    expect(planOomScore({ raise: 0, explicit: true }, at('10\n'))).toEqual({});
    expect(planOomScore({ raise: 2000, explicit: true }, at('-1000\n'))).toEqual({
      write: { value: 1000, required: true },
    });
    expect(planOomScore(null, at('0\n'))).toEqual({});
    // What cannot be read: the default gives way with a note, an explicit setting throws.
    const missing = { platform: 'linux' as const, file: join(dir, 'missing') };
    expect(planOomScore(byDefault, missing)).toEqual({
      note: `oomScoreAdj: the command keeps this process's OOM score: ${missing.file} cannot be read (ENOENT)`,
    });
    expect(() => planOomScore({ raise: 300, explicit: true }, missing)).toThrow(
      expect.objectContaining({ code: 'OOM_SCORE_UNAVAILABLE' }),
    );
    expect(planOomScore(byDefault, at('lots'))).toEqual({
      note: expect.stringContaining('cannot be read (it holds "lots", not a score)'),
    });
    // Elsewhere than on Linux nothing is done; only an explicit setting says so.
    expect(planOomScore(byDefault, { platform: 'darwin', file })).toEqual({});
    expect(planOomScore({ raise: 500, explicit: true }, { platform: 'darwin', file }).note).toMatch(
      /not applied: .* this is darwin/,
    );
  });

  it('the shim sets the score before the exec, and the plan it returns asks nothing more', () => {
    const plan = {
      file: 'true',
      args: ['x'],
      cwd: undefined,
      env: { PATH: '/usr/bin:/bin' },
      newSession: true,
    };
    expect(throughShim(plan, null)).toEqual(plan);
    const shimmed = throughShim({ ...plan, oomScore: { value: 700, required: false } }, null);
    expect(shimmed).not.toHaveProperty('oomScore');
    expect(shimmed.file).toBe('/bin/sh');
    expect(shimmed.command).toBe('true');
    expect(shimmed.args[1]).toBe('{ echo 700 > /proc/self/oom_score_adj; } 2>/dev/null; exec "$@"');
    expect(shimmed.args.slice(2)).toEqual(['true', 'true', 'x']);
    // With a cgroup, one shell does both: the cgroup first, then the score.
    const both = throughShim({ ...plan, oomScore: { value: 700, required: true } }, '/cg/cgroup.procs');
    expect(both.args[1]).toMatch(/^echo \$\$ > "\$1" .*; shift; \{ echo 700 > .* exit 125; \}; exec "\$@"$/);
    expect(both.args.slice(2)).toEqual(['true', '/cg/cgroup.procs', 'true', 'x']);
    // A script whose #! interpreter is missing runs nothing: with no cgroup to enter, no shell
    // starts it, and it fails as it would without one (spawn-error ENOENT naming the interpreter).
    const dir = leaks.trackDir(makeTmp());
    const script = join(dir, 'pw-no-interpreter');
    writeFileSync(script, '#!/nonexistent/interpreter\n', { mode: 0o755 });
    const orphan = { ...plan, file: script, oomScore: { value: 700, required: true } };
    expect(throughShim(orphan, null)).toEqual({ ...plan, file: script });
    expect(throughShim(orphan, '/cg/cgroup.procs').file).toBe('/bin/sh');
    // A command that is nowhere is left to fail the usual way, without a shell.
    expect(
      throughShim({ ...plan, file: 'pw-no-such-command', oomScore: { value: 1, required: true } }, null),
    ).toEqual({ ...plan, file: 'pw-no-such-command' });
  });
});

describe.skipIf(!linux)('oomScoreAdj: the shim, run', () => {
  const shimRun = (value: number, required: boolean) => {
    const plan = throughShim(
      {
        file: 'sh',
        args: ['-c', 'read own < /proc/$$/oom_score_adj; echo "ran $own"'],
        cwd: undefined,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        newSession: false,
        oomScore: { value, required },
      },
      null,
    );
    const r = spawnSync(plan.file, plan.args, { env: plan.env, encoding: 'utf8', timeout: 20_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  it('a write the kernel refuses: required, nothing runs (125, the reason on stderr); else the command runs', () => {
    const host = ownScore();
    // 5000 is out of the kernel's range: the write fails (EINVAL), as a read-only /proc would make it.
    expect(shimRun(5000, true)).toEqual({
      status: 125,
      stdout: '',
      stderr: 'procwarden: cannot set oom_score_adj to 5000 (/proc/self/oom_score_adj refused it)\n',
    });
    expect(shimRun(5000, false)).toEqual({ status: 0, stdout: `ran ${host}\n`, stderr: '' });
    const value = raised(host, 1);
    expect(shimRun(value, true)).toEqual({ status: 0, stdout: `ran ${value}\n`, stderr: '' });
  });
});

const host = linux ? ownScore() : 0;
/** The raise cannot be seen from a host already at 1000. */
const atMax = host >= 1000 ? `this process's oom_score_adj is ${host} already` : null;

describe.skipIf(!linux || atMax !== null)(
  `oomScoreAdj in every mode${atMax ? ` (skipped: ${atMax})` : ''}`,
  () => {
    const modes: [string, Partial<RunSpec>, string | null][] = [
      ['process group', { containment: 'process-group' }, null],
      ['no containment', { containment: 'none' }, null],
      ["the caller's own group (inheritGroup)", { containment: 'process-group', inheritGroup: true }, null],
      ['a PTY', { mode: 'pty', containment: 'process-group' }, ptySkip],
    ];
    for (const [name, fields, skip] of modes) {
      it.skipIf(skip !== null)(
        `${name}: the command and its descendants score the host's + 500`,
        async () => {
          const { result, scores: seen } = await probe(fields);
          expect(result.reason).toBe('exit');
          expect(result.exitCode).toBe(0);
          expect(seen).toEqual(each(raised(host, 500)));
          expect(result.notes).toEqual([]);
          // The host itself is untouched.
          expect(ownScore()).toBe(host);
        },
      );

      it.skipIf(skip !== null)(
        `${name}: false leaves the host's score, a number raises by that`,
        async () => {
          expect((await probe({ ...fields, oomScoreAdj: false })).scores).toEqual(each(host));
          expect((await probe({ ...fields, oomScoreAdj: 0 })).scores).toEqual(each(host));
          expect((await probe({ ...fields, oomScoreAdj: 123 })).scores).toEqual(each(raised(host, 123)));
          expect((await probe({ ...fields, oomScoreAdj: 2000 })).scores).toEqual(each(1000));
        },
      );
    }

    it('names the shell would drop: the default gives way (noted); an explicit value hands them on through env', async () => {
      const dir = leaks.trackDir(makeTmp());
      const spec = {
        // The command's own environment as it got it (dash would not hand A.B on to a child of its own).
        argv: ['sh', '-c', `${PROBE}; printf '%s' "$(tr '\\0' '\\n' < /proc/$$/environ | grep '^A\\.B=')"`],
        containment: 'process-group',
        env: { 'A.B': 'kept', FIXTURE_DIR: dir },
      } as const;
      const byDefault = await sup.spawn(spec).result;
      expect(scores(byDefault.stdout.text)).toEqual(each(host));
      expect(byDefault.stdout.text.endsWith('A.B=kept')).toBe(true);
      expect(byDefault.notes).toEqual([
        "oomScoreAdj: the command keeps this process's OOM score: its environment has names a shell drops or changes (A.B), which it would pass on only through a command line anyone can read",
      ]);
      const explicit = await sup.spawn({ ...spec, oomScoreAdj: 500 }).result;
      expect(scores(explicit.stdout.text)).toEqual(each(raised(host, 500)));
      expect(explicit.stdout.text.endsWith('A.B=kept')).toBe(true);
    });

    it("without a PATH, or with '=' in the command's name, the default gives way too (review)", async () => {
      const dir = leaks.trackDir(makeTmp());
      const noPath = await sup.spawn({
        argv: ['sh', '-c', PROBE],
        containment: 'process-group',
        extendEnv: false,
        env: { FIXTURE_DIR: dir },
      }).result;
      expect(scores(noPath.stdout.text)).toEqual(each(host));
      expect(noPath.notes.join('\n')).toMatch(/its environment has no PATH/);
      const named = join(dir, 'x=y');
      writeFileSync(named, `#!/bin/sh\n${PROBE}\n`, { mode: 0o755 });
      const eq = await sup.spawn({ argv: [named], containment: 'process-group', env: { FIXTURE_DIR: dir } })
        .result;
      expect(scores(eq.stdout.text)).toEqual(each(host));
      expect(eq.notes.join('\n')).toMatch(/command's name holds '='/);
    });

    it('a command that cannot run is still a spawn-error, not a shell exit 127 (no shell starts it)', async () => {
      const dir = leaks.trackDir(makeTmp());
      const script = join(dir, 'pw-no-interpreter');
      writeFileSync(script, '#!/nonexistent/interpreter\n', { mode: 0o755 });
      for (const argv of [[script], ['pw-no-such-command']] as const) {
        const r = await sup.spawn({ argv, containment: 'process-group' }).result;
        expect(r.reason, argv[0]).toBe('spawn-error');
        expect(r.error?.code, argv[0]).toBe('ENOENT');
      }
    });

    it("a supervisor's default applies to its runs, and a spec's own value wins", async () => {
      const off = new Supervisor({ defaults: { oomScoreAdj: false, containment: 'process-group' } });
      leaks.trackCookie(off.id);
      expect((await probe({}, off)).scores).toEqual(each(host));
      expect((await probe({ oomScoreAdj: 200 }, off)).scores).toEqual(each(raised(host, 200)));
    });

    it("where the host's score cannot be read: the default runs the command with it and notes why; an explicit value throws", async () => {
      const blind = new Supervisor({
        oomScoreHost: { platform: 'linux', file: '/proc/self/pw-no-such-file' },
        defaults: { containment: 'process-group' },
      });
      leaks.trackCookie(blind.id);
      const { result, scores: seen } = await probe({}, blind);
      expect(seen).toEqual(each(host));
      expect(result.notes).toEqual([
        "oomScoreAdj: the command keeps this process's OOM score: /proc/self/pw-no-such-file cannot be read (ENOENT)",
      ]);
      const dir = leaks.trackDir(makeTmp());
      let caught: unknown;
      try {
        blind.spawn({ argv: ['sh', '-c', 'sleep 30'], oomScoreAdj: 500, env: { FIXTURE_DIR: dir } });
      } catch (error) {
        caught = error;
      }
      expect(isProcwardenError(caught) && caught.code).toBe('OOM_SCORE_UNAVAILABLE');
      expect((caught as Error).message).toMatch(/give oomScoreAdj: false .* to run the command/);
      expect(blind.list()).toHaveLength(1);
    });

    it('off Linux nothing is changed; an explicit value says so in the notes', async () => {
      const other = new Supervisor({
        oomScoreHost: { platform: 'darwin', file: '/proc/self/oom_score_adj' },
        defaults: { containment: 'process-group' },
      });
      leaks.trackCookie(other.id);
      const byDefault = await probe({}, other);
      expect(byDefault.scores).toEqual(each(host));
      expect(byDefault.result.notes).toEqual([]);
      const explicit = await probe({ oomScoreAdj: 300 }, other);
      expect(explicit.scores).toEqual(each(host));
      expect(explicit.result.notes).toEqual([
        "oomScoreAdj: not applied: the OOM killer's scores are Linux's, and this is darwin",
      ]);
    });
  },
);

describe.skipIf(cgroupSkip !== null || atMax !== null)(
  `oomScoreAdj in a cgroup${cgroupSkip || atMax ? ` (skipped: ${cgroupSkip ?? atMax})` : ''}`,
  () => {
    afterEach(async () => {
      expect(await sweepCgroups(), 'cgroups left behind (now removed)').toEqual([]);
    });

    it("the cgroup's shim sets it too: the host's + 500, or the host's with false", async () => {
      const { result, scores: seen } = await probe({ containment: 'cgroup' });
      expect(result.containment).toBe('cgroup');
      expect(seen).toEqual(each(raised(host, 500)));
      expect((await probe({ containment: 'cgroup', oomScoreAdj: false })).scores).toEqual(each(host));
      const pty = ptySkip === null ? await probe({ containment: 'cgroup', mode: 'pty' }) : null;
      if (pty) expect(pty.scores).toEqual(each(raised(host, 500)));
    });
  },
);

/** A host process (the built library) that raised its own score to `own` before its run. */
async function fromHost(own: number, fields: Partial<RunSpec>) {
  const dir = leaks.trackDir(makeTmp());
  const h = startHost('host-oom.mjs', [
    String(own),
    JSON.stringify({ ...fields, env: { FIXTURE_DIR: dir } }),
    'sh',
    '-c',
    PROBE,
  ]);
  leaks.track(h.child.pid);
  leaks.trackCookie(await h.line('supervisor'));
  const result = JSON.parse(await h.line('result')) as {
    own: number;
    stdout: string;
    reason: string;
    containment: string;
    notes: string[];
  };
  expect(await h.exited).toEqual({ code: 0, signal: null });
  return { ...result, scores: scores(result.stdout), pid: h.child.pid ?? 0 };
}

describe.skipIf(!linux || host > 800)(
  `a host at 800${linux && host > 800 ? ` (skipped: this process is at ${host})` : ''}`,
  () => {
    it('its runs score 1000 (the cap) in a process group, 800 with false, 900 with 100', async () => {
      const r = await fromHost(800, { containment: 'process-group' });
      expect(r.own).toBe(800);
      expect(r.reason).toBe('exit');
      expect(r.scores).toEqual(each(1000));
      expect(r.notes).toEqual([]);
      expect((await fromHost(800, { containment: 'process-group', oomScoreAdj: false })).scores).toEqual(
        each(800),
      );
      expect((await fromHost(800, { containment: 'process-group', oomScoreAdj: 100 })).scores).toEqual(
        each(900),
      );
    });

    it.skipIf(ptySkip !== null)('its PTY runs score 1000', async () => {
      expect((await fromHost(800, { mode: 'pty', containment: 'process-group' })).scores).toEqual(each(1000));
    });

    it.skipIf(cgroupSkip !== null)('its cgroup runs score 1000', async () => {
      const r = await fromHost(800, { containment: 'cgroup' });
      expect(r.containment).toBe('cgroup');
      expect(r.scores).toEqual(each(1000));
      expect(await hostCgroups(r.pid)).toEqual([]);
    });
  },
);

describe.skipIf(!linux || atMax !== null)('procwarden run --oom-score-adj', () => {
  /** `procwarden run ARGS -- sh -c PROBE`, the CLI being the host (its score is ours, inherited). */
  async function cli(args: string[]) {
    const dir = leaks.trackDir(makeTmp());
    const c = startCli(['run', '--env', `FIXTURE_DIR=${dir}`, ...args, '--', 'sh', '-c', PROBE]);
    leaks.track(c.child.pid);
    leaks.trackCookie(`pw${(c.child.pid ?? 0).toString(36)}`);
    const r = await c.done;
    return { status: r.status, stderr: r.stderr, scores: scores(r.stdout.toString()) };
  }

  it('raises by 500 by default, by N with N, not at all with off', async () => {
    expect(await cli([])).toEqual({ status: 0, stderr: '', scores: each(raised(host, 500)) });
    expect(await cli(['--oom-score-adj', 'off'])).toEqual({ status: 0, stderr: '', scores: each(host) });
    expect(await cli(['--oom-score-adj', '250', '--containment', 'process-group'])).toEqual({
      status: 0,
      stderr: '',
      scores: each(raised(host, 250)),
    });
    expect((await cli(['--oom-score-adj=2000'])).scores).toEqual(each(1000));
  });

  it('a bad value is a usage error (125) and nothing runs', async () => {
    for (const bad of ['-5', 'abc', '2001', '', 'on']) {
      const r = await cli([`--oom-score-adj=${bad}`]);
      expect(r.status, bad).toBe(125);
      expect(r.scores, bad).toEqual({});
      expect(r.stderr, bad).toContain(
        `--oom-score-adj ${JSON.stringify(bad)}: give a whole number from 0 to 2000`,
      );
    }
  });

  it('timeout leaves the score as timeout(1) does', async () => {
    const dir = leaks.trackDir(makeTmp());
    const c = startCli(['timeout', '30', 'sh', '-c', PROBE], { env: { FIXTURE_DIR: dir } });
    leaks.track(c.child.pid);
    const r = await c.done;
    expect(r.status).toBe(0);
    expect(scores(r.stdout.toString())).toEqual(each(host));
  });
});
