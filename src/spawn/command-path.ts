import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';

/** Where a command is looked for when the run has no PATH (execvp's search on glibc, and then some). */
const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

/**
 * Where the exec would find `file`, judged by `accept`: its own path when it has a slash, else the
 * first of PATH's directories (DEFAULT_PATH without one) that has it. null when it is nowhere;
 * 'unknown' when it is not found and only the exec can tell: a relative name against a current
 * directory that was removed (`..` still resolves from there).
 */
export function lookUp(
  file: string,
  cwd: string | undefined,
  path: string | undefined,
  accept: (path: string) => boolean,
): string | null | 'unknown' {
  const dir = cwd ?? currentDir();
  const at = (p: string) => (isAbsolute(p) ? p : dir === null ? null : resolve(dir, p));
  if (file.includes('/')) {
    const full = at(file);
    return full === null ? 'unknown' : accept(full) ? full : null;
  }
  let unknown = false;
  for (const entry of (path ?? DEFAULT_PATH).split(delimiter)) {
    const base = at(entry === '' ? '.' : entry);
    if (base === null) unknown = true;
    else if (accept(join(base, file))) return join(base, file);
  }
  return unknown ? 'unknown' : null;
}

/** process.cwd() throws when the directory we are in was removed; the command may still run there. */
function currentDir(): string | null {
  try {
    return process.cwd();
  } catch {
    return null;
  }
}

/** The kernel reads this much of a file for its #! line (BINPRM_BUF_SIZE, Linux 5.1 and later). */
const SHEBANG_BYTES = 256;

/**
 * Whether `path` starts with a #! line whose interpreter does not exist. A relative interpreter is
 * the exec's own cwd's. A file we cannot read is left for the exec to judge.
 */
export function interpreterMissing(path: string, cwd: string | null): boolean {
  const head = Buffer.alloc(SHEBANG_BYTES);
  let length: number;
  try {
    const fd = openSync(path, 'r');
    try {
      length = readSync(fd, head, 0, SHEBANG_BYTES, 0);
    } finally {
      closeSync(fd);
    }
  } catch {
    return false;
  }
  const line = head.subarray(0, length).toString('latin1');
  if (!line.startsWith('#!')) return false;
  const interpreter =
    line
      .slice(2)
      .replace(/^[ \t]+/, '')
      .split(/[ \t\n\0]/)[0] ?? '';
  // No interpreter named: the exec fails with ENOEXEC, and execvp runs the file with sh.
  if (interpreter === '') return false;
  try {
    const at = isAbsolute(interpreter) ? interpreter : cwd === null ? null : join(cwd, interpreter);
    // A relative one from a removed directory: only the exec can tell.
    if (at === null) return false;
    statSync(at);
    return false;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR';
  }
}
