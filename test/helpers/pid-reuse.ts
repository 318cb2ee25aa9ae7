import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';

/**
 * Starts `argv` (detached: it leads its own session and group) under exactly `pid`, by setting
 * the kernel's last allocated pid just below it (root only). Other processes fork meanwhile on a
 * busy host (the test files run in parallel), so it retries; a child born under another pid is
 * killed at once. A process that forked between our write and our fork holds `pid` itself: the
 * next attempt waits until it is gone (most are short-lived), for up to `waitMs` in all. Null if
 * it never got it.
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
    writeFileSync('/proc/sys/kernel/ns_last_pid', String(pid - 1));
    const child = spawn(argv[0], argv.slice(1), { detached: true, stdio: 'ignore' });
    if (child.pid === pid) return child;
    child.kill('SIGKILL');
  }
  return null;
}

/** Why pid reuse cannot be forced here, or null. */
export function pidReuseSkipReason(): string | null {
  if (process.getuid?.() !== 0) return 'not root: forcing pid reuse needs /proc/sys/kernel/ns_last_pid';
  try {
    writeFileSync('/proc/sys/kernel/ns_last_pid', String(process.pid));
    return null;
  } catch (error) {
    return `cannot write /proc/sys/kernel/ns_last_pid: ${(error as Error).message}`;
  }
}
