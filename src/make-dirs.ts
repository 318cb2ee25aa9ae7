import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * `mkdir -p`, without Node's recursive mkdir: on a file system that answers ENOENT for a name below
 * a directory that exists (procfs: XDG_STATE_HOME=/proc/self), Node's retries forever (seen on
 * Node 20, 22 and 24), and a bad variable would hang the host. Each missing directory is made once,
 * top down, with `mode`; an existing one is left as it is; the first other failure is thrown.
 */
export function makeDirs(path: string, mode = 0o777): void {
  try {
    mkdirSync(path, { mode });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    const parent = dirname(path);
    if (code !== 'ENOENT' || parent === path) throw error;
    makeDirs(parent, mode);
    // Once: a second ENOENT, under a parent that now exists, is the answer, not a race.
    makeDir(path, mode);
  }
}

/** One mkdir; EEXIST (another process made it first, or it was there) is success. */
export function makeDir(path: string, mode = 0o777): void {
  try {
    mkdirSync(path, { mode });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}
