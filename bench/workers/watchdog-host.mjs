// A host for bench/watchdog.mjs: one run (sh + two sleeps, in its own process group) under a
// Supervisor whose journal is STATE_DIR; prints `ready <run pid> <watchdog pid>` once both exist,
// then waits to be SIGKILLed. Usage: watchdog-host.mjs STATE_DIR GRACE_MS
import { Supervisor } from '../../dist/index.js';

const [stateDir, grace] = process.argv.slice(2);
const sup = new Supervisor({ stateDir });
const run = sup.spawn({
  argv: ['/bin/sh', '-c', 'sleep 300 & sleep 300 & wait'],
  containment: 'process-group',
  graceMs: Number(grace),
});
while (sup.watchdogPid === undefined || run.pid === undefined) await new Promise((r) => setImmediate(r));
console.log(`ready ${run.pid} ${sup.watchdogPid}`);
setInterval(() => {}, 1 << 30);
