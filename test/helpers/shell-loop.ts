import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { LeakGuard } from './procs.js';
import { waitFor } from './procs.js';

export interface LoopOutcome {
  /** How bash itself ended: a death by SIGINT means it stopped the loop. */
  status: number | null;
  signal: NodeJS.Signals | null;
  /** What the loop printed: `started`, then `next $?` after each round, `end` after the loop. */
  stdout: string;
}

const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;

/**
 * A real `bash -c 'for i in 1 2; do WRAPPER sh -c SCRIPT sh $i; echo "next $?"; done; echo end'`
 * in a process group of its own (nothing sent to it can reach the test runner), and a Ctrl-C as a
 * terminal gives it: SIGINT to bash and to its foreground job (WRAPPER: timeout(1), procwarden),
 * once SCRIPT has printed `started` in round 1 (SCRIPT sees the round as $1). bash, when its
 * foreground command dies of the SIGINT it got too, stops the loop by dying of it; when the
 * command handled it and exited, the loop goes on.
 */
export async function ctrlCInLoop(leaks: LeakGuard, wrapper: string[], script: string): Promise<LoopOutcome> {
  const command = [...wrapper, 'sh', '-c', script, 'sh', '$i'].map((w) => (w === '$i' ? '"$i"' : quote(w)));
  const loop = `for i in 1 2; do ${command.join(' ')}; echo "next $?"; done; echo end`;
  const bash = spawn('bash', ['-c', loop], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  leaks.track(bash.pid);
  let stdout = '';
  bash.stdout?.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  const exited = new Promise<{ status: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    bash.once('exit', (status, signal) => resolve({ status, signal })),
  );
  const pid = bash.pid ?? 0;
  await waitFor(() => stdout.includes('started'), { what: 'round 1 started', timeoutMs: 30_000 });
  // The job: bash's one child while round 1 runs (the wrapper; the command is its child).
  const job = Number(readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ')[0]);
  leaks.track(job);
  process.kill(pid, 'SIGINT');
  process.kill(job, 'SIGINT');
  const how = await exited;
  await Promise.race([
    new Promise((r) => bash.stdout?.once('close', r)),
    new Promise((r) => setTimeout(r, 2000)),
  ]);
  bash.stdout?.destroy();
  return { ...how, stdout };
}

/** Round 1 runs until stopped; round 2 ends at once. */
export const UNTIL_STOPPED = '[ "$1" = 1 ] || exit 0; echo started; while :; do sleep 0.05; done';
/** Round 1 handles SIGINT by exiting 42; round 2 ends at once. */
export const HANDLES_INT = `[ "$1" = 1 ] || exit 0; trap 'exit 42' INT; echo started; while :; do sleep 0.05; done`;
