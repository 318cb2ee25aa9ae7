import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { painter } from '../src/cli/colour.js';
import { describeOutcome, endTrees } from '../src/cli/kill.js';
import type { TerminateReport } from '../src/index.js';
import { CLI, startCli } from './helpers/cli.js';
import { alive, exists, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

async function kill(args: string[]) {
  const cli = startCli(['kill', ...args]);
  leaks.track(cli.child.pid);
  return cli.done;
}

/** Starts a fixture in its own session (as a daemon would run), resolves once it is ready. */
async function startTree(script: string) {
  const dir = leaks.trackDir(makeTmp());
  const child = spawn(fixture(script), [dir], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  leaks.track(child.pid);
  let out = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
  });
  await waitFor(() => out.includes('ready'), { what: `${script} ready`, timeoutMs: 30_000 });
  return { pid: child.pid ?? 0, dir };
}

describe('procwarden kill', () => {
  it('ends a tree: the parent and its descendant get SIGTERM, the report says so', async () => {
    const { pid, dir } = await startTree('parent-exits.sh');
    const r = await kill([String(pid)]);
    expect(r.status).toBe(0);
    const out = r.stdout.toString();
    expect(out).toMatch(
      new RegExp(`^pid ${pid} \\(bash\\): \\d+ processes signalled; no SIGKILL needed; all gone in`),
    );
    expect(out).toMatch(new RegExp(`\\s${pid}\\s+bash\\s+SIGTERM \\+\\d+ms\\s+exited in the grace`));
    expect(exists(join(dir, 'child.done'))).toBe(true);
    expect(alive(readPids(dir).get('child') ?? 0)).toBe(false);
    expect(alive(pid)).toBe(false);
  });

  it('SIGKILL for what ignores SIGTERM after --grace; --json gives the reports', async () => {
    const { pid, dir } = await startTree('orphan-ignores-term.sh');
    const r = await kill(['--grace', '300ms', '--json', String(pid)]);
    expect(r.status).toBe(0);
    const [outcome] = JSON.parse(r.stdout.toString());
    expect(outcome.pid).toBe(pid);
    expect(outcome.report.escalated).toBe(true);
    const child = readPids(dir).get('child') ?? 0;
    const member = outcome.report.members.find((m: { pid: number }) => m.pid === child);
    expect(member.outcome).toBe('killed');
    expect(member.signals.map((s: { signal: string }) => s.signal)).toEqual(['SIGTERM', 'SIGKILL']);
    expect(alive(child)).toBe(false);
  });

  it('--signal chooses the graceful signal; several PIDs end in parallel', async () => {
    const a = await startTree('trap-cleanup.sh');
    const b = await startTree('trap-cleanup.sh');
    const r = await kill(['--signal', 'INT', String(a.pid), String(b.pid), '--grace', '300ms']);
    expect(r.status).toBe(0);
    // trap-cleanup traps TERM only: SIGINT ends it at once, so no cleanup marker.
    expect(exists(join(a.dir, 'cleanup.done'))).toBe(false);
    expect(alive(a.pid)).toBe(false);
    expect(alive(b.pid)).toBe(false);
    expect(r.stdout.toString().match(/SIGINT \+/g)?.length).toBeGreaterThanOrEqual(2);
  });

  it("--grace '' is a bad duration (status 2), as for run and reap, not the default (review)", async () => {
    const r = await kill(['--grace', '', '99999999']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^procwarden kill: --grace: "" is not a duration/);
  });

  it('a PID that does not exist: exit 1, one line; the other PIDs are still ended', async () => {
    const { pid } = await startTree('trap-cleanup.sh');
    const r = await kill(['4194304', String(pid)]);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('pid 4194304: no live process has pid 4194304; it may have exited already.\n');
    expect(alive(pid)).toBe(false);
  });

  it('PID 1, an ancestor and procwarden itself are refused', async () => {
    for (const args of [['1'], [String(process.pid)]]) {
      const r = await kill(args);
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(
        /^pid \d+: refusing to terminate pid \d+: it is PID 1, this process or one of its ancestors\.\n$/,
      );
    }
    const self = spawn('/bin/sh', ['-c', `exec "${process.execPath}" "${CLI}" kill $$`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    leaks.track(self.pid);
    let err = '';
    self.stderr?.on('data', (c: Buffer) => {
      err += c.toString();
    });
    const status = await new Promise((resolve) => self.once('close', resolve));
    expect(status).toBe(1);
    expect(err).toMatch(/refusing to terminate pid \d+/);
  });

  it('a parent and its child given together: the child gets SIGTERM once, in the parent report', async () => {
    const dir = leaks.trackDir(makeTmp());
    const parent = spawn(fixture('record-signals.sh'), [dir, 'stay'], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    leaks.track(parent.pid);
    let out = '';
    parent.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
    });
    await waitFor(() => out.includes('ready'), { what: 'record-signals ready' });
    const child = readPids(dir).get('child') ?? 0;
    const r = await kill(['--grace', '300ms', '--json', String(parent.pid), String(child)]);
    expect(r.status).toBe(0);
    const outcomes = JSON.parse(r.stdout.toString());
    expect(outcomes.map((o: { pid: number }) => o.pid)).toEqual([parent.pid]);
    expect(outcomes[0].report.members.map((m: { pid: number }) => m.pid)).toContain(child);
    // Each signal is recorded as it is handled; both were killed after the grace.
    expect(readFileSync(join(dir, 'child.sig'), 'utf8')).toBe('TERM\n');
    expect(readFileSync(join(dir, 'parent.sig'), 'utf8')).toBe('TERM\n');
  });

  it('a pid and one of its thread ids given together: one SIGTERM, one report', async () => {
    const dir = leaks.trackDir(makeTmp());
    const log = join(dir, 'main.sig');
    const script = `const fs = require('node:fs'); process.on('SIGTERM', () => fs.appendFileSync(${JSON.stringify(log)}, 'TERM\\n')); fs.writeFileSync(${JSON.stringify(join(dir, 'main.pid'))}, String(process.pid)); setInterval(() => {}, 1000);`;
    const main = spawn(process.execPath, ['-e', script, dir], { detached: true, stdio: 'ignore' });
    leaks.track(main.pid);
    await waitFor(() => readPids(dir).get('main'), { what: 'node ready' });
    const thread =
      readdirSync(`/proc/${main.pid}/task`)
        .map(Number)
        .find((t) => t !== main.pid) ?? 0;
    expect(thread).toBeGreaterThan(0);
    const r = await kill(['--grace', '300ms', '--json', String(main.pid), String(thread)]);
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout.toString()).map((o: { pid: number }) => o.pid)).toEqual([main.pid]);
    expect(readFileSync(log, 'utf8')).toBe('TERM\n');
    expect(alive(main.pid ?? 0)).toBe(false);
  });

  const bad: Array<[string, string[], RegExp]> = [
    ['no PID', [], /^procwarden kill: missing PID/],
    ['pid 0', ['0'], /^procwarden kill: '0' is not a process id/],
    ['a word', ['abc'], /^procwarden kill: 'abc' is not a process id/],
    ['a negative pid', ['--', '-5'], /^procwarden kill: '-5' is not a process id/],
    // 2^53 + 1 reads as 2^53 in JavaScript: it was signalled as a pid nobody typed.
    ['a pid past 2^53', ['9007199254740993'], /^procwarden kill: '9007199254740993' is not a process id/],
    ['a pid past 2^32', ['4294967296'], /^procwarden kill: '4294967296' is not a process id/],
    [
      'a value that starts with a dash',
      ['--grace', '-1s', '123'],
      /^procwarden kill: option '--grace' was followed by '-1s', which is read as an option; give a value that starts with '-' as --grace=-1s$/,
    ],
    ['bad grace', ['--grace', 'soon', '123'], /^procwarden kill: --grace: "soon" is not a duration/],
    ['bad signal', ['--signal', 'NOPE', '123'], /^procwarden kill: --signal: "NOPE" is not a signal/],
    ['unknown option', ['--force', '123'], /^procwarden kill: unrecognized option '--force'/],
  ];
  for (const [what, args, message] of bad) {
    it(`bad input (${what}): exit 2 with one line`, async () => {
      const r = await kill(args);
      expect(r.status).toBe(2);
      expect(r.stderr.split('\n')[0]).toMatch(message);
      expect(r.stderr.split('\n')[1]).toBe("Try 'procwarden kill --help' for more information.");
    });
  }
});

