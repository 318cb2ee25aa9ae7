import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import pidtree from 'pidtree';
import { ProcfsTable } from '../dist/tree/index.js';
import { waitExtinct } from './lib/procs.mjs';
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
    const contenders = [
      { name: RAW, sweep: rawSweep },
      { name: 'procwarden table.list()', sweep: () => table.list() },
      {
        name: 'procwarden list + cookie scan (every environ)',
        sweep: async () => table.findByEnv('PROCWARDEN_RUN', 'bench-none', { among: await table.list() }),
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
    await waitExtinct(members);
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
