import { execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import pidtree from 'pidtree';
import { ProcfsTable } from '../dist/tree/index.js';
import { delay, waitExtinct } from './lib/procs.mjs';
import { alternate, withRatios } from './lib/stats.mjs';
import { spawnRawTree, whenBuilt } from './lib/trees.mjs';

const RAW = 'raw readdir + readFileSync(stat)';

/** The least a process listing can do in Node: every /proc/PID/stat, read and split. */
function rawSweep() {
  let n = 0;
  for (const entry of readdirSync('/proc')) {
    if (entry.charCodeAt(0) < 48 || entry.charCodeAt(0) > 57) continue;
    try {
      const text = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (text.slice(text.lastIndexOf(')') + 2).split(' ').length > 20) n++;
    } catch {
      // exited during the sweep
    }
  }
  return n;
}

export default {
  id: 6,
  title: 'one process-table sweep with extra processes alive',
  unit: 'ms',
  async run({ quick, reps, tracker }) {
    const extra = quick ? 100 : 1000;
    const tree = spawnRawTree(extra, { fan: 10 });
    const members = await whenBuilt(tree.pid, extra);
    tracker.add(members);
    const table = new ProcfsTable();
    // A run started after them: its scans may leave the older processes out once a sweep has
    // proven each the same as before (one stat() of its /proc entry instead of reading it).
    const run = spawn('sleep', ['600'], { stdio: 'ignore', env: { PROCWARDEN_RUN: 'bench-run' } });
    const runTable = new ProcfsTable();
    let root = runTable.getSync(run.pid);
    while (root?.command !== 'sleep') {
      await delay(2);
      root = runTable.getSync(run.pid);
    }
    tracker.add([{ pid: run.pid, start: root.startTime }]);
    const query = { name: 'PROCWARDEN_RUN', value: 'bench-run', firstHolder: root, olderThan: root };
    for (let i = 0; i < 2; i++) runTable.sweepManySync([query]);
    const contenders = [
      { name: RAW, sweep: rawSweep },
      { name: 'procwarden table.list()', sweep: () => table.list() },
      {
        name: 'procwarden list + cookie scan (every environ)',
        sweep: async () => table.findByEnv('PROCWARDEN_RUN', 'bench-none', { among: await table.list() }),
      },
      {
        name: "procwarden a run's scan (older processes proven)",
        sweep: () => runTable.sweepManySync([query]),
      },
      {
        name: 'ps -e -o pid,ppid,pgid,stat,lstart',
        sweep: () =>
          new Promise((resolve, reject) =>
            execFile('ps', ['-e', '-o', 'pid,ppid,pgid,stat,lstart'], { maxBuffer: 1 << 26 }, (e, out) =>
              e ? reject(e) : resolve(out),
            ),
          ),
      },
      { name: 'pidtree(-1) (ps underneath)', sweep: () => pidtree(-1) },
    ];
    // Several sweeps per sample: one is short enough for timer noise to matter.
    const per = 5;
    const rows = await alternate(contenders, reps, async (c) => {
      const t0 = performance.now();
      for (let i = 0; i < per; i++) await c.sweep();
      return (performance.now() - t0) / per;
    });
    const total = rawSweep();
    process.kill(-tree.pid, 'SIGKILL');
    run.kill('SIGKILL');
    await waitExtinct([...members, { pid: run.pid, start: root.startTime }]);
    const pw = rows.find((r) => r.contender.startsWith('procwarden list +'));
    return {
      cases: [{ name: `${extra} extra (${total} in all)`, rows: withRatios(rows, RAW) }],
      goals: [
        {
          text: 'one sweep (list + cookie scan), no goal set',
          value: `${pw.median.toFixed(1)} ms`,
          met: null,
        },
      ],
      notes: [`each sample is the mean of ${per} sweeps`],
    };
  },
};
