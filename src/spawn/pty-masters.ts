import type { StdioOptions } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';

/**
 * The PTY masters this process holds, by descriptor. node-pty opens them without FD_CLOEXEC
 * (upstream microsoft/node-pty #657, #867) and Node cannot set it: every process forked while one
 * is open would inherit it, and with it the run's terminal (type into it, read its output). So every
 * spawn procwarden makes asks which are open and keeps them out of the child.
 */
const masters = new Map<number, () => boolean>();

/**
 * Registers a master; `open` turns false, synchronously, before the descriptor is closed (a
 * stream's `destroyed`), so a number closed and given to another file is never taken for it.
 */
export function holdMaster(fd: number, open: () => boolean): () => void {
  masters.set(fd, open);
  return () => {
    if (masters.get(fd) === open) masters.delete(fd);
  };
}

/** The masters open right now, lowest first. */
export function openMasters(): number[] {
  const open: number[] = [];
  for (const [fd, isOpen] of masters) if (isOpen()) open.push(fd);
  return open.sort((a, b) => a - b);
}

type Slot = Exclude<StdioOptions, string>[number];

/**
 * Spawns through node:child_process with every open master replaced by /dev/null in the child.
 * libuv dup2()s each `stdio[n]` onto descriptor n of the child, which closes what the child had
 * there; a slot of 'ignore' above 2 would leave the inherited master alone. The master is never
 * passed on, even when `stdio` (inheritFds) names its number: it is a run's terminal, not the
 * caller's descriptor. Free when no PTY is open; the /dev/null descriptor lives only through the
 * spawn, which returns once the child has exec'd.
 */
export function spawnSealed<T>(stdio: readonly Slot[], spawn: (stdio: Slot[]) => T): T {
  const open = openMasters();
  if (open.length === 0) return spawn([...stdio]);
  const nul = openSync('/dev/null', 'r+');
  try {
    const slots: Slot[] = [...stdio];
    for (const fd of open) {
      while (slots.length <= fd) slots.push('ignore');
      slots[fd] = nul;
    }
    return spawn(slots);
  } finally {
    closeSync(nul);
  }
}
