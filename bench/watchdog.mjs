// The watchdog (issue 12): what it costs and how fast it acts.
// - start cost: the host's share of starting one (its spawn, on the event-loop turn after the
//   first run's spawn) and what the first spawn itself pays with a watchdog and without;
// - its memory: VmRSS of a listening watchdog;
// - host SIGKILL -> extinction: a host holding one run (sh + two sleeps that die on SIGTERM) is
//   SIGKILLed; the time until every member is gone (zombies count as gone), ROUNDS times.
// Usage: node bench/watchdog.mjs [ROUNDS=20]   (after npm run build)
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Supervisor } from '../dist/index.js';
import { Watchdog } from '../dist/watchdog/launch.js';
import { isGone, stat } from './lib/procs.mjs';
import { summarize } from './lib/stats.mjs';

const rounds = Number(process.argv[2] ?? 20);
const here = dirname(fileURLToPath(import.meta.url));
const stateDir = mkdtempSync(join(tmpdir(), 'pw-bench-wd-'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fmt = (s, unit = 'ms', digits = 2) =>
  `median ${s.median.toFixed(digits)} ${unit}, min ${s.min.toFixed(digits)}, worst ${s.max.toFixed(digits)} (n=${s.n})`;

const listening = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('procwarden-watchdog');
  } catch {
    return false;
  }
};
const rssKiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
const waitUntil = async (probe, what, ms = 30_000) => {
  const until = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
};

// 1. The host's share: Watchdog.start() is what runs on the turn after the first spawn.
const starts = [];
const rss = [];
for (let i = 0; i < Math.min(rounds, 10); i++) {
  const w = new Watchdog({ supervisorId: `pwbench${i}`, hostPid: process.pid, stateDir });
  const t = performance.now();
  w.start();
  starts.push(performance.now() - t);
  const pid = w.pid;
  await waitUntil(() => listening(pid), 'the watchdog to listen');
  rss.push(rssKiB(pid) / 1024);
  w.stop();
  await waitUntil(() => isGone({ pid, start: stat(pid)?.start }), 'the watchdog to exit');
}

// 2. What the first spawn pays: spawn() call time of a fresh supervisor's first run.
const firstSpawn = { on: [], off: [] };
for (let i = 0; i < 20; i++) {
  for (const watchdog of i % 2 ? [true, false] : [false, true]) {
    const sup = new Supervisor({ stateDir, watchdog });
    const t = performance.now();
    const h = sup.spawn({ argv: ['/bin/true'] });
    firstSpawn[watchdog ? 'on' : 'off'].push(performance.now() - t);
    await h.result;
    await sup.shutdown();
  }
}

// 3. Host SIGKILL -> extinction.
const extinction = [];
for (let i = 0; i < rounds; i++) {
  const host = spawn(process.execPath, [join(here, 'workers', 'watchdog-host.mjs'), stateDir, '2000'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  host.stdout.on('data', (c) => {
    out += c;
  });
  await waitUntil(() => out.includes('\n'), 'the host to be ready');
  const [, runPid, wd] = out.trim().split(' ').map(Number);
  await waitUntil(() => listening(wd), 'the watchdog to listen');
  // The run's members: its process group, as it is now (sh and both sleeps).
  const members = [];
  await waitUntil(() => {
    members.length = 0;
    for (const e of readdirSync('/proc')) {
      const s = /^\d+$/.test(e) ? stat(Number(e)) : null;
      if (s && s.pgid === runPid && s.state !== 'Z') members.push(s);
    }
    return members.length >= 3;
  }, 'the run to be up');
  const t = performance.now();
  host.kill('SIGKILL');
  await waitUntil(() => members.every(isGone), 'the tree to be gone');
  extinction.push(performance.now() - t);
  await waitUntil(() => !stat(wd) || stat(wd).state === 'Z', 'the watchdog to exit');
}
const left = readdirSync(stateDir);
rmSync(stateDir, { recursive: true, force: true });

console.log(`watchdog (node ${process.version}, load ${loadavg()[0].toFixed(2)})`);
console.log(`  host's share of a watchdog start (spawn call): ${fmt(summarize(starts))}`);
console.log(`  first spawn() call with watchdog:    ${fmt(summarize(firstSpawn.on))}`);
console.log(`  first spawn() call without watchdog: ${fmt(summarize(firstSpawn.off))}`);
console.log(`  watchdog RSS while listening: ${fmt(summarize(rss), 'MiB', 1)}`);
console.log(`  host SIGKILL -> tree extinct (SIGTERM kills it): ${fmt(summarize(extinction), 'ms', 0)}`);
if (left.length > 0) console.log(`  journal not emptied: ${left.join(', ')}`);
