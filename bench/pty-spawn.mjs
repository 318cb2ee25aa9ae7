// PTY spawn cost next to child mode: N sequential spawn + wait of /bin/true in each mode.
// Usage: npm run build && node bench/pty-spawn.mjs [N]
// Prints wall time (median, p90) and this process's CPU time per spawn (median): on a shared,
// loaded machine the CPU figure is the steadier of the two.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { Supervisor } from '../dist/index.js';

const N = Number(process.argv[2] ?? 50);
const pty = createRequire(import.meta.url)('@lydell/node-pty');
const sup = new Supervisor();

const modes = {
  'raw child_process': () =>
    new Promise((resolve) => spawn('/bin/true', [], { stdio: 'pipe' }).once('exit', resolve)),
  'raw node-pty': () =>
    new Promise((resolve) =>
      pty.spawn('/bin/true', [], { env: process.env, encoding: null }).onExit(resolve),
    ),
  "procwarden mode 'child'": () => sup.spawn({ argv: ['/bin/true'] }).result,
  "procwarden mode 'pty'": () => sup.spawn({ argv: ['/bin/true'], mode: 'pty' }).result,
};

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
// Interleaved (one of each mode per round) so that load from other work on the machine hits all alike.
const times = Object.fromEntries(Object.keys(modes).map((name) => [name, []]));
const cpu = Object.fromEntries(Object.keys(modes).map((name) => [name, []]));
for (const once of Object.values(modes)) for (let i = 0; i < 5; i++) await once(); // warm-up
for (let i = 0; i < N; i++) {
  for (const [name, once] of Object.entries(modes)) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await once();
    times[name].push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu[name].push((c.user + c.system) / 1000);
  }
}
const rows = Object.entries(times).map(([mode, list]) => {
  list.sort((a, b) => a - b);
  const cpuList = cpu[mode].sort((a, b) => a - b);
  return { mode, median: quantile(list, 0.5), p90: quantile(list, 0.9), cpu: quantile(cpuList, 0.5) };
});
const base = rows.find((r) => r.mode === "procwarden mode 'child'")?.median ?? 1;
console.log(
  `N=${N} sequential spawn+wait of /bin/true, ${process.version}, ${process.platform}, load ${loadavg()[0]?.toFixed(2)}`,
);
for (const r of rows) {
  console.log(
    `${r.mode.padEnd(26)} median ${r.median.toFixed(2).padStart(7)} ms   p90 ${r.p90.toFixed(2).padStart(7)} ms   ` +
      `x${(r.median / base).toFixed(2)} of procwarden child   cpu ${r.cpu.toFixed(2).padStart(6)} ms`,
  );
}
