import { ancestorsOf, type ProcessTable } from '../tree/index.js';

/**
 * The given pids less those another one already covers: a thread id of a process given too (its
 * process's), a repeat, or a descendant of another given pid. Each tree is ended in parallel, so a
 * pid covered twice would get the graceful signal twice, and a second SIGTERM makes many programs
 * quit at once, skipping their cleanup. A dropped pid is a member of the tree that covers it, and
 * is in that tree's report. `pids` are those that will be ended: not one refused before any signal
 * (a kernel thread, another user's process), which covers nothing. Where the table cannot be read, nothing is dropped but repeats: each
 * pid's termination says why it cannot go on (no table: the platform's).
 */
export async function distinctRoots(pids: readonly number[], from: ProcessTable | null): Promise<number[]> {
  const unique = [...new Set(pids)];
  if (unique.length < 2 || !from) return unique;
  let snapshot: Awaited<ReturnType<ProcessTable['list']>>;
  try {
    snapshot = await from.list();
  } catch {
    return unique;
  }
  const processOf = (pid: number) => from.processOf?.(pid) ?? pid;
  // By process: the pid itself where it was given, else the first of its threads.
  const byProcess = new Map<number, number>();
  for (const pid of unique) {
    const owner = processOf(pid);
    if (!byProcess.has(owner) || pid === owner) byProcess.set(owner, pid);
  }
  // PID 1, procwarden and its ancestors are refused as roots: they cover nothing.
  const refused = ancestorsOf(snapshot, process.pid);
  const owners = new Set([...byProcess.keys()].filter((pid) => pid !== 1 && !refused.has(pid)));
  return unique.filter((pid) => {
    const owner = processOf(pid);
    if (byProcess.get(owner) !== pid) return false;
    for (const up of ancestorsOf(snapshot, owner)) if (up !== owner && owners.has(up)) return false;
    return true;
  });
}
