// A host for bench/watchdog.mjs. Usage: guard-host.mjs MODE STATE_DIR [N]
//   first   times the first spawn() of a fresh process, right after its Supervisor is made (PROCWARDEN_WATCHDOG decides the guard),
//           and a raw child_process.spawn of /bin/sh after it (one fork and exec: the least a
//           process of its own costs); prints `first <spawn() ms> <raw sh spawn ms>`.
//   warm    the same, 50 ms after the Supervisor is made (the guard started meanwhile)
//   rss N   N supervisors, one run each; prints `rss <guard pids> <guard VmRSS KiB>`.
//   kill    one run: a perl TERM recorder that writes the epoch time it got TERM and exits, two
//           sleeps beside it in its process group; prints `ready <run pid> <guard pid>`, waits.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Supervisor } from '../../dist/index.js';

const [mode, stateDir, n, out] = process.argv.slice(2);
const ms = (t) => (performance.now() - t).toFixed(3);

if (mode === 'first' || mode === 'warm') {
  const sup = new Supervisor({ stateDir });
  // warm: the Supervisor is made ahead of its first spawn, as a long-lived host makes it.
  if (mode === 'warm') await new Promise((r) => setTimeout(r, 50));
  let t = performance.now();
  const run = sup.spawn({ argv: ['/bin/true'], containment: 'process-group' });
  const first = ms(t);
  t = performance.now();
  const raw = spawn('/bin/sh', ['-c', 'exit 0'], { stdio: 'ignore' });
  const rawMs = ms(t);
  const rawExit = new Promise((r) => raw.once('exit', r));
  await run.result;
  await rawExit;
  console.log(`first ${first} ${rawMs}`);
} else if (mode === 'rss') {
  const sups = Array.from({ length: Number(n) }, () => new Supervisor({ stateDir }));
  const runs = sups.map((sup) => sup.spawn({ argv: ['sleep', '30'], containment: 'process-group' }));
  const guards = [...new Set(sups.map((s) => s.watchdogPid))];
  const rss = guards.map((pid) =>
    Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]),
  );
  console.log(`rss ${guards.length} ${rss.reduce((a, b) => a + b, 0)}`);
  for (const r of runs) r.kill();
  await Promise.all(runs.map((r) => r.result));
} else if (mode === 'kill') {
  const sup = new Supervisor({ stateDir });
  const perl = `use Time::HiRes; $SIG{TERM} = sub { open(my $f, '>', '${out}'); printf $f "%.3f", Time::HiRes::time() * 1000; close $f; exit 0 }; sleep 1 while 1;`;
  const run = sup.spawn({
    argv: ['/bin/sh', '-c', 'sleep 300 & sleep 300 & exec perl -e "$0"', perl],
    containment: 'process-group',
    graceMs: 2000,
  });
  console.log(`ready ${run.pid} ${sup.watchdogPid}`);
  setInterval(() => {}, 1 << 30);
}
