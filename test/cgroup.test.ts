import { existsSync, mkdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { killAll } from '../src/containment/cgroup-fs.js';
import {
  CgroupHost,
  createContainment,
  locateOwnCgroup,
  parseMountinfo,
  parseOwnCgroup,
} from '../src/containment/index.js';
import { throughShim } from '../src/containment/shim.js';
import { ProcwardenError, Supervisor } from '../src/index.js';
import { ProcfsTable } from '../src/tree/index.js';
import { cgroupOf, cgroupSkipReason, parentCgroup, sweepCgroups } from './helpers/cgroups.js';
import { alive, exists, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';
import { writableCgroupMount } from './helpers/reap.js';

const HYBRID = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;
const PURE_V2 = '25 20 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n';
const CONTAINER_RO = '610 600 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw\n';
const BIND = '99 1 0:40 /kubepods/pod1 /mnt/my\\040cgroups rw,relatime - cgroup2 cgroup2 rw\n';

describe('the cgroup shim (no root needed)', () => {
  it('puts only what its shell would drop or reset on a command line, never another value (review)', () => {
    const plan = {
      file: 'true',
      args: ['x'],
      cwd: undefined,
      env: { PATH: '/usr/bin:/bin', API_TOKEN: 'secret-value', 'A.B': '1', IFS: ':' },
      newSession: true,
    };
    const shimmed = throughShim(plan, '/sys/fs/cgroup/x/cgroup.procs');
    expect(shimmed.file).toBe('/bin/sh');
    // The shell does not see what env(1) gives back (dash refuses an OPTIND that is no number).
    const { IFS: _ifs, ...rest } = plan.env;
    expect(shimmed.env).toEqual(rest);
    expect(shimmed.args.join('\n')).not.toContain('secret-value');
    expect(shimmed.args.slice(-6)).toEqual(['/usr/bin/env', '--', 'A.B=1', 'IFS=:', 'true', 'x']);
    // Without a PATH of the run's, env is given the command found by the same search as the check.
    const bare = throughShim({ ...plan, env: { 'A.B': '1' } }, '/x');
    expect(bare.args.slice(-3)).toEqual(['A.B=1', '/usr/bin/true', 'x']);
    // The usual environment: no env at all.
    expect(throughShim({ ...plan, env: { PATH: '/usr/bin:/bin' } }, '/x').args).not.toContain('/usr/bin/env');
  });
});

describe('cgroup v2 discovery (no root needed)', () => {
  it('finds the cgroup2 mount in hybrid and pure-v2 layouts, never by a fixed path', () => {
    expect(parseMountinfo(HYBRID)).toEqual([
      { mountPoint: '/sys/fs/cgroup/unified', root: '/', readOnly: false },
    ]);
    expect(parseMountinfo(PURE_V2)).toEqual([{ mountPoint: '/sys/fs/cgroup', root: '/', readOnly: false }]);
    expect(parseMountinfo(CONTAINER_RO)[0]?.readOnly).toBe(true);
    expect(parseMountinfo(BIND)[0]).toEqual({
      mountPoint: '/mnt/my cgroups',
      root: '/kubepods/pod1',
      readOnly: false,
    });
  });

  it('reads our own cgroup and joins it to the mount', () => {
    expect(parseOwnCgroup('4:memory:/x\n0::/user.slice/session-1.scope\n')).toBe(
      '/user.slice/session-1.scope',
    );
    expect(parseOwnCgroup('4:memory:/x\n')).toBeNull();
    expect(locateOwnCgroup(HYBRID, '0::/\n')).toEqual({ dir: '/sys/fs/cgroup/unified' });
    expect(locateOwnCgroup(PURE_V2, '0::/a/b\n')).toEqual({ dir: '/sys/fs/cgroup/a/b' });
    expect(locateOwnCgroup(BIND, '0::/kubepods/pod1/c\n')).toEqual({ dir: '/mnt/my cgroups/c' });
  });

  it('says why when there is no usable hierarchy', () => {
    expect(locateOwnCgroup(HYBRID, '4:memory:/x\n')).toMatchObject({
      reason: expect.stringContaining('0::'),
    });
    expect(locateOwnCgroup('1 0 8:1 / / rw - ext4 /dev/sda rw\n', '0::/\n')).toMatchObject({
      reason: expect.stringContaining('no cgroup2'),
    });
    expect(locateOwnCgroup(CONTAINER_RO, '0::/\n')).toMatchObject({
      reason: expect.stringContaining('read-only'),
    });
    expect(locateOwnCgroup(BIND, '0::/elsewhere\n')).toMatchObject({
      reason: expect.stringContaining('/elsewhere'),
    });
  });

  it("explicit 'cgroup' without a hierarchy is CGROUP_UNAVAILABLE; 'auto' falls back to process-group", async () => {
    const fake = makeTmp();
    try {
      writeFileSync(join(fake, 'mountinfo'), '1 0 8:1 / / rw - ext4 /dev/sda rw\n');
      writeFileSync(join(fake, 'cgroup'), '0::/\n');
      writeFileSync(join(fake, 'stat'), readFileSync('/proc/self/stat'));
      const sup = new Supervisor({ cgroups: new CgroupHost({ procSelf: fake }) });
      let error: unknown;
      try {
        sup.spawn({ argv: ['true'], containment: 'cgroup' });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ProcwardenError);
      expect((error as ProcwardenError).code).toBe('CGROUP_UNAVAILABLE');
      expect((error as Error).message).toMatch(/no cgroup2 filesystem is mounted.*'auto' or 'process-group'/);
      const r = await sup.spawn({ argv: ['true'] }).result;
      expect(r.containment).toBe('process-group');
      expect(r.containmentFallback).toBeUndefined();
      expect(sup.spawn({ argv: ['true'], containment: 'none' }).containment).toBe('none');
    } finally {
      rmSync(fake, { recursive: true, force: true });
    }
  });

  it("'auto' says so in containmentFallback when the probe passed but the run's cgroup could not be made", async () => {
    class FullHost extends CgroupHost {
      override probe() {
        return { ok: true as const, parent: '/unused', own: '/unused' };
      }
      override createRun(): string {
        throw new ProcwardenError('CGROUP_UNAVAILABLE', 'cgroup.max.descendants reached');
      }
    }
    const sup = new Supervisor({ cgroups: new FullHost() });
    const r = await sup.spawn({ argv: ['true'] }).result;
    expect(r.containment).toBe('process-group');
    expect(r.containmentFallback).toContain('cgroup.max.descendants reached');
    expect(() => sup.spawn({ argv: ['true'], containment: 'cgroup' })).toThrow(/max\.descendants/);
  });

  it('is Linux only', () => {
    expect(new CgroupHost({ platform: 'darwin' }).probe()).toEqual({
      ok: false,
      reason: 'cgroups exist only on Linux, not on darwin',
    });
  });

  it('killAll reports a kernel without cgroup.kill instead of failing', () => {
    const fake = makeTmp();
    writeFileSync(join(fake, 'cgroup.events'), 'populated 1\nfrozen 0\n');
    expect(killAll(fake)).toBe(false);
    expect(existsSync(join(fake, 'cgroup.kill'))).toBe(false);
    rmSync(fake, { recursive: true, force: true });
  });
});

const skip = cgroupSkipReason();

describe.skipIf(skip !== null)(`cgroup containment${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const sup = new Supervisor();
  const leaks = new LeakGuard();
  leaks.trackCookie(sup.id);
  afterEach(async () => {
    const left = await sweepCgroups();
    await leaks.check();
    expect(left, 'cgroups left behind (now removed)').toEqual([]);
  });

  it("'auto' picks cgroup here; the run's pid is the command's, inside the run's cgroup", async () => {
    const dir = leaks.trackDir(makeTmp());
    let out = '';
    const handle = sup.spawn({
      argv: [fixture('ignore-term.sh'), dir],
      output: {
        onData: (t) => {
          out += t;
        },
      },
    });
    leaks.track(handle.pid);
    expect(handle.containment).toBe('cgroup');
    await waitFor(() => out.includes('ready'));
    expect(readPids(dir).get('main')).toBe(handle.pid);
    expect(cgroupOf(handle.pid ?? 0)).toMatch(new RegExp(`/procwarden-${process.pid}-\\d+/${handle.id}$`));
    handle.kill();
    const r = await handle.result;
    expect(r.containment).toBe('cgroup');
    expect(r.exitSignal).toBe('SIGKILL');
    expect(r.tree.report?.notes.join()).not.toMatch(/cgroup\.kill/);
    expect(existsSync(join(parentCgroup() ?? '/nonexistent', handle.id))).toBe(false);
  });

  it('the command gets its environment as given, names the shim shell would drop or reset included (review)', async () => {
    const env = {
      'A.B': '1',
      'my-var': 'x y',
      IFS: ':',
      PPID: 'abc',
      OPTIND: 'not a number',
      MULTI: 'a\nb=c',
    };
    const r = await sup.spawn({
      argv: [process.execPath, '-e', 'process.stdout.write(JSON.stringify(process.env))'],
      containment: 'cgroup',
      env,
      extendEnv: false,
    }).result;
    expect(r.containment).toBe('cgroup');
    const seen = JSON.parse(r.stdout.text);
    expect(seen).toMatchObject(env);
    // Nothing else but the run's cookie and the shell's PWD (documented).
    expect(Object.keys(seen).sort()).toEqual([...Object.keys(env), 'PROCWARDEN_RUN', 'PWD'].sort());
    // The usual environment goes as it is, without the extra exec.
    const plain = await sup.spawn({
      argv: ['sh', '-c', 'printf %s "$X"'],
      containment: 'cgroup',
      env: { X: 'y z' },
    }).result;
    expect(plain.stdout.text).toBe('y z');
  });

  it('holds a daemon that cleared its environment (setsid + double fork + env -i)', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await sup.spawn({ argv: [fixture('envi-escapee.sh'), dir], containment: 'cgroup' }).result;
    expect(r.reason).toBe('exit');
    expect(r.tree.leftovers).toBe(1);
    expect(alive(readPids(dir).get('escapee') ?? 0)).toBe(false);
  });

  it('the same escapee outlives process-group containment (the documented limit)', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await sup.spawn({ argv: [fixture('envi-escapee.sh'), dir], containment: 'process-group' })
      .result;
    expect(r.containment).toBe('process-group');
    const escapee = readPids(dir).get('escapee') ?? 0;
    expect(alive(escapee)).toBe(true);
    process.kill(escapee, 'SIGKILL');
    await waitFor(() => !alive(escapee));
  });

  it('a stopped member gets the graceful signal, then SIGCONT, and cleans up within the grace', async () => {
    const dir = leaks.trackDir(makeTmp());
    let out = '';
    const handle = sup.spawn({
      argv: [fixture('stopped.sh'), dir],
      output: {
        onData: (t) => {
          out += t;
        },
      },
    });
    leaks.track(handle.pid);
    await waitFor(() => out.includes('ready'));
    await waitFor(() => new ProcfsTable().getSync(handle.pid ?? 0)?.state === 'T', { what: 'stopped' });
    handle.cancel();
    const r = await handle.result;
    expect(r.escalated).toBe(false);
    expect(exists(join(dir, 'term.done'))).toBe(true);
    const signals = r.tree.report?.members.find((m) => m.pid === handle.pid)?.signals.map((s) => s.signal);
    expect(signals).toEqual(['SIGTERM']);
  });

  it('escalates by cgroup.kill when the grace ends', async () => {
    const dir = leaks.trackDir(makeTmp());
    let out = '';
    const handle = sup.spawn({
      argv: [fixture('orphan-ignores-term.sh'), dir],
      graceMs: 300,
      output: {
        onData: (t) => {
          out += t;
        },
      },
    });
    await waitFor(() => out.includes('ready'));
    handle.cancel();
    const r = await handle.result;
    expect(r.reason).toBe('cancelled');
    expect(r.escalated).toBe(true);
    expect(r.tree.killed).toBeGreaterThanOrEqual(1);
    expect(alive(readPids(dir).get('child') ?? 0)).toBe(false);
  });

  it('a command that cannot be started is still a spawn-error, and its cgroup is removed', async () => {
    const missing = await sup.spawn({ argv: ['/nonexistent/procwarden-x'], containment: 'cgroup' }).result;
    expect(missing.reason).toBe('spawn-error');
    expect(missing.error?.code).toBe('ENOENT');
    const notFound = await sup.spawn({ argv: ['procwarden-no-such-command'], containment: 'cgroup' }).result;
    expect(notFound.error?.code).toBe('ENOENT');
    const dir = leaks.trackDir(makeTmp());
    writeFileSync(join(dir, 'plain.txt'), 'not executable');
    const denied = await sup.spawn({ argv: [join(dir, 'plain.txt')], containment: 'cgroup' }).result;
    expect(denied.error?.code).toBe('EACCES');
    const ok = await sup.spawn({ argv: ['sh', '-c', 'exit 7'], containment: 'cgroup' }).result;
    expect(ok.exitCode).toBe(7);
  });

  it("'keep' moves leftovers out of the run's cgroup, so it can be removed", async () => {
    const dir = leaks.trackDir(makeTmp());
    const handle = sup.spawn({ argv: [fixture('hold-stdout.sh'), dir], leftovers: 'keep', drainMs: 200 });
    const r = await handle.result;
    expect(r.containment).toBe('cgroup');
    expect(r.tree.leftovers).toBe(1);
    const holder = readPids(dir).get('holder') ?? 0;
    expect(alive(holder)).toBe(true);
    expect(cgroupOf(holder)).not.toContain('procwarden-');
    process.kill(holder, 'SIGKILL');
    await waitFor(() => !alive(holder));
  });

  it('a cgroup that disappears under the run is reported, not a crash', async () => {
    const host = new CgroupHost();
    const table = new ProcfsTable();
    const hold = createContainment('cgroup', { table, cookie: null, name: 'vanishing', cgroups: host });
    const path = (hold as unknown as { cgroupPath: string }).cgroupPath;
    rmdirSync(path);
    expect(await hold.members()).toEqual([]);
    expect(hold.notes?.join()).toContain('disappeared');
    await hold.release();
    expect(existsSync(path)).toBe(false);
  });

  it('the parent cgroup lives exactly as long as runs do', async () => {
    const parent = parentCgroup() ?? '';
    const a = sup.spawn({ argv: ['sleep', '30'] });
    const b = sup.spawn({ argv: ['sleep', '30'] });
    expect(existsSync(join(parent, a.id))).toBe(true);
    expect(existsSync(join(parent, b.id))).toBe(true);
    a.cancel();
    await a.result;
    expect(existsSync(parent)).toBe(true);
    b.cancel();
    await b.result;
    expect(existsSync(parent)).toBe(false);
  });

  it('a child a root member moved out of the cgroup, out of its session and environment, is ended with its parent (review)', async () => {
    const dir = leaks.trackDir(makeTmp());
    // Somewhere else to move it: a cgroup of the test's own, beside procwarden's parent.
    const outside = join(dirname(parentCgroup() ?? '/nonexistent'), `pwtest-out-${process.pid}`);
    mkdirSync(outside);
    try {
      const script = `( echo $BASHPID > "$1/cgroup.procs"; echo $BASHPID > "$2/child.pid"; exec setsid env -i sleep 300 ) & while [ ! -s "$2/child.pid" ]; do sleep 0.01; done; echo ready; exec sleep 300`;
      let out = '';
      const handle = sup.spawn({
        argv: ['bash', '-c', script, 'bash', outside, dir],
        containment: 'cgroup',
        output: {
          onData: (t) => {
            out += t;
          },
        },
      });
      leaks.track(handle.pid);
      await waitFor(() => out.includes('ready'));
      const child = Number(readFileSync(join(dir, 'child.pid'), 'utf8'));
      leaks.track(child);
      // Its parent (the root, inside the cgroup) is its only tie to the run.
      await waitFor(() => {
        try {
          return (
            readFileSync(`/proc/${child}/cmdline`, 'utf8').startsWith('sleep') &&
            readFileSync(`/proc/${child}/environ`).length === 0
          );
        } catch {
          return false;
        }
      });
      expect(cgroupOf(child)).toBe(
        (cgroupOf(process.pid) ?? '').replace(/\/?$/, `/pwtest-out-${process.pid}`),
      );
      handle.cancel();
      const r = await handle.result;
      expect(r.tree.report?.members.map((m) => m.pid)).toContain(child);
      expect(alive(child)).toBe(false);
      expect(r.tree.notes.join('\n')).toMatch(/outside cgroup/);
    } finally {
      for (const pid of readFileSync(join(outside, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean))
        process.kill(Number(pid), 'SIGKILL');
      await waitFor(() => readFileSync(join(outside, 'cgroup.procs'), 'utf8') === '');
      rmdirSync(outside);
    }
  });

  it('a run cgroup a root member made threaded still shows its members: each gets the graceful signal (review)', async () => {
    const dir = leaks.trackDir(makeTmp());
    const outside = join(dirname(parentCgroup() ?? '/nonexistent'), `pwtest-thr-${process.pid}`);
    mkdirSync(outside);
    try {
      // Out, so that the cgroup is empty and may change its type; threaded; then back in, with a
      // member that only the cgroup ties to the run (env -i, setsid, re-parented) and that says
      // so when it gets SIGTERM. cgroup.procs of a threaded cgroup cannot be read.
      const script = `R=$1$(sed -n 's/^0:://p' /proc/self/cgroup); echo $$ > "$2/cgroup.procs"; echo threaded > "$R/cgroup.type"; ( echo $BASHPID > "$R/cgroup.procs"; env -i setsid sh -c 'echo $$ > "$0/child.pid"; trap "echo term > $0/term; exit 0" TERM; while :; do sleep 0.05; done' "$3" & ); echo $$ > "$R/cgroup.procs"; while [ ! -s "$3/child.pid" ]; do sleep 0.01; done; cat "$R/cgroup.type"; echo ready; exec sleep 300`;
      let out = '';
      const handle = sup.spawn({
        argv: ['bash', '-c', script, 'bash', String(writableCgroupMount()).replace(/\/$/, ''), outside, dir],
        containment: 'cgroup',
        output: {
          onData: (t) => {
            out += t;
          },
        },
      });
      leaks.track(handle.pid);
      await waitFor(() => out.includes('ready'));
      expect(out).toMatch(/^threaded/);
      const child = Number(readFileSync(join(dir, 'child.pid'), 'utf8'));
      leaks.track(child);
      handle.cancel();
      const r = await handle.result;
      expect(r.tree.report?.members.map((m) => m.pid)).toEqual(expect.arrayContaining([handle.pid, child]));
      expect(exists(join(dir, 'term'))).toBe(true);
      expect(r.tree.escaped).toBe(0);
      expect(alive(child)).toBe(false);
    } finally {
      rmdirSync(outside);
    }
  });

  it('a command that makes its own sub-cgroup is still held, and the subtree is removed', async () => {
    const dir = leaks.trackDir(makeTmp());
    const script = `cg=$(sed -n 's/^0:://p' /proc/self/cgroup); m=$1; mkdir "$m$cg/inner"; sh -c 'echo $$ > "$0/cgroup.procs"; echo $$ > "$1/inner.pid"; exec sleep 300' "$m$cg/inner" "$2" & while [ ! -s "$2/inner.pid" ]; do sleep 0.01; done; echo ready; exec sleep 300`;
    const mount = (parentCgroup() ?? '').replace(/\/procwarden-[^/]+$/, '');
    mkdirSync(dir, { recursive: true });
    let out = '';
    const handle = sup.spawn({
      argv: ['sh', '-c', script, 'sh', mount.replace(/\/$/, ''), dir],
      containment: 'cgroup',
      output: {
        onData: (t) => {
          out += t;
        },
      },
    });
    await waitFor(() => out.includes('ready'));
    handle.cancel();
    const r = await handle.result;
    expect(r.tree.signalled).toBe(2);
    expect(alive(readPids(dir).get('inner') ?? 0)).toBe(false);
  });
});
