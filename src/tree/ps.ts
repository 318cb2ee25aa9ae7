import { ProcwardenError } from '../errors.js';
import { type CommandRunner, execRunner } from './runner.js';
import type { ProcessInfo, ProcessTable } from './types.js';

const FIELDS = 'pid=,ppid=,pgid=,lstart=,stat=,comm=';

/**
 * The process table of macOS and the BSDs: one `ps` call per snapshot. Identity is the start time
 * `lstart` prints (to the second), the best those systems offer without native code. ps prints no
 * session id there, so `sid` is -1 for every process. No environment search: ps cannot read
 * another process's environment reliably, so the cookie sweep is a procfs feature.
 */
export class PsTable implements ProcessTable {
  readonly name = 'ps';

  constructor(
    private readonly runner: CommandRunner = execRunner,
    private readonly command = 'ps',
  ) {}

  async list(): Promise<ProcessInfo[]> {
    return parsePs(await this.run(['-A', '-o', FIELDS]));
  }

  async get(pid: number): Promise<ProcessInfo | null> {
    if (!Number.isInteger(pid) || pid <= 0) return null;
    // `ps -p` exits 1 when no such process exists: that is an answer, not a failure.
    const rows = parsePs(await this.run(['-o', FIELDS, '-p', String(pid)], true));
    return rows.find((p) => p.pid === pid) ?? null;
  }

  private async run(args: string[], emptyIsFine = false): Promise<string> {
    const r = await this.runner(this.command, args);
    if (r.code === 0 || (emptyIsFine && r.code === 1 && r.stdout.trim() === '')) return r.stdout;
    const why = r.error ? r.error.message : `exit code ${r.code}: ${r.stderr.trim()}`;
    throw new ProcwardenError(
      'UNSUPPORTED_PLATFORM',
      `the process table could not be read with '${this.command} ${args.join(' ')}' (${why}); procwarden needs a working ps on this platform.`,
    );
  }
}

// pid ppid pgid  Dow Mon DD HH:MM:SS YYYY  stat  comm (the rest of the line; may hold spaces)
const ROW =
  /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\w{3}\s+\w{3}\s+\d{1,2}\s+\d{1,2}:\d{2}:\d{2}\s+\d{4})\s+(\S+)\s+(.*?)\s*$/;

/** Parses the output of `ps -o pid=,ppid=,pgid=,lstart=,stat=,comm=`; lines it cannot read are skipped. */
export function parsePs(text: string): ProcessInfo[] {
  const out: ProcessInfo[] = [];
  for (const line of text.split('\n')) {
    const m = ROW.exec(line);
    if (!m) continue;
    const [, pid, ppid, pgid, lstart, stat, comm] = m as unknown as [string, ...string[]];
    out.push({
      pid: Number(pid),
      ppid: Number(ppid),
      pgid: Number(pgid),
      sid: -1,
      startTime: (lstart ?? '').replace(/\s+/g, ' '),
      state: (stat ?? '?').charAt(0),
      command: comm ?? '',
    });
  }
  return out;
}
