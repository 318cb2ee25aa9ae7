import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';

/**
 * Starts `argv` (detached: it leads its own session and group) under exactly `pid`, by setting
 * the kernel's last allocated pid just below it (root only). Other processes fork meanwhile on a
 * busy host, so it retries; a child born under another pid is killed at once. Null if it never got it.
 */
export function spawnAtPid(pid: number, argv: [string, ...string[]]): ChildProcess | null {
  for (let attempt = 0; attempt < 200; attempt++) {
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
