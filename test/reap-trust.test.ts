import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, rmdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { reap, Supervisor } from '../src/index.js';
import { CgroupRemains } from '../src/journal/index.js';
import { journalFiles } from './helpers/host.js';
import { alive, LeakGuard, makeTmp, readPids, startTime, waitFor } from './helpers/procs.js';
import { deadRecord, writableCgroupMount } from './helpers/reap.js';

// Issue 19: a record is a licence to kill, so reap acts only on records nobody else could have
// written, and only on processes and cgroups it can prove are the run's. Each test forges a record
// naming a real victim process (by its pid and its real start time, both readable by anyone in
// /proc); the victim must survive and the report must say what was refused and why.

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const isRoot = process.getuid?.() === 0;
const cgroups = writableCgroupMount();
const cli = join(import.meta.dirname, '..', 'dist', 'cli', 'main.js');

/** An unrelated process leading its own group, with one more member in it. */
async function startVictim(): Promise<{ leader: ChildProcess; member: number; dir: string }> {
  const dir = makeTmp('pw-victim-');
  const leader = spawn('/bin/sh', ['-c', 'sleep 300 & echo $! > "$0/member.pid"; wait', dir], {
    detached: true,
    stdio: 'ignore',
  });
  leaks.track(leader.pid);
  const member = await waitFor(() => readPids(dir).get('member'), { what: 'victim group ready' });
  leaks.track(member);
  return { leader, member, dir };
}

/** Ends the victim's group (ours: we created it) once the test has seen it survive. */
async function endVictim(victim: { leader: ChildProcess; member: number }): Promise<void> {
  const exited = new Promise((resolve) => victim.leader.once('exit', resolve));
  process.kill(-(victim.leader.pid as number), 'SIGKILL');
  await exited;
  await waitFor(() => !alive(victim.member), { what: 'victim member gone' });
}

/** A record naming the victim's leader by pid and start time, as a forger reading /proc would. */
function forgedRecord(runId: string, leader: ChildProcess, fields: Record<string, unknown> = {}): string {
  const pid = leader.pid as number;
  return deadRecord(runId, { pid, pidStart: startTime(pid), pgid: pid, command: 'forged', ...fields });
}

function privateStateDir(): string {
  return leaks.trackDir(makeTmp('pw-state-'));
}

