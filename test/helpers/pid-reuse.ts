import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const LAST_PID = '/proc/sys/kernel/ns_last_pid';

/**
 * Starts `argv` (detached: it leads its own session and group) under exactly `pid`, by setting
 * the kernel's last allocated pid just below it (root only). Other processes fork meanwhile on a
 * busy host (the test files run in parallel), so it retries; a child born under another pid is
 * killed at once. A process that forked between our write and our fork holds `pid` itself: the
 * next attempt waits until it is gone (most are short-lived), for up to `waitMs` in all. Null if
 * it never got it.
 *
 * The counter is the whole machine's: left rewound, every process forked after (other test files'
 * too) would take the numbers of processes that died seconds ago, and a test that names a dead
 * process by its number would find a stranger. So it is put back at once, after each attempt.
 */
export async function spawnAtPid(
  pid: number,
  argv: [string, ...string[]],
  waitMs = 10_000,
): Promise<ChildProcess | null> {
  const until = Date.now() + waitMs;
  while (Date.now() < until) {
    if (existsSync(`/proc/${pid}`)) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      continue;
    }
    const saved = Number(readFileSync(LAST_PID, 'utf8'));
    writeFileSync(LAST_PID, String(pid - 1));
    let child: ChildProcess;
    try {
      child = spawn(argv[0], argv.slice(1), { detached: true, stdio: 'ignore' });
    } finally {
      restore(saved);
    }
    if (child.pid === pid) return child;
    child.kill('SIGKILL');
  }
  return null;
}

/** Puts the counter back where it was, unless forks meanwhile took it further (or it wrapped). */
function restore(saved: number): void {
  const now = Number(readFileSync(LAST_PID, 'utf8'));
  if (now < saved) writeFileSync(LAST_PID, String(saved));
}

/** Why pid reuse cannot be forced here, or null. The probe writes back the value it read. */
export function pidReuseSkipReason(): string | null {
  if (process.getuid?.() !== 0) return `not root: forcing pid reuse needs ${LAST_PID}`;
  try {
    writeFileSync(LAST_PID, readFileSync(LAST_PID, 'utf8').trim());
    return null;
  } catch (error) {
    return `cannot write ${LAST_PID}: ${(error as Error).message}`;
  }
}
