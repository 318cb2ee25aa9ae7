#!/usr/bin/env node
// npm run test:stress [-- --runs N] [-- VITEST ARGS...]: the whole suite N times in a row (default
// 10) on a machine made busy meanwhile, to find the tests that fail only sometimes. For people, not
// CI: it is slow. Prints each run's failures by test name and, at the end, the processes and
// cgroups the runs leaked. Exit 0 only when every run passed and nothing leaked.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  cgroupPids,
  cookieHolders,
  makeStressCgroup,
  orphanedSince,
  procwardenCgroups,
  removeCgroup,
} from './stress-census.mjs';
import { startLoad } from './stress-load.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Leaked processes live on (a fixture sleeps for minutes); 5 s is ample for anything exiting. */
const SETTLE_MS = 5000;
const { runs, vitestArgs } = parseArgs(process.argv.slice(2));
const logs = mkdtempSync(join(tmpdir(), 'pw-stress-'));

function parseArgs(args) {
  let n = 10;
  const rest = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--runs') n = Number(args[++i]);
    else if (args[i]?.startsWith('--runs=')) n = Number(args[i].slice(7));
    else if (args[i] !== '--') rest.push(args[i]);
  }
  if (!Number.isInteger(n) || n < 1) {
    console.error('usage: stress.mjs [--runs N] [VITEST ARGS...]   (N: a positive integer, default 10)');
    process.exit(2);
  }
  return { runs: n, vitestArgs: rest };
}

const build = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) process.exit(build.status ?? 1);

// Processes that held a cookie before: not ours to count. Nor the cookie this script may itself
// run under (`procwarden run -- npm run test:stress`): the suite inherits it.
const ownCookie = process.env.PROCWARDEN_RUN;
const before = cookieHolders(ownCookie);
const started = Date.now();
// Clock ticks since boot, the unit of a process's start time in /proc/PID/stat.
const startTick = Math.floor(Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 100);
const cgroup = makeStressCgroup();
const mountRoot = cgroupMountRoot();
const rootBefore = new Set(cgroupsAtRoot());

const load = startLoad(2);
const stopLoad = () => load.stop();
process.on('exit', stopLoad);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    stopLoad();
    if (cgroup) removeCgroup(cgroup);
    process.exit(128 + ({ SIGHUP: 1, SIGINT: 2, SIGTERM: 15 }[sig] ?? 0));
  });
}

console.log(
  `stress: ${runs} run(s) of vitest ${vitestArgs.join(' ')} with ${load.count} busy loops; ` +
    `${cgroup ? `suite contained in ${cgroup}` : 'no cgroup of its own (not root or no cgroup v2)'}; logs in ${logs}`,
);
const results = [];
try {
  for (let i = 1; i <= runs; i++) results.push(await runOnce(i));
} finally {
  stopLoad();
}

const failedRuns = results.filter((r) => r.failures.length > 0 || r.code !== 0);
console.log(
  `\nstress: ${runs - failedRuns.length}/${runs} runs green in ${((Date.now() - started) / 1000).toFixed(0)} s`,
);
const loads = results.map((r) => r.load);
console.log(`  load average (1 min) at the end of each run: ${loads.join(', ')}`);
for (const r of failedRuns)
  console.log(
    `  run ${r.index}: ${r.failures.length > 0 ? r.failures.join('; ') : `vitest exited ${r.code}`}`,
  );

// The last run's own processes (vitest's workers, a fixture its last test killed) may still be on
// their way out when vitest's main process has exited: a leak is what is still there once they had
// the time to end, never what was merely dying at that instant (the census of stop 24 counted one).
await settle(cgroup);
const leaked = leakedProcesses();
const leftover = leftoverCgroups();
console.log(`  leaked processes: ${leaked.length}${leaked.length ? ` (${leaked.join(', ')})` : ''}`);
console.log(`  leftover cgroups: ${leftover.length}${leftover.length ? ` (${leftover.join(', ')})` : ''}`);
process.exitCode = failedRuns.length === 0 && leaked.length === 0 && leftover.length === 0 ? 0 : 1;