describe('reap trusts only what procwarden wrote (forged records; the victim must survive)', () => {
  it('a world-writable state directory is skipped whole; `procwarden reap` exits 1', async () => {
    const victim = await startVictim();
    try {
      const stateDir = privateStateDir();
      chmodSync(stateDir, 0o777);
      writeFileSync(join(stateDir, 'forged-1.json'), forgedRecord('forged-1', victim.leader), {
        mode: 0o600,
      });
      const report = await reap({ stateDir, graceMs: 100 });
      expect(report.runs).toEqual([]);
      expect(report.skipped).toEqual([
        { file: stateDir, kind: 'untrusted', problem: expect.stringMatching(/writable by group or others/) },
      ]);
      const run = spawnSync(process.execPath, [cli, 'reap', '--state-dir', stateDir], { encoding: 'utf8' });
      expect(run.status, run.stdout + run.stderr).toBe(1);
      expect(run.stdout).toMatch(/skipped .*writable by group or others \(mode 0777\)/);
      expect(alive(victim.leader.pid as number) && alive(victim.member)).toBe(true);
      expect(journalFiles(stateDir)).toEqual(['forged-1.json']);
    } finally {
      await endVictim(victim);
    }
  });

  it('a private state directory below a directory others may write (not sticky) is skipped', async () => {
    const victim = await startVictim();
    try {
      const above = privateStateDir();
      const stateDir = join(above, 'state');
      mkdirSync(stateDir, { mode: 0o700 });
      chmodSync(above, 0o777);
      writeFileSync(join(stateDir, 'forged-2.json'), forgedRecord('forged-2', victim.leader), {
        mode: 0o600,
      });
      const report = await reap({ stateDir, graceMs: 100 });
      expect(report.runs).toEqual([]);
      expect(report.skipped[0]?.problem).toContain(`${above} is writable by group or others`);
      expect(alive(victim.leader.pid as number) && alive(victim.member)).toBe(true);
    } finally {
      await endVictim(victim);
    }
  });

  it.skipIf(!isRoot)(
    `a record file owned by another user (uid 65534) or writable by others is skipped${isRoot ? '' : ' (skipped: not root, cannot chown)'}`,
    async () => {
      const victim = await startVictim();
      try {
        const stateDir = privateStateDir();
        const chowned = join(stateDir, 'forged-3.json');
        writeFileSync(chowned, forgedRecord('forged-3', victim.leader), { mode: 0o600 });
        chownSync(chowned, 65534, 65534);
        const loose = join(stateDir, 'forged-4.json');
        writeFileSync(loose, forgedRecord('forged-4', victim.leader));
        chmodSync(loose, 0o666);
        const report = await reap({ stateDir, graceMs: 100 });
        expect(report.runs).toEqual([]);
        expect(report.skipped).toEqual([
          { file: 'forged-3.json', kind: 'untrusted', problem: expect.stringMatching(/owned by uid 65534/) },
          {
            file: 'forged-4.json',
            kind: 'untrusted',
            problem: expect.stringMatching(/writable by group or others \(mode 0666\)/),
          },
        ]);
        expect(alive(victim.leader.pid as number) && alive(victim.member)).toBe(true);
      } finally {
        await endVictim(victim);
      }
    },
  );

  it('a symlink in the state directory is never followed, even to a record we own', async () => {
    const victim = await startVictim();
    try {
      const stateDir = privateStateDir();
      const elsewhere = leaks.trackDir(makeTmp('pw-elsewhere-'));
      const target = join(elsewhere, 'record.json');
      writeFileSync(target, forgedRecord('forged-5', victim.leader), { mode: 0o600 });
      symlinkSync(target, join(stateDir, 'forged-5.json'));
      const report = await reap({ stateDir, graceMs: 100 });
      expect(report.runs).toEqual([]);
      expect(report.skipped).toEqual([
        { file: 'forged-5.json', kind: 'untrusted', problem: expect.stringMatching(/symbolic link/) },
      ]);
      expect(alive(victim.leader.pid as number) && alive(victim.member)).toBe(true);
    } finally {
      await endVictim(victim);
    }
  });

  it("a record naming the victim's process group: its leader lacks the run cookie, so neither it nor its group is touched", async () => {
    const victim = await startVictim();
    try {
      const stateDir = privateStateDir();
      const cookie = `pwforged${process.pid}-6`;
      writeFileSync(join(stateDir, 'forged-6.json'), forgedRecord('forged-6', victim.leader, { cookie }));
      // And one that names the group alone, with no leader at all.
      const groupOnly = deadRecord('forged-7', { pgid: victim.leader.pid, cookie: `${cookie}x` });
      writeFileSync(join(stateDir, 'forged-7.json'), groupOnly);
      const report = await reap({ stateDir, graceMs: 100 });
      const [six, seven] = report.runs;
      expect(six).toMatchObject({ runId: 'forged-6', action: 'refused', members: [], signalled: 0 });
      expect(six?.refused).toEqual([
        expect.stringMatching(
          new RegExp(
            `pid ${victim.leader.pid} .*its environment lacks the run cookie: left alone, its group too`,
          ),
        ),
      ]);
      expect(seven).toMatchObject({ runId: 'forged-7', action: 'reaped', members: [], signalled: 0 });
      expect(alive(victim.leader.pid as number) && alive(victim.member)).toBe(true);
      expect(journalFiles(stateDir)).toEqual(['forged-6.json']); // kept for a person to look at
    } finally {
      await endVictim(victim);
    }
  });

  it.skipIf(typeof cgroups !== 'string')(
    `a record naming an unrelated cgroup that holds the victim: no cgroup.kill, no member found through it${typeof cgroups === 'string' ? '' : ` (skipped: ${cgroups.why})`}`,
    async () => {
      const victim = await startVictim();
      const unrelated = join(cgroups as string, `pw-victim-${process.pid}-${Date.now()}`);
      try {
        mkdirSync(unrelated);
        writeFileSync(join(unrelated, 'cgroup.procs'), String(victim.leader.pid));
        writeFileSync(join(unrelated, 'cgroup.procs'), String(victim.member));
        const stateDir = privateStateDir();
        // Its supervisor fields even match what the cgroup would need to be called: still refused.
        const record = forgedRecord('forged-8', victim.leader, {
          cgroupPath: unrelated,
          supervisorStart: '1',
        });
        writeFileSync(join(stateDir, 'forged-8.json'), record);
        const report = await reap({ stateDir, graceMs: 100 });
        const run = report.runs[0];
        expect(run).toMatchObject({ action: 'refused', members: [], signalled: 0 });
        expect(run?.refused).toEqual([
          expect.stringMatching(/is not one procwarden makes for supervisor .*: left alone/),
          expect.stringMatching(/the run cgroup is not trusted: left alone, its group too/),
        ]);
        expect(alive(victim.leader.pid as number) && alive(victim.member)).toBe(true);
        expect(existsSync(unrelated)).toBe(true);
      } finally {
        await endVictim(victim);
        for (let i = 0; i < 100 && existsSync(unrelated); i++) {
          try {
            rmdirSync(unrelated);
          } catch {
            await new Promise((r) => setTimeout(r, 10)); // the killed victim leaves it in a moment
          }
        }
      }
    },
  );

  it.skipIf(typeof cgroups !== 'string')(
    "only procwarden's cgroup names for the record's own supervisor are acted on",
    () => {
      const mount = cgroups as string;
      const verdict = (cgroupPath: string, supervisorStart: string | null, supervisorPid = 4242) => {
        const opened = CgroupRemains.forRecord({ cgroupPath, supervisorPid, supervisorStart });
        return typeof opened === 'string' ? opened : 'ok';
      };
      expect(verdict(`${mount}/procwarden-4242-777/run-1`, '777')).toBe('ok');
      expect(verdict(`${mount}/procwarden-4242-777`, '777')).toBe('ok');
      // The first record of a run can be written before its supervisor read its own start time.
      expect(verdict(`${mount}/procwarden-4242-777/run-1`, null)).toBe('ok');
      expect(verdict(`${mount}/procwarden-4242-777/run-1`, '778')).toMatch(/not one procwarden makes/);
      expect(verdict(`${mount}/procwarden-4242-777/run-1`, '777', 4243)).toMatch(/not one procwarden makes/);
      expect(verdict(`${mount}/system.slice/postgresql.service`, null)).toMatch(/not one procwarden makes/);
      expect(verdict(`${mount}/procwarden-4242-777/run-1/deeper`, '777')).toMatch(/not one procwarden makes/);
      expect(verdict(`/tmp/procwarden-4242-777/run-1`, '777')).toMatch(/not below a cgroup2 mount/);
    },
  );

  it.skipIf(!isRoot)(
    `a state directory reached through a link another user can re-point is not trusted${isRoot ? '' : ' (skipped: not root, cannot chown)'}`,
    async () => {
      // The link points at a private directory, but it sits in a directory uid 65534 owns: they
      // could point it at a directory of theirs after a check, and plant links there.
      const base = leaks.trackDir(makeTmp('pw-link-'));
      const target = join(base, 'private');
      mkdirSync(target, { mode: 0o700 });
      const theirs = join(base, 'theirs');
      mkdirSync(theirs, { mode: 0o755 });
      chownSync(theirs, 65534, 65534);
      symlinkSync(target, join(theirs, 'state'));
      const viaTheirs = join(theirs, 'state');
      const sup = new Supervisor({ stateDir: viaTheirs, watchdog: false });
      leaks.trackCookie(sup.id);
      expect((await sup.spawn({ argv: ['true'] }).result).reason).toBe('exit');
      expect(sup.journalProblems.join('\n')).toMatch(/state directory not trusted: .*theirs .*uid 65534/);
      expect(journalFiles(target)).toEqual([]);
      const report = await reap({ stateDir: viaTheirs });
      expect(report.skipped).toEqual([
        { file: viaTheirs, kind: 'untrusted', problem: expect.stringMatching(/owned by uid 65534/) },
      ]);
      // A link of theirs in a directory of ours: they cannot re-point it, but it is theirs to say
      // where it leads; refused too. The same link of ours is trusted.
      const link = join(base, 'their-link');
      symlinkSync(target, link);
      spawnSync('chown', ['-h', '65534:65534', link]);
      const refused = await reap({ stateDir: link });
      expect(refused.skipped[0]?.problem).toMatch(/symbolic link\) is owned by uid 65534/);
      const ours = join(base, 'our-link');
      symlinkSync(target, ours);
      expect((await reap({ stateDir: ours })).skipped).toEqual([]);
    },
  );

  it('a link whose target ends in /. or /.. is held to the rule where the walk ends: /tmp is refused', async () => {
    const base = leaks.trackDir(makeTmp('pw-dots-'));
    const sub = leaks.trackDir(makeTmp('pw-dots-sub-'));
    for (const [name, target] of [
      ['dot', '/tmp/.'],
      ['dotdot', `${sub}/..`],
    ] as const) {
      const link = join(base, name);
      symlinkSync(target, link);
      const report = await reap({ stateDir: link });
      expect(report.skipped, target).toEqual([
        {
          file: link,
          kind: 'untrusted',
          problem: expect.stringMatching(/^\/tmp is writable by group or others/),
        },
      ]);
    }
  });

  it('a supervisor refuses to journal into a directory reap would not trust, and says so (its records go to a private fallback)', async () => {
    const stateDir = privateStateDir();
    chmodSync(stateDir, 0o777);
    const sup = new Supervisor({ stateDir });
    leaks.trackCookie(sup.id);
    const handle = sup.spawn({ argv: ['true'] });
    expect((await handle.result).reason).toBe('exit');
    expect(sup.problems.join('\n')).toMatch(/records go to .* from run .* on: .*state directory not trusted/);
    expect(journalFiles(stateDir)).toEqual([]);
  });
});