/** A kernel thread visible here (PF_KTHREAD in /proc/PID/stat's flags), or null. */
function kernelThread(): number | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || entry === '2') continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const flags = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[6]);
      if ((flags & 0x00200000) !== 0) return Number(entry);
    } catch {
      // gone
    }
  }
  return null;
}

describe('procwarden kill: targets no signal can end are refused at once, said once', () => {
  const kthread = kernelThread();
  it.skipIf(kthread === null)(
    'a kernel thread (and kthreadd): refused before any signal, one line, exit 1',
    async () => {
      for (const pid of [kthread as number, 2]) {
        const r = await kill([String(pid)]);
        expect(r.status).toBe(1);
        expect(r.stdout.toString()).toBe('');
        expect(r.stderr).toBe(
          `pid ${pid}: pid ${pid} is a kernel thread: the kernel runs it and no signal can end it; nothing was sent.\n`,
        );
      }
      const json = await kill(['--json', String(kthread)]);
      expect(JSON.parse(json.stdout.toString())[0].error.code).toBe('KERNEL_THREAD');
    },
  );

  const nobodySkip = nobodyCannotRunNode();
  it.skipIf(nobodySkip !== null)(
    `a process the user may not signal (EPERM): one plain line, nothing retried${nobodySkip ? ` (skipped: ${nobodySkip})` : ''}`,
    async () => {
      const target = spawn('sleep', ['60'], { stdio: 'ignore' });
      leaks.track(target.pid);
      try {
        // As nobody, the root-owned sleep cannot be signalled.
        const r = spawnSync(process.execPath, [CLI, 'kill', String(target.pid)], {
          uid: 65534,
          gid: 65534,
          encoding: 'utf8',
          env: { ...process.env, NO_COLOR: '1' },
          timeout: 60_000,
        });
        expect(r.status).toBe(1);
        expect(r.stdout).toBe('');
        expect(r.stderr).toBe(
          `pid ${target.pid}: not permitted to signal pid ${target.pid}: run as the process's owner or root; nothing was sent.\n`,
        );
        expect(alive(target.pid ?? 0)).toBe(true);
      } finally {
        target.kill('SIGKILL');
        await new Promise((r) => target.once('exit', r));
      }
    },
  );

  it('the summary never says "no SIGKILL needed" when SIGKILL was sent', () => {
    const report: TerminateReport = {
      members: [{ pid: 10, command: 'stuck', signals: [{ signal: 'SIGTERM', atMs: 0 }], outcome: 'escaped' }],
      signalled: 1,
      killed: 0,
      escaped: 1,
      escalated: true,
      durationMs: 3400,
      graceUsedMs: 5000,
      notes: [],
    };
    report.members[0]?.signals.push({ signal: 'SIGKILL', atMs: 5000 }, { signal: 'SIGKILL', atMs: 5025 });
    const text = describeOutcome({ pid: 10, report }, painter(false));
    expect(text).not.toContain('no SIGKILL needed');
    expect(text.split('\n')[0]).toBe(
      'pid 10 (stuck): 1 process signalled; SIGKILL sent to 1, 0 died of it; 1 survived',
    );
    const noisy = { ...report, notes: Array(40).fill('SIGKILL to pid 10 failed: EPERM') };
    expect(describeOutcome({ pid: 10, report: noisy }, painter(false))).toContain(
      '  note: SIGKILL to pid 10 failed: EPERM (×40)\n',
    );
    const clean = describeOutcome(
      { pid: 10, report: { ...report, members: [], escalated: false, escaped: 0 } },
      painter(false),
    );
    expect(clean).toContain('no SIGKILL needed');
    // The grace ended, and the last member left on its own before its SIGKILL: none was needed.
    const justInTime = describeOutcome(
      {
        pid: 10,
        report: {
          ...report,
          members: [
            {
              pid: 10,
              command: 'slow',
              signals: [{ signal: 'SIGTERM', atMs: 0 }],
              outcome: 'exited-in-grace',
            },
          ],
          escaped: 0,
        },
      },
      painter(false),
    );
    expect(justInTime).toContain('no SIGKILL needed');
    expect(justInTime).not.toContain('could not be sent');
  });
});

