import { ProcwardenError } from '../errors.js';
import { type CommandRunner, execRunner } from './runner.js';
import type { ProcessInfo, ProcessTable } from './types.js';
import { type CimProcess, cimScript, compareCreated, encodeCommand, parseCimJson } from './windows-cim.js';
import { systemExecutable } from './windows-system.js';

export interface WindowsTableOptions {
  /** Runs PowerShell (and, for the kill path, taskkill). Tests inject recorded outputs here. */
  runner?: CommandRunner;
  /** Where %SystemRoot% is read from. */
  env?: NodeJS.ProcessEnv;
}

/** One enumeration, with the parent links that could not be trusted. */
export interface WindowsSnapshot {
  processes: ProcessInfo[];
  /**
   * Pids that an older process still names as its parent. Windows never re-parents: such a link
   * points at a dead process whose pid was reused, so anything that walks parent links from these
   * pids (taskkill /T) could reach a process that is not in the tree.
   */
  staleParents: Set<number>;
  /** The cut links, child pid → the pid it names: the parent it had may be a member that died. */
  cutLinks: Map<number, number>;
  /**
   * Whether some process names as its parent a pid that nobody holds (its parent died, and Windows
   * never re-parents). Windows may hand that pid to a process born after this snapshot, a member
   * of the tree among them: taskkill /T from above it would then walk on into the old orphan's tree.
   */
  danglingParents: boolean;
}

/**
 * The Windows process table, from one `Get-CimInstance Win32_Process` call through PowerShell.
 * Identity is (ProcessId, CreationDate). Windows has no process groups or sessions in the POSIX
 * sense, so pgid and sid are 0, and no run state is reported ('?').
 *
 * In `list()`, a parent link is cut (ppid 0) when the named parent was created after the child:
 * the real parent exited and its pid now belongs to someone else. Everything that computes
 * descendants from the list therefore never adopts an unrelated process. `get()` reads one row
 * with a filtered query and cannot check its link; use it for identity only.
 */
export class WindowsTable implements ProcessTable {
  readonly name = 'win32-cim';
  readonly runner: CommandRunner;
  readonly env: NodeJS.ProcessEnv;
  readonly powershell: string;

  constructor(options: WindowsTableOptions = {}) {
    this.runner = options.runner ?? execRunner;
    this.env = options.env ?? process.env;
    this.powershell = systemExecutable(this.env, 'System32', 'WindowsPowerShell', 'v1.0', 'powershell.exe');
  }

  async list(): Promise<ProcessInfo[]> {
    return (await this.snapshot()).processes;
  }

  async snapshot(): Promise<WindowsSnapshot> {
    const rows = await this.query();
    const byPid = new Map(rows.map((r) => [r.pid, r]));
    const staleParents = new Set<number>();
    const cutLinks = new Map<number, number>();
    // Pid 0 (the idle process) is its own parent, and System's; it is never handed out.
    const danglingParents = rows.some((row) => row.ppid !== 0 && !byPid.has(row.ppid));
    const processes = rows.map((row) => {
      const parent = byPid.get(row.ppid);
      const stale =
        parent !== undefined && row.pid !== 0 && (compareCreated(parent.created, row.created) ?? 0) > 0;
      if (stale) {
        staleParents.add(row.ppid);
        cutLinks.set(row.pid, row.ppid);
      }
      return toInfo(row, stale ? 0 : row.ppid);
    });
    return { processes, staleParents, cutLinks, danglingParents };
  }

  async get(pid: number): Promise<ProcessInfo | null> {
    if (!Number.isSafeInteger(pid) || pid < 0) return null;
    const row = (await this.query(pid)).find((r) => r.pid === pid);
    return row ? toInfo(row, row.ppid) : null;
  }

  private async query(pid?: number): Promise<CimProcess[]> {
    const args = [
      '-NoProfile',
      '-NonInteractive',
      '-NoLogo',
      '-EncodedCommand',
      encodeCommand(cimScript(pid)),
    ];
    const result = await this.runner(this.powershell, args);
    if (result.code !== 0) {
      const why = result.error
        ? `${result.error.code ?? result.error.message}`
        : `exit ${result.code}: ${firstLine(result.stderr)}`;
      throw new ProcwardenError(
        'PROCESS_TABLE_UNAVAILABLE',
        `could not list processes through ${this.powershell} (${why}); procwarden needs Windows PowerShell ` +
          'with Get-CimInstance to see a process tree on Windows.',
      );
    }
    return parseCimJson(result.stdout);
  }
}

export function isWindowsTable(table: ProcessTable): table is WindowsTable {
  return table instanceof WindowsTable;
}

function toInfo(row: CimProcess, ppid: number): ProcessInfo {
  return { pid: row.pid, ppid, pgid: 0, sid: 0, startTime: row.created, state: '?', command: row.name };
}

function firstLine(text: string): string {
  return text.trim().split(/\r?\n/)[0]?.slice(0, 200) ?? '';
}
