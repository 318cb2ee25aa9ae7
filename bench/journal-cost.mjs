// What the journal costs the spawn path: median spawn+wait of /bin/true under a Supervisor without
// the journal and with it (same process, interleaved rounds so machine noise hits both alike), and
// the journal's own file operations alone (two atomic writes + two unlinks per run).
// Usage: node bench/journal-cost.mjs [N=200]   (after npm run build)
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Supervisor } from '../dist/index.js';
import { Journal } from '../dist/journal/index.js';

const n = Number(process.argv[2] ?? 200);
const stateDir = mkdtempSync(join(tmpdir(), 'pw-bench-state-'));
const without = new Supervisor({ journal: false });
const withJournal = new Supervisor({ stateDir });
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const calls = new Map();
const once = async (sup) => {
  const t = performance.now();
  const handle = sup.spawn({ argv: ['/bin/true'] });
  const spawned = performance.now() - t;
  if (!calls.has(sup)) calls.set(sup, []);
  calls.get(sup).push(spawned);
  await handle.result;
  return performance.now() - t;
};

for (let i = 0; i < 20; i++) await once(i % 2 ? without : withJournal); // warm-up
const a = [];
const b = [];
for (let i = 0; i < n; i++) {
  if (i % 2) {
    a.push(await once(without));
    b.push(await once(withJournal));
  } else {
    b.push(await once(withJournal));
    a.push(await once(without));
  }
}

const journal = new Journal(join(stateDir, 'ops'));
const record = {
  format: 'procwarden.run/1',
  supervisorId: 'bench',
  supervisorPid: process.pid,
  supervisorStart: '1',
  runId: 'bench-1',
  pid: null,
  pidStart: null,
  pgid: null,
  cookie: 'bench-1',
  cgroupPath: null,
  startedAt: Date.now(),
  killSignal: 'SIGTERM',
  graceMs: 5000,
  command: '/bin/true',
};
const ops = [];
for (let i = 0; i < 2000; i++) {
  const t = performance.now();
  journal.write(record);
  journal.write({ ...record, pid: 1234, pidStart: '5678', pgid: 1234 });
  journal.remove(record.runId);
  ops.push(performance.now() - t);
}
rmSync(stateDir, { recursive: true, force: true });

const ma = median(a);
const mb = median(b);
console.log(`spawn+wait /bin/true, median of ${n}:`);
console.log(`  without journal  ${ma.toFixed(3)} ms`);
console.log(`  with journal     ${mb.toFixed(3)} ms  (${(((mb - ma) / ma) * 100).toFixed(1)}%)`);
console.log(
  `journal file ops per run (2 atomic writes to fresh names + 2 unlinks), median of 2000: ${(median(ops) * 1000).toFixed(0)} µs`,
);
console.log('the synchronous spawn() call alone (validation, first record, fork+exec), median:');
console.log(`  without journal  ${median(calls.get(without)).toFixed(3)} ms`);
console.log(`  with journal     ${median(calls.get(withJournal)).toFixed(3)} ms`);
console.log(
  `load average during the run: ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} (2 cores, shared)`,
);