/**
 * Why this Node (or the CLI) cannot be run as nobody (uid 65534), or null. Not root, or a Node installed under
 * a private folder (CI's Node 22/24 live under /root, mode 0700): the spawn itself would fail.
 */
function nobodyCannotRunNode(): string | null {
  if (process.getuid?.() !== 0) return 'needs root to run a command as another user';
  const script = `require('node:fs').accessSync(${JSON.stringify(CLI)})`;
  const probe = spawnSync(process.execPath, ['-e', script], { uid: 65534, gid: 65534, timeout: 30_000 });
  if (probe.error) return `${process.execPath} cannot be run as uid 65534: ${probe.error.message}`;
  return probe.status === 0 ? null : `${process.execPath} as uid 65534 exits ${probe.status}`;
}

describe('what kill and tree print of other processes, and where', () => {
  it("a command named with escape sequences and newlines is printed with '?' in their place", async () => {
    // Any local user names a process so; printed raw, it retitles the terminal of whoever lists it
    // and adds rows of its choosing.
    const name = '\u001b]0;pwned\u0007\u001b[31mEVIL\n  99999 fake\u009b';
    const sleeper = spawn('bash', ['-c', `exec -a "$0" sleep 30`, name], { stdio: 'ignore', detached: true });
    leaks.track(sleeper.pid);
    const pid = sleeper.pid as number;
    // Until bash has exec'd, the command line is bash's.
    const shown = () => spawnSync(process.execPath, [CLI, 'tree', String(pid)], { encoding: 'utf8' }).stdout;
    const out = (() => {
      const until = Date.now() + 10_000;
      for (;;) {
        const text = shown();
        if (text.includes('EVIL') || Date.now() > until) return text;
      }
    })();
    expect(out).toContain('?]0;pwned??[31mEVIL?  99999 fake? 30');
    expect(out.split('\n').filter(Boolean)).toHaveLength(2);
    expect(/\p{Cc}/u.test(out.replaceAll('\n', ''))).toBe(false);
    process.kill(pid, 'SIGKILL');
    // The signal lands a moment later: the leak check after the test must not see it alive.
    await waitFor(() => !alive(pid), { what: 'the sleeper gone' });
  });

  it("bidi overrides and line separators in a command are printed as '?' (a row cannot be spoofed)", async () => {
    const name = 'innocent\u2028   1234     1     1 S    9d      /sbin/init \u202Egnp.exe\u2029\u200B';
    const sleeper = spawn('bash', ['-c', `exec -a "$0" sleep 30`, name], { stdio: 'ignore', detached: true });
    leaks.track(sleeper.pid);
    const pid = sleeper.pid as number;
    try {
      const shown = () =>
        spawnSync(process.execPath, [CLI, 'tree', String(pid)], { encoding: 'utf8' }).stdout;
      const out = await waitFor(
        () => {
          const text = shown();
          return text.includes('innocent') && text;
        },
        { what: 'the renamed sleeper listed' },
      );
      expect(out).toContain('innocent?   1234     1     1 S    9d      /sbin/init ?gnp.exe?? 30');
      expect(/[\p{Cf}\p{Zl}\p{Zp}]/u.test(out)).toBe(false);
    } finally {
      process.kill(pid, 'SIGKILL');
      await waitFor(() => !alive(pid), { what: 'the sleeper gone' });
    }
  });

  it('a report that cannot be written (a full disk) is a write error and status 1, not a stack trace', async () => {
    const { pid } = await startTree('parent-exits.sh');
    const r = spawnSync(
      'sh',
      ['-c', `exec "$0" "$1" kill --grace 1s "$2" > /dev/full`, process.execPath, CLI, String(pid)],
      {
        encoding: 'utf8',
      },
    );
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('procwarden kill: write error: ENOSPC: no space left on device, write\n');
  });
});

