// The host guard (issue 43): what it costs and how fast it acts, on this machine, in one run.
// - the first spawn(): in fresh processes, with the guard and without (PROCWARDEN_WATCHDOG=0), and
//   beside it a raw spawn of /bin/sh, one fork and exec: what any guard of its own costs at least;
// - its memory: the guard's VmRSS (and how many guards) with 1 and 20 Supervisors in one host;
// - host SIGKILL -> the first signal a member gets, and -> extinction of the run's tree, ROUNDS
//   times (the member records the epoch time it got SIGTERM; the host's kill is timed here);
// - the same extinction with 20,000 other supervisors' records in the state directory.
// Usage: node bench/watchdog.mjs [ROUNDS=30]   (after npm run build; not part of npm run bench)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isGone, stat } from './lib/procs.mjs';
import { summarize } from './lib/stats.mjs';

const rounds = Number(process.argv[2] ?? 30);
const here = dirname(fileURLToPath(import.meta.url));
const worker = join(here, 'workers', 'guard-host.mjs');
const stateDir = mkdtempSync(join(tmpdir(), 'pw-bench-guard-'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fmt = (s, unit = 'ms', digits = 2) =>
  `median ${s.median.toFixed(digits)} ${unit}, min ${s.min.toFixed(digits)}, worst ${s.max.toFixed(digits)} (n=${s.n})`;
const waitUntil = async (probe, what, ms = 30_000) => {
  const until = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(1);
  }
};
const runWorker = (args, env = {}) => {
  const r = spawnSync(process.execPath, [worker, ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`worker ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim().split(' ');
};

// 1. The first spawn(), alternated with and without the guard.
const first = { on: [], off: [], raw: [], warmOn: [], warmOff: [] };
for (let i = 0; i < 20; i++) {
  for (const on of i % 2 ? [true, false] : [false, true]) {
    const env = on ? {} : { PROCWARDEN_WATCHDOG: '0' };
    const [, spawnMs, rawMs] = runWorker(['first', stateDir], env);
    first[on ? 'on' : 'off'].push(Number(spawnMs));
    first.raw.push(Number(rawMs));
    const [, warmMs] = runWorker(['warm', stateDir], env);
    first[on ? 'warmOn' : 'warmOff'].push(Number(warmMs));
  }
}

// 2. The guard's memory with 1 and 20 supervisors.
const rss = {};
for (const n of [1, 20]) {
  const [, guards, kib] = runWorker(['rss', stateDir, String(n)]);
  rss[n] = { guards: Number(guards), mib: Number(kib) / 1024 };
}

// 3. Host SIGKILL -> first signal, -> extinction.
async function hostKill(dir) {
  const out = join(tmpdir(), `pw-bench-term-${process.pid}`);
  rmSync(out, { force: true });
  const host = spawn(process.execPath, [worker, 'kill', dir, '0', out], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let text = '';
  host.stdout.on('data', (c) => {
    text += c;
  });
  await waitUntil(() => text.includes('\n'), 'the host to be ready');
  const [, runPid, guard] = text.trim().split(' ').map(Number);
  const members = [];
  await waitUntil(() => {
    members.length = 0;
    for (const e of readdirSync('/proc')) {
      const s = /^\d+$/.test(e) ? stat(Number(e)) : null;
      if (s && s.pgid === runPid && s.state !== 'Z') members.push(s);
    }
    return (
      members.length >= 3 &&
      members.some((m) => readFileSync(`/proc/${m.pid}/cmdline`, 'utf8').startsWith('perl'))
    );
  }, 'the run to be up');
  await sleep(50); // perl's handler installed
  const killedAt = performance.timeOrigin + performance.now();
  host.kill('SIGKILL');
  const t = performance.now();
  await waitUntil(() => members.every(isGone), 'the tree to be gone');
  const extinct = performance.now() - t;
  await waitUntil(() => existsSync(out) && readFileSync(out, 'utf8') !== '', 'the first signal');
  const signalled = Number(readFileSync(out, 'utf8')) - killedAt;
  await waitUntil(() => !stat(guard) || stat(guard).state === 'Z', 'the guard to exit');
  rmSync(out, { force: true });
  return { signalled, extinct };
}

const kills = { signalled: [], extinct: [] };
for (let i = 0; i < rounds; i++) {
  const r = await hostKill(stateDir);
  kills.signalled.push(r.signalled);
  kills.extinct.push(r.extinct);
}
// 20,000 stale records of other (dead) supervisors beside the host's own.
const crowded = mkdtempSync(join(tmpdir(), 'pw-bench-guard-crowded-'));
for (let i = 0; i < 20_000; i++) {
  const id = `pw${(5_000_000 + i).toString(36)}abcdef`;
  const record = {
    format: 'procwarden.run/1',
    supervisorId: id,
    supervisorPid: 5_000_000 + i,
    supervisorStart: '1',
    runId: `${id}-1`,
    pid: null,
    pidStart: null,
    pgid: null,
    cookie: `${id}-1`,
    cgroupPath: null,
    startedAt: 0,
    killSignal: 'SIGTERM',
    graceMs: 100,
    command: 'x',
  };
  writeFileSync(join(crowded, `${id}-1.json`), JSON.stringify(record), { mode: 0o600 });
}
const crowdedKills = [];
for (let i = 0; i < Math.min(rounds, 10); i++) crowdedKills.push((await hostKill(crowded)).extinct);
const left = readdirSync(stateDir);
rmSync(stateDir, { recursive: true, force: true });
rmSync(crowded, { recursive: true, force: true });

const on = summarize(first.on);
const off = summarize(first.off);
console.log(`host guard (node ${process.version}, load ${loadavg()[0].toFixed(2)})`);
console.log(`  first spawn() call, guard on:   ${fmt(on)}`);
console.log(`  first spawn() call, guard off:  ${fmt(off)}`);
console.log(`  added by the guard (medians):   ${(on.median - off.median).toFixed(2)} ms`);
const warmOn = summarize(first.warmOn);
const warmOff = summarize(first.warmOff);
console.log(`  first spawn() 50 ms after the Supervisor was made, guard on:  ${fmt(warmOn)}`);
console.log(`  first spawn() 50 ms after the Supervisor was made, guard off: ${fmt(warmOff)}`);
console.log(`  added by the guard then (medians): ${(warmOn.median - warmOff.median).toFixed(2)} ms`);
console.log(
  `  raw spawn of /bin/sh (one fork+exec, the least a process costs): ${fmt(summarize(first.raw))}`,
);
for (const n of [1, 20])
  console.log(`  ${n} supervisor(s): ${rss[n].guards} guard(s), ${rss[n].mib.toFixed(2)} MiB resident`);
console.log(`  host SIGKILL -> first SIGTERM:  ${fmt(summarize(kills.signalled), 'ms', 1)}`);
console.log(`  host SIGKILL -> tree extinct:   ${fmt(summarize(kills.extinct), 'ms', 1)}`);
console.log(`  the same, 20,000 other records in the state dir: ${fmt(summarize(crowdedKills), 'ms', 1)}`);
if (left.length > 0) console.log(`  journal not emptied: ${left.join(', ')}`);
