// One contender, one repetition, in a fresh process (its RSS is the supervisor's):
// node workers/scale.mjs <raw|procwarden> <runs>  ->  JSON on stdout.
// Starts <runs> trees of 3 processes at once, waits until all are built, ends them all at once
// (procwarden: Supervisor.cancelAll(); raw: kill(-pgid, SIGTERM) each), and times until all extinct.
import { spawn } from 'node:child_process';
import { Supervisor } from '../../dist/index.js';
import { delay, killSurvivors, snapshot, waitExtinct } from '../lib/procs.mjs';
import { treeArgv } from '../lib/trees.mjs';

const [contender, runsArg] = process.argv.slice(2);
const runs = Number(runsArg);
const SIZE = 3;
let members = [];
// Whatever happens, nothing this worker started outlives it.
process.on('exit', () => killSurvivors(members));

/** Waits until every root has its whole tree, from one /proc snapshot per poll. */
async function allBuilt(roots) {
  const want = new Set(roots);
  for (let tries = 0; ; tries++) {
    const all = snapshot();
    const byParent = new Map();
    for (const p of all) {
      const list = byParent.get(p.ppid);
      if (list) list.push(p);
      else byParent.set(p.ppid, [p]);
    }
    const found = [];
    let complete = true;
    for (const p of all) {
      if (!want.has(p.pid)) continue;
      const tree = [p];
      for (let i = 0; i < tree.length; i++) tree.push(...(byParent.get(tree[i].pid) ?? []));
      if (tree.length < SIZE) complete = false;
      found.push(...tree);
    }
    if (complete && found.length >= roots.length * SIZE) return found;
    if (tries > 12_000) throw new Error(`trees not built: ${found.length} of ${roots.length * SIZE}`);
    await delay(10);
  }
}

globalThis.gc?.();
const rssBefore = process.memoryUsage().rss;
const startedAt = performance.now();
let end;
let roots;
if (contender === 'procwarden') {
  const sup = new Supervisor();
  const handles = Array.from({ length: runs }, () =>
    sup.spawn({ argv: treeArgv(SIZE), containment: 'process-group', graceMs: 5000 }),
  );
  roots = handles.map((h) => h.pid);
  end = async () => {
    const results = await sup.cancelAll();
    const escaped = results.reduce((n, r) => n + r.tree.escaped, 0);
    if (escaped > 0) throw new Error(`procwarden reported ${escaped} escaped members`);
  };
} else {
  roots = Array.from({ length: runs }, () => {
    const [file, ...args] = treeArgv(SIZE);
    return spawn(file, args, { detached: true, stdio: 'ignore' }).pid;
  });
  end = async () => {
    for (const pid of roots) process.kill(-pid, 'SIGTERM');
  };
}
const spawnedAt = performance.now();
members = await allBuilt(roots);
const builtAt = performance.now();
const t0 = performance.now();
await end();
await waitExtinct(members, 600_000);
const ms = performance.now() - t0;
const survivors = killSurvivors(members);
const peak = process.resourceUsage().maxRSS * 1024;
process.stdout.write(
  JSON.stringify({
    ms,
    spawnMs: spawnedAt - startedAt,
    buildMs: builtAt - spawnedAt,
    processes: members.length,
    survivors,
    rssGrowth: peak - rssBefore,
  }),
);