// Node itself must be runnable as nobody: CI's Node 22 and 24 live under /root, which it may not enter.
const nobodySkip = existsSync('/usr/bin/setpriv') ? nobodyCannotRunNode() : 'no /usr/bin/setpriv';
const NOBODY = ['--reuid=nobody', '--regid=nogroup', '--clear-groups'];

/** A parent that runs as nobody, with a child that stays root's and runs `child`. */
async function mixedTree(child: string): Promise<{ dir: string; parent: number; child: number }> {
  const dir = leaks.trackDir(makeTmp());
  const tree = spawn(
    'sh',
    ['-c', `${child} & echo $! > "$0/child.pid"; exec setpriv ${NOBODY.join(' ')} sleep 31`, dir],
    { stdio: 'ignore', detached: true },
  );
  leaks.track(tree.pid);
  const pid = await waitFor(() => readPids(dir).get('child'), { what: 'the child' });
  leaks.track(pid);
  await waitFor(() => readFileSync(`/proc/${tree.pid}/status`, 'utf8').includes('\nUid:\t65534'), {
    what: 'the parent running as nobody',
  });
  return { dir, parent: tree.pid as number, child: pid };
}

/** `procwarden kill --json PID` run as nobody. */
function killAsNobody(dir: string, pid: number): { status: number | null; report: TerminateReport } {
  const r = spawnSync('setpriv', [...NOBODY, process.execPath, CLI, 'kill', '--json', String(pid)], {
    encoding: 'utf8',
    env: { ...process.env, HOME: dir, PROCWARDEN_STATE_DIR: join(dir, 'state') },
  });
  return { status: r.status, report: JSON.parse(r.stdout)[0].report };
}

