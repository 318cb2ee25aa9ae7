import { fstatSync, readdirSync, statSync } from 'node:fs';

/**
 * The descriptors beyond stdio that the command gets, as under timeout(1): a make jobserver's pipe,
 * named in MAKEFLAGS (`--jobserver-auth=R,W`, or `--jobserver-fds=R,W` before make 4.2). Any other
 * descriptor our parent passed cannot be told from Node's own: Node marks every open descriptor
 * close-on-exec at start-up, before any code of ours runs (make 4.4's `fifo:PATH` needs none).
 *
 * The numbers alone prove nothing: make closes them for a recipe line without `+`, and Node's own
 * descriptors (its event loop's, its pipes) then take them. Passed only when both name one pipe
 * that our parent holds too: then they are the ones it passed us.
 */
export function inheritedFds(env: NodeJS.ProcessEnv = process.env): number[] {
  const auth = /--jobserver-(?:auth|fds)=(\d+),(\d+)(?:\s|$)/.exec(env.MAKEFLAGS ?? '');
  if (!auth) return [];
  const fds = [Number(auth[1]), Number(auth[2])];
  if (!fds.every((fd) => fd >= 3 && fd <= 4095)) return [];
  let pipe: { dev: number; ino: number } | undefined;
  for (const fd of fds) {
    try {
      const st = fstatSync(fd);
      if (!st.isFIFO() || (pipe && (st.ino !== pipe.ino || st.dev !== pipe.dev))) return [];
      pipe = { dev: st.dev, ino: st.ino };
    } catch {
      return [];
    }
  }
  return pipe && parentHolds(pipe) ? [...new Set(fds)] : [];
}

/** Whether our parent has this pipe (or FIFO) open: Linux, through /proc; elsewhere, no. */
function parentHolds(pipe: { dev: number; ino: number }): boolean {
  const dir = `/proc/${process.ppid}/fd`;
  try {
    return readdirSync(dir).some((fd) => {
      try {
        const st = statSync(`${dir}/${fd}`);
        return st.ino === pipe.ino && st.dev === pipe.dev;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}
