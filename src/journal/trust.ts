import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * ssh's StrictModes for the journal: a record can make reap kill processes, so it is only read
 * from a directory and a file nobody else could have written. Where the platform has no owners
 * (Windows), the checks are off.
 */
const uid = (): number | undefined => process.getuid?.();

const octal = (mode: number) => `0${(mode & 0o7777).toString(8)}`;

/**
 * Why records in `dir` must not be trusted, or null when they may be. The directory (followed to
 * its real path) must be owned by this user or root and writable by nobody else; so must every
 * directory above it, except a root-owned sticky one such as /tmp, where nobody can rename what
 * they do not own. Throws the errno error when a directory cannot be examined (ENOENT).
 */
export function untrustedDir(dir: string): string | null {
  const me = uid();
  if (me === undefined) return null;
  const real = realpathSync(dir);
  for (let d = real, first = true; ; d = dirname(d), first = false) {
    const st = lstatSync(d);
    if (st.uid !== me && st.uid !== 0)
      return `${d} is owned by uid ${st.uid}, neither this user (uid ${me}) nor root`;
    const looseOk = !first && st.uid === 0 && (st.mode & 0o1000) !== 0;
    if ((st.mode & 0o022) !== 0 && !looseOk)
      return `${d} is writable by group or others (mode ${octal(st.mode)})`;
    if (d === dirname(d)) return null;
  }
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