describe.skipIf(nobodySkip !== null)(
  `a member kill may not signal (EPERM)${nobodySkip ? ` (skipped: ${nobodySkip})` : ''}`,
  () => {
    it('is not waited for in the grace, is retried for the SIGKILL bound, and is reported as refused', async () => {
      const { dir, parent, child } = await mixedTree('sleep 30');
      const { status, report } = killAsNobody(dir, parent);
      expect(status).toBe(1);
      // The parent got SIGTERM and left; the grace (5 s) was not waited out for the child nobody
      // could ask to leave. (The old code waited all of it, then 3 s of SIGKILL retries: 8 s.)
      expect(report.graceUsedMs).toBeLessThan(2500);
      expect(report.escaped).toBe(1);
      const row = report.members.find((m) => m.pid === child);
      expect(row?.outcome).toBe('escaped');
      expect(row?.signals).toEqual([]);
      expect(report.notes.join('\n')).toContain(
        `1 process(es) could not be signalled (not permitted: another user's process or a set-uid program; run as its owner or root), pid ${child}`,
      );
      expect(report.notes.join('\n')).not.toContain('still alive after SIGKILL');
      const text = describeOutcome({ pid: parent, report }, painter(false));
      expect(text).toContain('SIGKILL could not be sent; 1 survived');
      expect(text).toMatch(new RegExp(`${child}  sleep .*NOT PERMITTED`));
      expect(alive(parent)).toBe(false);
      process.kill(child, 'SIGKILL');
      await waitFor(() => !alive(child), { what: 'the child gone' });
    });

    it('the tree-kill drop-in calls back with code EPERM, each reason said once', async () => {
      const { dir, parent, child } = await mixedTree('sleep 30');
      const dropIn = join(import.meta.dirname, '..', 'dist', 'tree-kill.js');
      const script = `import(${JSON.stringify(dropIn)}).then((m) => m.default(${parent}, (e) => console.log(JSON.stringify({ code: e?.code, message: e?.message }))))`;
      const r = spawnSync('setpriv', [...NOBODY, process.execPath, '-e', script], {
        encoding: 'utf8',
        env: { ...process.env, HOME: dir },
      });
      const { code, message } = JSON.parse(r.stdout);
      expect(code).toBe('EPERM');
      // The SIGKILL was retried for 3 s, each time refused: said once, not once per retry.
      expect(message.split(`SIGKILL to pid ${child} failed: EPERM`).length).toBe(2);
      process.kill(child, 'SIGKILL');
      await waitFor(() => !alive(child), { what: 'the child gone' });
    });

    it('one that drops its privileges within the SIGKILL bound is killed then', async () => {
      // Root's until its parent is gone (its parent leaves on the SIGTERM of the round in which the
      // child's own is refused), then, 300 ms later, nobody's: a later SIGKILL is not refused. Not
      // after a fixed time from the start: on a loaded machine the kill command itself took longer
      // than that to start. Not at once: the parent gets its SIGTERM first, and a kill command kept
      // off the CPU between the two signals let the child drop its privileges before its own came.
      const { dir, parent, child } = await mixedTree(
        // (Dead is a zombie too: this test's process, blocked in spawnSync, reaps it only later.)
        `sh -c 'until [ ! -e /proc/$PPID ] || grep -q "^State:.*Z" /proc/$PPID/status; do sleep 0.01; done; sleep 0.3; exec setpriv ${NOBODY.join(' ')} sleep 30'`,
      );
      const { status, report } = killAsNobody(dir, parent);
      expect(status).toBe(0);
      expect(report.escaped).toBe(0);
      expect(report.members.find((m) => m.pid === child)?.outcome).toBe('killed');
      expect(alive(child)).toBe(false);
    });
  },
);

