import { mkdirSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseRecord, type RunRecord, recordFileNames } from './record.js';

export interface JournalEntry {
  file: string;
  record: RunRecord;
}

export interface JournalProblem {
  file: string;
  problem: string;
}

const TMP = '.tmp';

/**
 * A directory of run records (one or two files per run, see recordFileNames). Writes are atomic
 * (write a temporary file, then rename), so a reader never sees half a record. No fsync: a record protects against the supervisor dying, and
 * the processes it names do not survive a machine crash either.
 */
export class Journal {
  private made = false;

  constructor(readonly dir: string) {}

  write(record: RunRecord): void {
    if (!this.made) {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      this.made = true;
    }
    const names = recordFileNames(record.runId);
    const path = join(this.dir, record.pid === null ? names.launch : names.pid);
    writeFileSync(path + TMP, JSON.stringify(record), { mode: 0o600 });
    renameSync(path + TMP, path);
  }

  /** Removes every file of a run's record. */
  remove(runId: string): void {
    const names = recordFileNames(runId);
    removeFile(join(this.dir, names.pid));
    removeFile(join(this.dir, names.launch));
  }

  removeFile(file: string): void {
    removeFile(join(this.dir, file));
  }

  /**
   * Every record file in the directory (a run's files share its runId). Unreadable, corrupt or
   * foreign files are reported and skipped, never fatal. A temporary file left by a writer that
   * died mid-write is returned too when it parses: it names the same run as the others.
   */
  read(): { entries: JournalEntry[]; problems: JournalProblem[] } {
    const entries: JournalEntry[] = [];
    const problems: JournalProblem[] = [];
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') problems.push({ file: this.dir, problem: `cannot list the directory: ${code}` });
      return { entries, problems };
    }
    for (const file of names.sort()) {
      if (!file.endsWith('.json') && !file.endsWith(`.json${TMP}`)) {
        problems.push({ file, problem: 'not a procwarden record (name); left alone' });
        continue;
      }
      let text: string;
      try {
        text = readFileSync(join(this.dir, file), 'utf8');
      } catch (error) {
        problems.push({ file, problem: `unreadable: ${(error as NodeJS.ErrnoException).code ?? error}` });
        continue;
      }
      const parsed = parseRecord(text);
      if (typeof parsed === 'string') problems.push({ file, problem: `${parsed}; left alone` });
      else entries.push({ file, record: parsed });
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
