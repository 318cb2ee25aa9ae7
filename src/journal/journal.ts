import { readdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeDirs } from '../make-dirs.js';
import { CLAIM_FILE } from './claim.js';
import { parseRecord, type RunRecord, recordFileNames } from './record.js';
import { readRecordFile, untrustedDir } from './trust.js';

export interface JournalEntry {
  file: string;
  record: RunRecord;
}

export interface JournalProblem {
  file: string;
  problem: string;
  /**
   * untrusted: the directory or file could have been written by someone else (or is a symlink);
   * unreadable: it could not be listed or read; invalid: not a procwarden record; stale: a
   * temporary file a writer left behind (failed write), which reap removes.
   */
  kind: 'untrusted' | 'unreadable' | 'invalid' | 'stale';
}

const TMP = '.tmp';
/** The temporary files Journal.write makes (`<run id>[.pid|.stop].json.tmp`); others are not ours to remove. */
const OUR_TMP = /^pw[A-Za-z0-9_]*-\d+(\.pid|\.stop)?\.json\.tmp$/;
/** A temporary file this old that does not parse is a failed write, not one in progress. */
const STALE_TMP_MS = 60_000;

/**
 * A directory of run records (one to three files per run, see recordFileNames). Writes are atomic
 * (write a temporary file, then rename), so a reader never sees half a record. No fsync: a record protects against the supervisor dying, and
 * the processes it names do not survive a machine crash either.
 */
export class Journal {
  private made = false;

  constructor(readonly dir: string) {}

  /** Throws when the record cannot be written, or when the directory is one reap would not trust. */
  write(record: RunRecord): void {
    if (!this.made) {
      makeDirs(this.dir, 0o700);
      const problem = untrustedDir(this.dir);
      if (problem) throw new Error(`state directory not trusted: ${problem}`);
      this.made = true;
    }
    const names = recordFileNames(record.runId);
    const path = join(
      this.dir,
      record.stopping ? names.stop : record.pid === null ? names.launch : names.pid,
    );
    try {
      writeFileSync(path + TMP, JSON.stringify(record), { mode: 0o600 });
      renameSync(path + TMP, path);
    } catch (error) {
      // A full file system leaves an empty temporary file behind: it would be listed forever.
      try {
        unlinkSync(path + TMP);
      } catch {
        // never created, or already renamed
      }
      throw error;
    }
  }

  /** Removes every file of a run's record. */
  /** `written`: which of the run's later records its writer may have made (default: any). */
  remove(runId: string, written: { pid?: boolean; stop?: boolean } = {}): void {
    const names = recordFileNames(runId);
    if (written.stop !== false) removeFile(join(this.dir, names.stop));
    if (written.pid !== false) removeFile(join(this.dir, names.pid));
    removeFile(join(this.dir, names.launch));
  }

  removeFile(file: string): void {
    removeFile(join(this.dir, file));
  }

  /**
   * Every record file in the directory (a run's files share its runId). Untrusted, unreadable,
   * corrupt or foreign files are reported and skipped, never fatal; so is the whole directory when
   * it is not trusted. A temporary file left by a writer that died mid-write is returned too when
   * it parses: it names the same run as the others. `only`: the names to read (others are not
   * looked at, nor reported). `writersGone`: whoever writes the files `only` lets through is dead,
   * so a broken temporary file of theirs is a leftover at any age (a host killed mid-write).
   */
  read(
    now = Date.now(),
    only?: (file: string) => boolean,
    writersGone = false,
  ): { entries: JournalEntry[]; problems: JournalProblem[] } {
    const entries: JournalEntry[] = [];
    const problems: JournalProblem[] = [];
    let names: string[];
    try {
      names = readdirSync(this.dir);
      const untrusted = untrustedDir(this.dir);
      if (untrusted) {
        problems.push({
          file: this.dir,
          problem: `${untrusted}; no record in it is used`,
          kind: 'untrusted',
        });
        return { entries, problems };
      }
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT')
        problems.push({
          file: this.dir,
          problem: `cannot list the directory: ${code ?? error}`,
          kind: 'unreadable',
        });
      return { entries, problems };
    }
    for (const file of (only ? names.filter(only) : names).sort()) {
      // A reaper's claim on a run (see ./claim.ts): read by the next reaper, never a record.
      if (CLAIM_FILE.test(file)) continue;
      const tmp = file.endsWith(`.json${TMP}`);
      if (!file.endsWith('.json') && !tmp) {
        problems.push({ file, problem: 'not a procwarden record (name); left alone', kind: 'invalid' });
        continue;
      }
      const read = readRecordFile(join(this.dir, file));
      if ('untrusted' in read) {
        problems.push({ file, problem: `${read.untrusted}; not used`, kind: 'untrusted' });
        continue;
      }
      if ('unreadable' in read) {
        problems.push({ file, problem: read.unreadable, kind: 'unreadable' });
        continue;
      }
      const parsed = parseRecord(read.text);
      if (typeof parsed !== 'string') entries.push({ file, record: parsed });
      else if (tmp && OUR_TMP.test(file) && (writersGone || now - read.mtimeMs > STALE_TMP_MS))
        problems.push({ file, problem: `${parsed}; a failed write's leftover`, kind: 'stale' });
      else problems.push({ file, problem: `${parsed}; left alone`, kind: 'invalid' });
    }
    return { entries, problems };
  }
}

function removeFile(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}
