/**
 * vitest globalSetup: the suite's bash processes never read the user's ~/.bashrc. bash reads it even
 * when not interactive if its stdin is a socket (Node's stdio pipes are socketpairs) and SHLVL says
 * it is the first shell (unset or 0: `npm run` under nohup, a service). On this machine that file
 * runs pyenv's rehash, which takes a lock: dozens of concurrent test shells then waited on it for
 * half a minute, and every test that starts bash failed under `test:stress`. SHLVL 1 makes bash
 * count itself the second shell, which never reads it; a higher level is left as it is.
 */
export default function setup(): void {
  const level = Number.parseInt(process.env.SHLVL ?? '', 10);
  if (!(level >= 1)) process.env.SHLVL = '1';
}
