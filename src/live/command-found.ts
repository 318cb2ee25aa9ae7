import { accessSync, constants, statSync } from 'node:fs';
import { ProcwardenError } from '../errors.js';
import type { NormalSpec } from '../options/index.js';
import { lookUp } from '../spawn/index.js';

/**
 * Refuses a command that cannot start: no executable file where execvp would look for it (the
 * run's PATH and cwd). Checked before a session is made, because at the limit the pool evicts an
 * idle session to make room, and a session that ends at once must not cost one. Where the lookup
 * is not execvp's (Windows, a PATH that is unset or empty, whose defaults differ between the ways
 * a command is started) or cannot be done (the current directory is gone), the spawn decides.
 */
export function checkCommandFound(spec: Pick<NormalSpec, 'argv' | 'cwd' | 'env'>): void {
  if (process.platform === 'win32') return;
  const file = spec.argv[0];
  const bare = !file.includes('/');
  if (bare && !spec.env.PATH) return;
  if (lookUp(file, spec.cwd, spec.env.PATH, executableFile) !== null) return;
  const where = bare ? "in any directory of the run's PATH" : `at ${JSON.stringify(file)}`;
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
