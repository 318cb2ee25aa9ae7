import { accessSync, constants, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { ProcwardenError } from '../errors.js';
import type { NormalSpec } from '../options/index.js';

/**
 * Refuses a command that cannot start: no such program where execvp would look for it (the run's
 * PATH and cwd), or not an executable file. Checked before a session is made, because at the
 * limit the pool evicts an idle session to make room, and a session that ends at once must not
 * cost one. Where the lookup is not execvp's (Windows, a PATH that is unset or empty, whose
 * defaults differ between the ways a command is started) the spawn itself decides.
 */
export function checkCommandFound(spec: Pick<NormalSpec, 'argv' | 'cwd' | 'env'>): void {
  if (process.platform === 'win32') return;
  const file = spec.argv[0];
  const cwd = spec.cwd ?? process.cwd();
  let candidates: string[];
  if (file.includes('/')) candidates = [resolve(cwd, file)];
  else {
    const path = spec.env.PATH;
    if (!path) return;
    // An empty entry is the working directory, as for execvp.
    candidates = path.split(':').map((dir) => resolve(cwd, dir, file));
  }
  if (candidates.some(executableFile)) return;
  const where = file.includes('/')
    ? `at ${JSON.stringify(candidates[0])}`
    : "in any directory of the run's PATH";
  throw new ProcwardenError(
    'INVALID_ARGV',
    `argv[0] ${JSON.stringify(file)}: no executable file ${where}; nothing was started and no session evicted. Give the program's path, or a PATH (spec.env) that holds it.`,
  );
}

function executableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
