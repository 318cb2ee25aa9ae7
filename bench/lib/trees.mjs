import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { delay, treeOf } from './procs.mjs';

export const TREE = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tree.sh');

/** argv that builds a tree of exactly `size` processes (see fixtures/tree.sh). */
export const treeArgv = (size, { fan = 8, ignoreTerm = false } = {}) => [
  'sh',
  TREE,
  String(size),
  String(fan),
  ignoreTerm ? 'ignore-term' : 'plain',
];

/** Starts a tree with plain child_process in its own process group (pgid = root pid). */
export function spawnRawTree(size, options) {
  const [file, ...args] = treeArgv(size, options);
  const child = spawn(file, args, { detached: true, stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return { pid: child.pid, exited };
}

/** Waits until `root` has `size` live members, and returns them (pid + start time). */
export async function whenBuilt(root, size, timeoutMs = 60_000) {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const members = treeOf(root);
    if (members.length >= size) return members;
    if (performance.now() > until) {
      throw new Error(`tree under pid ${root} reached ${members.length} of ${size} processes`);
    }
    await delay(5);
  }
}
