/**
 * The watchdog of one Supervisor, a process of its own (started by ./launch.ts). Its stdin is a
 * pipe whose other end only the host holds. End-of-file without "clean" first means the host died
 * (SIGKILL, OOM kill, uncaught exception, process.exit, a fatal signal): the watchdog then reaps
 * that supervisor's journal records, and only those, with each run's own signal and grace, and exits.
 */
import { reap } from '../journal/index.js';
import { CLEAN, fromArgv } from './protocol.js';

const args = fromArgv(process.argv.slice(2));
if (!args) process.exit(2);

// The host says at most "clean"; keep only what could still complete it.
let heard = '';
let done = false;

function hostGone(): void {
  if (done || !args) return;
  done = true;
  if (heard.endsWith(CLEAN)) process.exit(0);
  reap({ stateDir: args.stateDir, deadSupervisor: { id: args.supervisorId, pid: args.hostPid } }).then(
    () => process.exit(0),
    () => process.exit(1),
  );
}

process.stdin.setEncoding('utf8');
process.stdin.on('data', (text: string) => {
  heard = (heard + text).slice(-CLEAN.length);
});
process.stdin.on('end', hostGone);
process.stdin.on('error', hostGone);
// Named in ps (and /proc/PID/cmdline) once it listens: readiness, for those who wait for it.
process.title = `procwarden-watchdog ${args.supervisorId}`;