describe('procwarden kill PARENT CHILD: a pid dropped as covered by another', () => {
  const report = (...pids: number[]): TerminateReport => ({
    members: pids.map((pid) => ({ pid, command: 'x', signals: [], outcome: 'killed' })),
    signalled: pids.length,
    killed: pids.length,
    escaped: 0,
    escalated: false,
    durationMs: 1,
    graceUsedMs: null,
    notes: [],
  });

  it('is ended with its covering tree, once', async () => {
    const ended: number[] = [];
    const outcomes = await endTrees(
      [10, 11],
      () => null,
      async (pids) => pids.filter((pid) => pid !== 11),
      async (pid) => {
        ended.push(pid);
        return { pid, report: report(10, 11) };
      },
      (pid) => pid,
    );
    expect(ended).toEqual([10]);
    expect(outcomes.map((o) => o.pid)).toEqual([10]);
  });

  it("a thread's process is read before any signal: once the process is gone, it cannot be", async () => {
    const ended: number[] = [];
    const outcomes = await endTrees(
      [10, 12],
      () => null,
      async (pids) => pids.filter((pid) => pid !== 12),
      async (pid) => {
        ended.push(pid);
        return { pid, report: report(10) };
      },
      // 12 is a thread of 10; after 10 is ended, /proc/12 is gone and reads as itself.
      (pid) => (pid === 12 && ended.length === 0 ? 10 : pid),
    );
    expect(ended).toEqual([10]);
    expect(outcomes.map((o) => o.pid)).toEqual([10]);
  });

  it('is ended on its own when its covering root could not be (it exited meanwhile) (review)', async () => {
    const ended: number[] = [];
    const outcomes = await endTrees(
      [10, 11, 12],
      () => null,
      // 11 is 10's child; 12 is a thread of 11's process.
      async (pids) => pids.filter((pid) => pid === pids[0]),
      async (pid) => {
        ended.push(pid);
        if (pid === 10)
          return { pid, error: { code: 'NO_SUCH_PROCESS', message: 'no live process has pid 10' } };
        return { pid, report: report(pid) };
      },
      (pid) => (pid === 12 ? 11 : pid),
    );
    // 11 and its thread 12 were dropped as 10's; 10 is gone: 11's tree is ended after all, once.
    expect(ended).toEqual([10, 11]);
    expect(outcomes.map((o) => [o.pid, 'error' in o])).toEqual([
      [10, true],
      [11, false],
    ]);
  });
});
