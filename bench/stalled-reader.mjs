import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { delay, treeOf } from './lib/procs.mjs';
import { alternate, withRatios } from './lib/stats.mjs';

const MiB = 1024 * 1024;
const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli', 'main.js');
const STALL_MS = 5000;
const RAW = 'yes, no procwarden (RSS of yes)';

/** VmRSS in bytes of a live pid, read from /proc. */
function rss(pid) {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? Number.NaN) * 1024;
}

/**
 * Starts argv with a stdout pipe nobody reads (a stalled reader), waits STALL_MS, reads the RSS of
 * the process that writes into the pipe, then ends it. The tree is registered with the tracker.
 */
async function stalled(argv, tracker) {
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
  child.stdout.pause();
  const closed = new Promise((resolve) => child.once('close', resolve));
  await delay(500);
  tracker.add(treeOf(child.pid));
  await delay(STALL_MS - 500);
  const bytes = rss(child.pid);
  child.kill('SIGTERM');
  // procwarden's CLI cancels its tree on SIGTERM; reading again lets the pipe close.
  child.stdout.resume();
  await closed;
  return bytes / MiB;
}

export default {
  id: 9,
  title: `RSS behind a reader stalled for ${STALL_MS / 1000} s`,
  unit: 'MiB',
  async run({ quick, reps, tracker }) {
    const n = quick ? 1 : Math.min(reps, 3);
    const contenders = [
      { name: RAW, argv: ['yes'] },
      { name: 'procwarden run -- yes', argv: [process.execPath, CLI, 'run', '--', 'yes'] },
      {
        name: 'procwarden run -- sleep 10 (idle reference)',
        argv: [process.execPath, CLI, 'run', '--', 'sleep', '10'],
      },
    ];
    const rows = await alternate(contenders, n, (c) => stalled(c.argv, tracker));
    const [, busy, idle] = rows;
    const above = busy.max - idle.median;
    return {
      cases: [{ name: 'RSS of the writer into the stalled pipe, MiB', rows: withRatios(rows, RAW) }],
      goals: [
        {
          text: 'procwarden RSS ≤ 64 MiB above its idle RSS',
          value: `${above.toFixed(1)} MiB above (max ${busy.max.toFixed(1)}, idle ${idle.median.toFixed(1)})`,
          met: above <= 64,
        },
      ],
      notes: [
        'the stdout pipe of the measured process is never read for 5 s; RSS read from /proc/PID/status at the end of the stall',
      ],
    };
  },
};
