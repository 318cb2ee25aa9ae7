import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, readlinkSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * ssh's StrictModes for the journal: a record can make reap kill processes, so it is only read
 * from a directory and a file nobody else could have written. Where the platform has no owners
 * (Windows), the checks are off.
 */
const uid = (): number | undefined => process.getuid?.();

const octal = (mode: number) => `0${(mode & 0o7777).toString(8)}`;

/** More symbolic links than this on one path is a loop, as the kernel's ELOOP says (40 on Linux). */
const MAX_LINKS = 40;

/**
 * Why records in `dir` must not be trusted, or null when they may be. The path is walked as the
 * kernel resolves it, one name at a time: every directory on the way must be owned by this user
 * or root and writable by nobody else, except a root-owned sticky one such as /tmp above the last
 * (where nobody can rename what they do not own); every symbolic link on the way must be owned by
 * this user or root, and what it points to is walked the same way. Checking only where the path
 * ends up is not enough: a link in a directory someone else may write can be pointed elsewhere
 * after the check. Throws the errno error when a name cannot be examined (ENOENT).
 */
export function untrustedDir(dir: string): string | null {
  const me = uid();
  if (me === undefined) return null;
  const owned = (path: string, st: { uid: number }, what: string) =>
    st.uid !== me && st.uid !== 0
      ? `${path} (${what}) is owned by uid ${st.uid}, neither this user (uid ${me}) nor root`
      : null;
  const loose = (path: string, st: { uid: number; mode: number }, last: boolean) =>
    (st.mode & 0o022) !== 0 && !(!last && st.uid === 0 && (st.mode & 0o1000) !== 0)
      ? `${path} is writable by group or others (mode ${octal(st.mode)})`
      : null;
  const root = lstatSync('/');
  let problem = owned('/', root, 'a directory') ?? loose('/', root, false);
  let at = '/';
  let names = resolve(dir).split('/').filter(Boolean);
  for (let links = 0; problem === null && names.length > 0; ) {
    const [name, ...rest] = names;
    names = rest;
    if (name === '.') continue;
    // The directory above was checked on the way down.
    if (name === '..') {
      at = dirname(at);
      continue;
    }
    const path = at === '/' ? `/${name}` : `${at}/${name}`;
    const st = lstatSync(path);
    if (st.isSymbolicLink()) {
      if (++links > MAX_LINKS) return `${dir}: too many symbolic links`;
      problem = owned(path, st, 'a symbolic link');
      const target = readlinkSync(path);
      if (target.startsWith('/')) at = '/';
      names = [...target.split('/').filter(Boolean), ...names];
      continue;
    }
    problem = owned(path, st, 'a directory') ?? loose(path, st, names.length === 0);
    at = path;
  }
  // Where the walk ended is the directory itself, held to the strict rule: names left after the
  // last directory met (`/tmp/.`, `/tmp/sub/..`) may have brought it back to a sticky one.
  if (problem === null) problem = loose(at, lstatSync(at), true);
  return problem;
}

export type RecordFile = { text: string; mtimeMs: number } | { untrusted: string } | { unreadable: string };

/**
 * Reads one record file without following a symlink, and only when this user owns it and nobody
 * else may write it (checked on the open descriptor, so the file cannot be swapped in between).
 */
/** Far above any record procwarden writes (its command is cut at 200 characters). */
const MAX_RECORD_BYTES = 64 * 1024;

export function readRecordFile(path: string): RecordFile {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') return { untrusted: 'a symbolic link; records are never followed' };
    return { unreadable: `unreadable: ${code ?? error}` };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { untrusted: 'not a regular file' };
    const me = uid();
    if (me !== undefined && st.uid !== me)
      return { untrusted: `owned by uid ${st.uid}, not by this user (uid ${me})` };
    if (me !== undefined && (st.mode & 0o022) !== 0)
      return { untrusted: `writable by group or others (mode ${octal(st.mode)})` };
    // A record is a few hundred bytes; a huge file would cost a crash's recovery its memory and time.
    if (st.size > MAX_RECORD_BYTES)
      return { unreadable: `${st.size} bytes, larger than any record (${MAX_RECORD_BYTES}); not read` };
    return { text: readFileSync(fd, 'utf8'), mtimeMs: st.mtimeMs };
  } catch (error) {
    return { unreadable: `unreadable: ${(error as NodeJS.ErrnoException).code ?? error}` };
  } finally {
    closeSync(fd);
  }
}
