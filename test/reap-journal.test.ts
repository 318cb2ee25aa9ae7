import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { reap } from '../src/index.js';
import { journalFiles } from './helpers/host.js';
import { alive, LeakGuard, makeTmp, startTime, waitFor } from './helpers/procs.js';
import { deadRecord } from './helpers/reap.js';

// Issue 22 item 6, the journal's part: failed writes leave nothing behind, reap says when it could
// not read the journal, and a cookie holder older than the run is not the run's.

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const dist = join(import.meta.dirname, '..', 'dist');

/** Clock ticks since boot, the unit of /proc/PID/stat's start time (USER_HZ is 100 on Linux). */
const ticksNow = () => Math.floor(Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 100);

describe('the journal on disk', () => {
  it('a settled run leaves no record: with a pid record, with a stop record, and with neither (ps let its root go)', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const { Supervisor } = await import('../src/supervisor/supervisor.js');
    const { PsTable } = await import('../src/tree/index.js');
    const sup = new Supervisor({ stateDir, watchdog: false });
    const ps = new Supervisor({ stateDir, watchdog: false, table: new PsTable() });
    try {
      const plain = sup.spawn({ argv: ['sleep', '0.2'] });
      leaks.track(plain.pid);
      expect((await plain.result).reason).toBe('exit');
      // Ignores SIGTERM through a 300 ms grace: its stop record (written 50 ms after the signal) too.
      const stopped = sup.spawn({ argv: ['sh', '-c', 'trap "" TERM; echo ready; sleep 30'], graceMs: 300 });
      leaks.track(stopped.pid);
      await waitFor(() => sup.read(stopped.id).text.includes('ready'), { what: 'the trap set' });
      stopped.cancel();
      await waitFor(() => journalFiles(stateDir).some((f) => f.endsWith('.stop.json')), {
        what: 'the stop record',
      });
      expect((await stopped.result).escalated).toBe(true);
      const short = ps.spawn({ argv: ['true'], containment: 'process-group' });
      expect((await short.result).reason).toBe('exit');
      expect(journalFiles(stateDir)).toEqual([]);
    } finally {
      await sup.shutdown({ graceMs: 0 });
      await ps.shutdown({ graceMs: 0 });
    }
  });

  it('the stop record is written when the command dies of the signal at once and a member takes the grace', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const { Supervisor } = await import('../src/supervisor/supervisor.js');
    for (const containment of ['process-group', 'cgroup'] as const) {
      const sup = new Supervisor({ stateDir, watchdog: false });
      try {
        // The shell dies of SIGTERM at once; its child ignores it and lives through the grace.
        const run = sup.spawn({
          argv: ['sh', '-c', 'sh -c \'trap "" TERM; echo ready; sleep 30\' & wait'],
          graceMs: 1500,
          containment,
        });
        leaks.track(run.pid);
        await waitFor(() => sup.read(run.id).text.includes('ready'), { what: 'the trap set' });
        run.cancel();
        expect((await run.commandEnded).exitSignal).toBe('SIGTERM');
        // A host that died now would leave a reaper the record that says the grace has begun.
        await waitFor(() => journalFiles(stateDir).some((f) => f.endsWith('.stop.json')), {
          what: `the stop record (${containment})`,
          timeoutMs: 1200,
        });
        expect((await run.result).escalated).toBe(true);
        expect(journalFiles(stateDir)).toEqual([]);
      } finally {
        await sup.shutdown({ graceMs: 0 });
      }
    }
  });

  it('a write that fails (file size limit: a full disk in miniature) leaves no temporary file', () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    // `ulimit -f 0` makes the first byte fail with EFBIG after the file was created, exactly as
    // ENOSPC does on a full file system; the handler keeps SIGXFSZ from killing the writer.
    const script = `
      process.on('SIGXFSZ', () => {});
      const { Journal } = await import(${JSON.stringify(join(dist, 'journal', 'journal.js'))});
      const journal = new Journal(process.argv[1]);
      try {
        journal.write(JSON.parse(process.argv[2]));
        console.log('written');
      } catch (error) {
        console.log('failed ' + error.code);
      }`;
    const record = JSON.parse(deadRecord('pwtestfull-1', {}));
    const run = spawnSync(
      '/bin/sh',
      [
        '-c',
        'ulimit -f 0; exec "$0" --input-type=module -e "$1" "$2" "$3"',
        process.execPath,
        script,
        stateDir,
        JSON.stringify(record),
      ],
      { encoding: 'utf8' },
    );
    expect(run.stdout.trim(), run.stderr).toBe('failed EFBIG');
    expect(journalFiles(stateDir)).toEqual([]);
  });

  it('reap removes an old unparseable temporary file, keeps a fresh one, and a dry run removes nothing', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const old = join(stateDir, 'pwtestfull-2.json.tmp');
    writeFileSync(old, '', { mode: 0o600 });
    const hourAgo = new Date(Date.now() - 3600_000);
    utimesSync(old, hourAgo, hourAgo);
    writeFileSync(join(stateDir, 'pwtestfull-3.json.tmp'), '', { mode: 0o600 }); // a write in progress
    const dry = await reap({ stateDir, dryRun: true });
    expect(dry.skipped.map((s) => [s.file, s.kind])).toEqual([
      ['pwtestfull-2.json.tmp', 'stale'],
      ['pwtestfull-3.json.tmp', 'invalid'],
    ]);
    expect(journalFiles(stateDir)).toHaveLength(2);
    const report = await reap({ stateDir });
    expect(report.skipped[0]?.problem).toMatch(/a failed write's leftover; removed$/);
    expect(journalFiles(stateDir)).toEqual(['pwtestfull-3.json.tmp']);
  });

  it("a temporary file whose name is not one Journal.write makes is someone else's: reported, never removed", async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const foreign = join(stateDir, 'notes.json.tmp');
    writeFileSync(foreign, 'my notes', { mode: 0o600 });
    const hourAgo = new Date(Date.now() - 3600_000);
    utimesSync(foreign, hourAgo, hourAgo);
    const report = await reap({ stateDir });
    expect(report.skipped.map((s) => [s.file, s.kind])).toEqual([['notes.json.tmp', 'invalid']]);
    expect(readFileSync(foreign, 'utf8')).toBe('my notes');
  });

  it('a record file far larger than any record is not read', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    writeFileSync(join(stateDir, 'pwtestbig-1.json'), Buffer.alloc(1 << 20, 0x20), { mode: 0o600 });
    const report = await reap({ stateDir, dryRun: true });
    expect(report.skipped[0]?.problem).toBe('1048576 bytes, larger than any record (65536); not read');
    expect(report.runs).toEqual([]);
  });

  it('a record that names no pid, cookie or cgroup is reported as unfindable and kept, not "reaped"', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    writeFileSync(join(stateDir, 'pwtestdead-7.json'), deadRecord('pwtestdead-7', {}), { mode: 0o600 });
    const report = await reap({ stateDir });
    expect(report.runs.map((r) => r.action)).toEqual(['refused']);
    expect(report.runs[0]?.refused.join('\n')).toMatch(/names no pid, no cookie and no cgroup/);
    expect(journalFiles(stateDir)).toEqual(['pwtestdead-7.json']);
  });

  it("a launch record without the supervisor's start time: the start in its cgroup's name tells a reused pid", async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    // Our own pid, alive, with a start time ('1') that is not ours: the supervisor is dead.
    const cgroupPath = `/sys/fs/cgroup/none/procwarden-${process.pid}-1/pwtestdead-8`;
    const record = deadRecord('pwtestdead-8', { supervisorStart: null, cgroupPath, cookie: 'pwtestdead-8' });
    writeFileSync(join(stateDir, 'pwtestdead-8.json'), record, { mode: 0o600 });
    const report = await reap({ stateDir, dryRun: true });
    expect(report.runs.map((r) => r.action)).toEqual(['would-reap']);
  });

  it('`procwarden reap` exits 1 when it cannot list the state directory (ENOTDIR)', () => {
    const file = join(leaks.trackDir(makeTmp('pw-state-')), 'a-file');
    writeFileSync(file, 'not a directory');
    const run = spawnSync(
      process.execPath,
      [join(dist, 'cli', 'main.js'), 'reap', '--state-dir', join(file, 'journal')],
      {
        encoding: 'utf8',
      },
    );
    expect(run.status, run.stdout + run.stderr).toBe(1);
    expect(run.stdout).toMatch(/cannot list the directory: ENOTDIR/);
    // A directory that does not exist yet is no failure: nothing was ever recorded there.
    const none = spawnSync(
      process.execPath,
      [join(dist, 'cli', 'main.js'), 'reap', '--state-dir', join(file, '..', 'none')],
      {
        encoding: 'utf8',
      },
    );
    expect(none.status, none.stdout + none.stderr).toBe(0);
    expect(none.stdout).toContain('no runs recorded (the directory does not exist)');
  });

  it("`procwarden reap --state-dir ''` is a usage error, not the current directory's journal", () => {
    const run = spawnSync(process.execPath, [join(dist, 'cli', 'main.js'), 'reap', '--state-dir', ''], {
      encoding: 'utf8',
    });
    expect(run.status, run.stdout + run.stderr).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.split('\n')[0]).toMatch(/^procwarden reap: --state-dir: "" is not a directory path/);
  });

  it('a cookie holder started before the run is not its member, as for a live supervisor', async () => {
    const stateDir = leaks.trackDir(makeTmp('pw-state-'));
    const cookie = `pwtestdead${process.pid}-born`;
    const env = { ...process.env, PROCWARDEN_RUN: cookie };
    const older = spawn('sleep', ['300'], { detached: true, stdio: 'ignore', env });
    leaks.track(older.pid);
    const olderStart = Number(await waitFor(() => startTime(older.pid as number), { what: 'older started' }));
    // The run's root must start on a later clock tick than the older holder.
    await waitFor(() => ticksNow() > olderStart + 1, { what: 'a clock tick' });
    const root = spawn('sleep', ['300'], { detached: true, stdio: 'ignore', env });
    leaks.track(root.pid);
    const rootStart = await waitFor(() => startTime(root.pid as number), { what: 'root started' });
    expect(Number(rootStart)).toBeGreaterThan(olderStart);
    const record = deadRecord(cookie, { pid: root.pid, pidStart: rootStart, pgid: root.pid, cookie });
    writeFileSync(join(stateDir, `${cookie}.pid.json`), record);

    const report = await reap({ stateDir, graceMs: 300 });
    expect(report.runs[0]).toMatchObject({ action: 'reaped', members: [{ pid: root.pid }] });
    await waitFor(() => !alive(root.pid as number), { what: 'root gone' });
    expect(alive(older.pid as number)).toBe(true);
    const gone = new Promise((resolve) => older.once('exit', resolve));
    older.kill('SIGKILL');
    await gone;
  });
});
