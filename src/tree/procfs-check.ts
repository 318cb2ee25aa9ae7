import { readFileSync, readlinkSync } from 'node:fs';

/**
 * Why the /proc at `root` cannot be trusted to describe this process's PID namespace, or null
 * when it can. Identity read from a foreign /proc names other processes (a PID namespace entered
 * without remounting /proc numbers its processes apart from the /proc it sees), so a run held by
 * it could wait forever on, or signal, a stranger. Each check is one cheap, non-blocking read.
 */
export function procfsProblem(root = '/proc', pid = process.pid): string | null {
  let self: string;
  try {
    self = readlinkSync(`${root}/self`);
  } catch (error) {
    return `${root} is not usable (${(error as NodeJS.ErrnoException).code ?? error})`;
  }
  if (self !== String(pid)) {
    return `${root} describes another PID namespace (${root}/self is ${self}, this process is ${pid})`;
  }
  const hidden = hidepid(root);
  // Root sees through hidepid; anyone else may not see (or read) a member that changed its uid.
  if (hidden && process.getuid?.() !== 0) return `${root} hides other users' processes (${hidden})`;
  return null;
}

/** The hidepid option of the /proc mount at `root`, when it hides anything. */
function hidepid(root: string): string | null {
  let text: string;
  try {
    text = readFileSync(`${root}/self/mountinfo`, 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const [left, right] = line.split(' - ');
    if (left?.split(' ')[4] !== root || !right) continue;
    const option = right
      .split(' ')[2]
      ?.split(',')
      .find((o) => /^hidepid=(1|2|noaccess|invisible)$/.test(o));
    if (option) return option;
  }
  return null;
}
