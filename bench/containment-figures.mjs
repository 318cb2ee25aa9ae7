#!/usr/bin/env node
// Figures for the containment issue (#3), measured on this machine, in one run:
//  1. time to extinction of a ~500-process tree: procwarden cgroup mode, process-group mode, and a
//     raw kill(-pgid, SIGKILL) as the floor;
//  2. the cost of one /proc sweep (table + cookie search) with 1000 extra processes alive.
// Usage: npm run build && node bench/containment-figures.mjs [repeats=5]
// Run it on an idle machine; it starts ~1500 processes and kills each one it started.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { CgroupHost } from '../dist/containment/index.js';
import { Supervisor } from '../dist/index.js';
import { descendantsOf, ProcfsTable } from '../dist/tree/index.js';

const REPEATS = Number(process.argv[2] ?? 5);
const WIDE = 20;
const LEAVES = 24; // 1 + 20 + 20 * 24 = 501 processes
const TREE = `for i in $(seq ${WIDE}); do sh -c 'for j in $(seq ${LEAVES}); do sleep 300 & done; wait' & done; wait`;
const SIZE = 1 + WIDE + WIDE * LEAVES;
const table = new ProcfsTable();

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (ms) => `${ms.toFixed(1)} ms`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function alive(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = s[s.lastIndexOf(')') + 2];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The root's tree once it has all its members. */
async function grown(root, size) {
  for (let i = 0; i < 3000; i++) {
    const list = table.listSync();
    const tree = descendantsOf(list, [root]).filter((p) => p.state !== 'Z');
    if (tree.length + 1 >= size) return [root, ...tree.map((p) => p.pid)];
    await sleep(10);
  }
  throw new Error(`tree of ${root} never reached ${size} processes`);
}

/** Polls every pid, yielding to the event loop between passes (procwarden runs on the same loop). */
async function untilGone(pids) {
  let left = pids;
  while (left.length > 0) {
    left = left.filter(alive);
    await new Promise((r) => setImmediate(r));
  }
}

async function raw() {
  const child = spawn('/bin/sh', ['-c', TREE], { detached: true, stdio: 'ignore' });
  const pids = await grown(child.pid, SIZE);
  const t0 = performance.now();
  process.kill(-child.pid, 'SIGKILL');
  await untilGone(pids);
  return { extinct: performance.now() - t0 };
}

async function supervised(containment, how) {
  const sup = new Supervisor();
  const handle = sup.spawn({ argv: ['/bin/sh', '-c', TREE], containment, graceMs: 5000 });
  const pids = await grown(handle.pid, SIZE);
  const t0 = performance.now();
  if (how === 'kill') handle.kill();
  else handle.cancel();
  const watch = untilGone(pids).then(() => performance.now() - t0);
  const r = await handle.result;
  const settled = performance.now() - t0;
  if (r.containment !== containment) throw new Error(`asked ${containment}, got ${r.containment}`);
  if (r.tree.escaped > 0) throw new Error(`${r.tree.escaped} escaped`);
  return { extinct: await watch, settled, sequence: r.tree.report?.durationMs ?? Number.NaN };
}

/** Runs the variants interleaved (a load spike on this shared machine hits all of them alike). */
async function compare(variants) {
  const runs = new Map(variants.map(([name]) => [name, []]));
  for (let i = 0; i < REPEATS; i++) for (const [name, fn] of variants) runs.get(name).push(await fn());
  for (const [name, rs] of runs) {
    const parts = Object.keys(rs[0]).map((k) => `${k} ${fmt(median(rs.map((r) => r[k])))}`);
    console.log(`${name.padEnd(36)} ${parts.join('   ')}`);
  }
}

async function sweepCost() {
  const extra = spawn('/bin/sh', ['-c', 'for i in $(seq 1000); do sleep 300 & done; wait'], {
    detached: true,
    stdio: 'ignore',
  });
  try {
    await grown(extra.pid, 1001);
    const total = table.listSync().length;
    const me = table.getSync(process.pid);
    const young = table.getSync(extra.pid); // a cookie given just before the 1000 started
    const query = { name: 'PROCWARDEN_RUN', value: 'no-such-run' };
    const time = (fn) => {
      const xs = [];
      for (let i = 0; i < 30; i++) {
        const t = performance.now();
        fn();
        xs.push(performance.now() - t);
      }
      return median(xs);
    };
    console.log(`\n/proc sweep with ${total} processes alive (1000 extra), median of 30:`);
    console.log(`  table only (one readdir + stat each)            ${fmt(time(() => table.listSync()))}`);
    console.log(
      `  sweep, cookie given after the 1000 started       ${fmt(time(() => table.sweepSync({ ...query, firstHolder: { ...me, startTime: String(Number.MAX_SAFE_INTEGER) } })))}`,
    );
    console.log(
      `  sweep, cookie given before the 1000 started      ${fmt(time(() => table.sweepSync({ ...query, firstHolder: young })))}`,
    );
    console.log(
      `  sweep reading every environment (worst case)     ${fmt(time(() => table.sweepSync(query)))}`,
    );
  } finally {
    process.kill(-extra.pid, 'SIGKILL');
  }
}

console.log(
  `${SIZE}-process tree (sh -> ${WIDE} sh -> ${LEAVES} sleep each), SIGKILL, median of ${REPEATS}:`,
);
console.log(
  'extinct: from the kill to the last member gone; settled: to result; sequence: report.durationMs\n',
);
const cgroup = new CgroupHost().probe();
if (!cgroup.ok) console.log(`cgroup mode skipped: ${cgroup.reason}`);
const withCgroup = (variants) => variants.filter(([name]) => cgroup.ok || !name.includes('cgroup'));
await compare(
  withCgroup([
    ['raw kill(-pgid, SIGKILL)', raw],
    ['procwarden cgroup, kill()', () => supervised('cgroup', 'kill')],
    ['procwarden process-group, kill()', () => supervised('process-group', 'kill')],
  ]),
);
console.log('\nthe same tree ended gracefully (SIGTERM, every member exits at once):');
await compare(
  withCgroup([
    ['procwarden cgroup, cancel()', () => supervised('cgroup', 'cancel')],
    ['procwarden process-group, cancel()', () => supervised('process-group', 'cancel')],
  ]),
);
await sweepCost();