/** One vitest run; its output goes to a log file, its results (JSON reporter) to another. */
function runOnce(index) {
  const json = join(logs, `run-${index}.json`);
  const log = join(logs, `run-${index}.log`);
  const t0 = Date.now();
  const vitest = [
    join(root, 'node_modules', 'vitest', 'vitest.mjs'),
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${json}`,
    ...vitestArgs,
  ];
  // A /bin/sh shim joins the stress cgroup before it becomes vitest: no window outside it.
  const argv = cgroup
    ? [
        '/bin/sh',
        '-c',
        'echo $$ > "$0/cgroup.procs" && log=$1 && shift && exec "$@" > "$log" 2>&1',
        cgroup,
        log,
        process.execPath,
        ...vitest,
      ]
    : ['/bin/sh', '-c', 'exec "$@" > "$0" 2>&1', log, process.execPath, ...vitest];
  return new Promise((resolve) => {
    const child = spawn(argv[0], argv.slice(1), { cwd: root, stdio: 'ignore' });
    child.on('exit', (code, signal) => {
      const failures = failuresIn(json);
      const load = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
      const seconds = ((Date.now() - t0) / 1000).toFixed(0);
      console.log(
        `run ${index}/${runs}: ${failures.length === 0 && code === 0 ? 'green' : `RED (${failures.length} failure(s), exit ${code ?? signal})`} in ${seconds} s, load ${load}`,
      );
      for (const f of failures) console.log(`  ${f}`);
      resolve({ index, code: code ?? 128, failures, load });
    });
  });
}

/** "file > describe > test" of every failed test, and files that failed outside any test. */
function failuresIn(jsonPath) {
  let report;
  try {
    report = JSON.parse(readFileSync(jsonPath, 'utf8'));
  } catch {
    return ['(no JSON report: vitest did not finish)'];
  }
  const out = [];
  for (const file of report.testResults ?? []) {
    const name = file.name.startsWith(root) ? file.name.slice(root.length + 1) : file.name;
    const failed = (file.assertionResults ?? []).filter((a) => a.status === 'failed');
    for (const a of failed) out.push(`${name} > ${[...(a.ancestorTitles ?? []), a.title].join(' > ')}`);
    if (failed.length === 0 && file.status === 'failed')
      out.push(`${name}: ${(file.message ?? 'failed').split('\n')[0]}`);
  }
  return out;
}

/** Waits (at most SETTLE_MS) for the suite's cgroup to hold no live process. */
async function settle(dir) {
  const until = Date.now() + SETTLE_MS;
  while (dir && cgroupPids(dir).length > 0 && Date.now() < until)
    await new Promise((r) => setTimeout(r, 100));
}

/**
 * Processes left by the runs: whatever is still in the suite's cgroup, and cookie holders that
 * were not there before and descend only from processes started since (see orphanedSince), which
 * tells them from other people's runs in progress on a shared machine. Those outside the cgroup
 * are listed, never killed: they cannot be told from someone else's for certain.
 */
function leakedProcesses() {
  const out = [];
  if (cgroup)
    for (const pid of cgroupPids(cgroup)) out.push(`${pid} ${describe(pid)} (in the suite's cgroup)`);
  const inCgroup = new Set(cgroup ? cgroupPids(cgroup) : []);
  for (const [key, info] of cookieHolders(ownCookie)) {
    const pid = Number(key.split('@')[0]);
    if (before.has(key) || inCgroup.has(pid) || !orphanedSince(pid, startTick)) continue;
    out.push(`${pid} ${info.command} (carries a run cookie)`);
  }
  return out;
}

/**
 * procwarden cgroups left in the suite's cgroup, and test cgroups made at the cgroup root since
 * the start (they carry their maker's pid) whose maker is gone.
 */
function leftoverCgroups() {
  const out = [];
  if (cgroup) {
    out.push(...procwardenCgroups(cgroup));
    // The suite's processes are ours: what is left in there is killed with the cgroup.
    out.push(...removeCgroup(cgroup).map((f) => `could not remove ${f}`));
  }
  for (const name of cgroupsAtRoot()) {
    const maker = Number(/\d+/.exec(name)?.[0]);
    if (!rootBefore.has(name) && !existsSync(`/proc/${maker}`)) out.push(join(mountRoot ?? '', name));
  }
  return out;
}

/** The cgroup2 mount, where some tests make cgroups of their own (pw-*, procwarden-*). */
function cgroupMountRoot() {
  try {
    return readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .find((l) => l.split(' - ')[1]?.startsWith('cgroup2 '))
      ?.split(' ')[4];
  } catch {
    return undefined;
  }
}

function cgroupsAtRoot() {
  if (!mountRoot) return [];
  try {
    return readdirSync(mountRoot).filter(
      (n) => /^(pw-|procwarden-)/.test(n) && n !== `pw-stress-${process.pid}`,
    );
  } catch {
    return [];
  }
}

/** Its command line, to tell which test left it. */
function describe(pid) {
  try {
    return `[${readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim().slice(0, 200)}]`;
  } catch {
    return '[gone]';
  }
}
