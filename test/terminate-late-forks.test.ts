import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { run, terminateTree } from '../src/index.js';
import { UNVERIFIED_LATE_FORKS } from '../src/kill/tree.js';
import { alive, fixture, killEach, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

// On SIGTERM the shell starts a sleeper through a subshell that exits at once: the sleeper is
// re-parented to init before anyone can see it as a descendant, and writes its pid down. Its
// environment names the test's directory, so that LeakGuard knows it as the test's.
const TRAP = `trap '( PW_DIR="$1" sleep 30 & echo $! > "$1/late.pid" ); exit 0' TERM; echo ready; while :; do sleep 0.05; done`;

/** Starts the trap script the way another program would (not through procwarden). */
async function startForeign(detached: boolean) {
  const dir = leaks.trackDir(makeTmp());
  const child = spawn('sh', ['-c', TRAP, 'sh', dir], { detached, stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c;
  });
  leaks.track(child.pid);
  await waitFor(() => out.includes('ready'), { what: 'trap script ready' });
  return { pid: child.pid ?? 0, dir };
}

describe('terminateTree: a member that forks in its SIGTERM handler', () => {
  it('the late fork is found through the process group the root leads, and ended', async () => {
    const { pid, dir } = await startForeign(true);
    const report = await terminateTree(pid, { graceMs: 3000 });
    const late = await waitFor(() => readPids(dir).get('late'), { what: 'the late fork' });
    expect(alive(late)).toBe(false);
    expect(report.escaped).toBe(0);
    expect(report.members.map((m) => m.pid)).toContain(late);
    expect(report.notes).toContain(UNVERIFIED_LATE_FORKS);
  });

  it('in a group it does not lead, the report says late forks could not be verified', async () => {
    // Not detached: the root shares the test runner's process group and session, which procwarden
    // must not claim; the sleeper is invisible, and the report must not pretend otherwise.
    const { pid, dir } = await startForeign(false);
    const report = await terminateTree(pid, { graceMs: 3000 });
    expect(alive(pid)).toBe(false);
    expect(report.notes).toContain(UNVERIFIED_LATE_FORKS);
    // The sleeper procwarden could not see is ended here, by its pid: it would outlive the test.
    const late = await waitFor(() => readPids(dir).get('late'), { what: 'the late fork' });
    // Its pid is written right after the fork: it may still be on its way through `env -i` to sleep.
    await waitFor(() => readFileSync(`/proc/${late}/environ`, 'utf8').includes(`PW_DIR=${dir}`), {
      what: "the late fork's environment",
    });
    process.kill(late, 'SIGKILL');
    await waitFor(() => !alive(late), { what: 'the late fork gone' });
  });

  it('under run() the same tree ends completely', async () => {
    const dir = leaks.trackDir(makeTmp());
    let out = '';
    const handle = run({
      argv: ['sh', '-c', TRAP, 'sh', dir],
      graceMs: 3000,
      output: {
        onData: (t) => {
          out += t;
        },
      },
    });
    await waitFor(() => out.includes('ready'), { what: 'trap script ready' });
    handle.cancel();
    const r = await handle.result;
    const late = await waitFor(() => readPids(dir).get('late'), { what: 'the late fork' });
    expect(alive(late)).toBe(false);
    expect(r.tree.escaped).toBe(0);
    expect(r.tree.report?.notes ?? []).not.toContain(UNVERIFIED_LATE_FORKS);
  });
});

// A member in a session of its own (setsid) that, on SIGTERM, starts a sleeper through a subshell
// and exits: the sleeper is re-parented to init at once, and it carries no cookie (env -i), as a
// late fork whose environment is read while it is between two execs does not show one. Only its
// session (the member's) still ties it to the run.
const LEADER = `trap '( env -i "PW_DIR=$1" sleep 30 & echo $! > "$1/late.pid" ); exit 0' TERM; echo $$ > "$1/leader.pid"; while :; do sleep 0.05; done`;

describe.skipIf(!existsSync('/usr/bin/perl'))('terminateTree: a process that only joins the group', () => {
  it("a stranger's child put in the root's group during the grace is not signalled", async () => {
    // The root's parent forks a child of its own into the group the root leads once the
    // termination has begun: new since the first scan and in a member's group, as a late fork
    // is, but its parent is a live process that was there all along, in its session, and no member.
    const dir = leaks.trackDir(makeTmp());
    const parent = spawn('/usr/bin/perl', [fixture('join-group.pl'), dir], {
      detached: true,
      stdio: 'ignore',
    });
    leaks.track(parent.pid);
    const root = await waitFor(() => readPids(dir).get('x'), { what: 'the root' });
    const report = await terminateTree(root, {
      graceMs: 3000,
      send: (pid, sig) => {
        process.kill(pid, sig);
        if (!existsSync(join(dir, 'go'))) writeFileSync(join(dir, 'go'), '');
      },
    });
    const stranger = readPids(dir).get('y');
    try {
      expect(stranger).toBeGreaterThan(0);
      expect(alive(root)).toBe(false);
      expect(report.members.map((m) => m.pid)).not.toContain(stranger);
      expect(existsSync(join(dir, 'y.term'))).toBe(false);
      expect(alive(stranger ?? 0)).toBe(true);
    } finally {
      killEach([parent.pid ?? 0, stranger ?? 0].filter((p) => p > 0));
      await waitFor(() => !alive(parent.pid ?? 0) && !alive(stranger ?? 0), { what: 'the fixture gone' });
    }
  });
});

describe.each(['process-group', 'none'] as const)(
  'run() in %s mode: a late fork without the cookie',
  (containment) => {
    it('found through the session a member founded, and ended with the tree', async () => {
      const dir = leaks.trackDir(makeTmp());
      const handle = run({
        argv: ['sh', '-c', 'setsid sh -c "$0" sh "$1" & wait', LEADER, dir],
        containment,
        graceMs: 3000,
      });
      const leader = await waitFor(() => readPids(dir).get('leader'), { what: 'the session leader' });
      leaks.track(leader);
      handle.cancel();
      const r = await handle.result;
      const late = await waitFor(() => readPids(dir).get('late'), { what: 'the late fork' });
      expect(alive(late)).toBe(false);
      expect(alive(leader)).toBe(false);
      expect(r.tree.escaped).toBe(0);
      expect(r.tree.report?.members.map((m) => m.pid)).toContain(late);
      // Ended by the graceful signal (sleep does not trap it), not chased down after the grace.
      expect(r.escalated).toBe(false);
    });
  },
);
