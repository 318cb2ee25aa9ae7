// What oomScoreAdj costs the spawn path (Linux): median spawn+wait of /bin/true in process-group
// mode with the default (the command started through a /bin/sh that writes its score, then execs
// it) and with `oomScoreAdj: false` (spawned directly), interleaved so that machine noise hits both
// alike; the same in cgroup mode where it is available (its shim exists anyway: no extra exec);
// and a raw child_process spawn of /bin/sh -c 'exec /bin/true' against /bin/true, the shell's
// exec alone.
// Usage: node bench/oom-score.mjs [N=200]   (after npm run build)
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { Supervisor } from '../dist/index.js';

const n = Number(process.argv[2] ?? 200);
const sup = new Supervisor({ journal: false });
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const run = async (spec) => {
  const t = performance.now();
  const r = await sup.spawn({ argv: ['/bin/true'], ...spec }).result;
  if (r.reason !== 'exit' || r.exitCode !== 0) throw new Error(`run failed: ${JSON.stringify(r)}`);
  return performance.now() - t;
};
const raw = (file, args) =>
  new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(file, args, { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', () => resolve(performance.now() - t));
  });

const cases = {
  'process-group, default (+500)': () => run({ containment: 'process-group' }),
  'process-group, oomScoreAdj: false': () => run({ containment: 'process-group', oomScoreAdj: false }),
  'raw /bin/sh -c "exec /bin/true"': () => raw('/bin/sh', ['-c', 'exec /bin/true']),
  'raw /bin/true': () => raw('/bin/true', []),
};
const auto = sup.spawn({ argv: ['/bin/true'] });
await auto.result;
if (auto.containment === 'cgroup') {
  cases['cgroup, default (+500)'] = () => run({ containment: 'cgroup' });
  cases['cgroup, oomScoreAdj: false'] = () => run({ containment: 'cgroup', oomScoreAdj: false });
}
const names = Object.keys(cases);
const times = Object.fromEntries(names.map((name) => [name, []]));
for (let i = 0; i < 20; i++) for (const name of names) await cases[name](); // warm-up
const load = loadavg()[0];
for (let i = 0; i < n; i++) for (const name of names) times[name].push(await cases[name]());
console.log(`${n} runs each, interleaved; load average ${load.toFixed(2)} at the start`);
for (const name of names) console.log(`${name.padEnd(36)} median ${median(times[name]).toFixed(3)} ms`);
