import { fstatSync } from 'node:fs';

/**
 * The descriptors beyond stdio that the command gets, as under timeout(1): a make jobserver's pipe,
 * named in MAKEFLAGS (`--jobserver-auth=R,W`, or `--jobserver-fds=R,W` before make 4.2). Any other
 * descriptor our parent passed cannot be told from Node's own: Node marks every open descriptor
 * close-on-exec at start-up, before any code of ours runs (make 4.4's `fifo:PATH` needs none).
 */
export function inheritedFds(env: NodeJS.ProcessEnv = process.env): number[] {
  const auth = /--jobserver-(?:auth|fds)=(\d+),(\d+)(?:\s|$)/.exec(env.MAKEFLAGS ?? '');
  if (!auth) return [];
  return [Number(auth[1]), Number(auth[2])].filter((fd) => {
    if (!(fd >= 3 && fd <= 4095)) return false;
    try {
      fstatSync(fd);
      return true;
    } catch {
      // make closed it for this command (not a `+` recipe line): nothing to pass
      return false;
    }
  });
}
