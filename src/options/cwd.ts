import { accessSync, constants, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** Why a directory cannot be a run's cwd, and the errno its chdir would fail with. */
export interface CwdProblem {
  code: 'CWD_NOT_FOUND' | 'CWD_NOT_ACCESSIBLE';
  errno: string;
  message: string;
}

/**
 * What is wrong with `cwd` as a run's working directory, or null when the run can enter it: it
 * does not exist, it (or a directory on its path) is not a directory, or this process may not
 * search it or a directory above it. The message names the cwd and the part of its path at fault,
 * never the command: it is what a spawn that failed in its chdir is reported with.
 */
export function cwdProblem(cwd: string): CwdProblem | null {
  const shown = JSON.stringify(cwd);
  let isDirectory: boolean;
  try {
    isDirectory = statSync(cwd).isDirectory();
  } catch (error) {
    const errno = (error as NodeJS.ErrnoException).code ?? 'EINVAL';
    switch (errno) {
      case 'ENOENT':
        return {
          code: 'CWD_NOT_FOUND',
          errno,
          message: `cwd ${shown} does not exist; create it or give a directory that does.`,
        };
      case 'ENOTDIR': {
        const file = firstAbove(cwd, (dir) => !directory(dir));
        const which = file === undefined ? '' : ` (${JSON.stringify(file)} on its path is a file)`;
        return {
          code: 'CWD_NOT_FOUND',
          errno,
          message: `cwd ${shown} is not a directory${which}; give a directory.`,
        };
      }
      case 'EACCES': {
        const closed = firstAbove(cwd, (dir) => !searchable(dir));
        const where = closed === undefined ? 'a directory above it' : JSON.stringify(closed);
        return {
          code: 'CWD_NOT_ACCESSIBLE',
          errno,
          message: `cwd ${shown}: permission denied: ${who()} may not search ${where}; give a directory this user can enter, or change its permissions.`,
        };
      }
      default: {
        const why = (error as Error).message.replace(/^\w+: /, '').replace(/, stat .*$/, '');
        return { code: 'CWD_NOT_ACCESSIBLE', errno, message: `cwd ${shown} cannot be entered: ${why}.` };
      }
    }
  }
  if (!isDirectory)
    return {
      code: 'CWD_NOT_FOUND',
      errno: 'ENOTDIR',
      message: `cwd ${shown} is not a directory (it is a file); give a directory, such as the one it is in.`,
    };
  if (!searchable(cwd))
    return {
      code: 'CWD_NOT_ACCESSIBLE',
      errno: 'EACCES',
      message: `cwd ${shown}: permission denied: ${who()} may not enter it (no search permission); give a directory this user can enter, or change its permissions.`,
    };
  return null;
}

/** The first directory from the root down to `path` (itself included) for which `fails` holds. */
function firstAbove(path: string, fails: (dir: string) => boolean): string | undefined {
  const chain: string[] = [];
  for (let dir = resolve(path); ; dir = dirname(dir)) {
    chain.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  return chain.find(fails);
}

function directory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    // Not this one: what is missing or closed further up is what firstAbove reports.
    return true;
  }
}

function searchable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function who(): string {
  const uid = process.getuid?.();
  return uid === undefined ? 'this user' : `this process (uid ${uid})`;
}
