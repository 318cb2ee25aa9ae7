// Busy loops that keep every core loaded while the suite runs: the timing a test relies on must
// hold on a busy machine, not only on a quiet one.
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';

/**
 * Starts `perCore` busy loops per core. Each is a /bin/sh loop whose only builtin, `kill -0`,
 * checks that this script is alive: if the script dies without stopping them (SIGKILL), they end
 * by themselves on their next iteration. stop() ends them by pid; it is synchronous so that it can
 * run from an 'exit' listener.
 */
export function startLoad(perCore = 2) {
  const loops = [];
  for (let i = 0; i < perCore * availableParallelism(); i++) {
    loops.push(
      spawn('/bin/sh', ['-c', 'while kill -0 "$0" 2>/dev/null; do :; done', String(process.pid)], {
        stdio: 'ignore',
      }),
    );
  }
  return {
    count: loops.length,
    stop() {
      for (const loop of loops) {
        if (loop.exitCode !== null || loop.signalCode !== null) continue;
        try {
          loop.kill('SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}
