import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CommandResult, CommandRunner } from '../../src/tree/index.js';
import { FIXTURES } from './procs.js';

export const WINDOWS_FIXTURES = join(FIXTURES, 'windows');
export const recording = (name: string) => readFileSync(join(WINDOWS_FIXTURES, name), 'utf8');
const MESSAGES = JSON.parse(recording('taskkill.json')) as Record<string, string>;

export const TASKKILL = 'C:\\Windows\\System32\\taskkill.exe';
export const POWERSHELL = 'C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe';

/** A row exactly as ConvertTo-Json printed it (kept raw, so odd date formats survive re-rendering). */
type Row = Record<string, unknown> & { ProcessId: number; ParentProcessId: number };

export interface Behaviour {
  /** Has a window: a graceful taskkill (WM_CLOSE) makes it exit. Console processes need /F. */
  closesOnRequest?: boolean;
  /** Another user's or a protected process: taskkill and process.kill are denied. */
  protected?: boolean;
}

export interface Call {
  file: string;
  args: string[];
}

/**
 * A Windows host simulated from a recorded `Get-CimInstance Win32_Process | ConvertTo-Json` output.
 * PowerShell calls get the surviving rows back in Windows PowerShell 5.1's format (an array, a bare
 * object for one row, nothing for none); taskkill calls act on the rows the way taskkill does (/T
 * follows ParentProcessId links as recorded, without any creation-time check: the worst case) and
 * answer with recorded messages and exit codes.
 */
export class FakeWindows {
  readonly calls: Call[] = [];
  readonly sent: { pid: number; signal: string }[] = [];
  readonly rows = new Map<number, Row>();
  readonly behaviour = new Map<number, Behaviour>();
  taskkillMissing = false;
  /** Runs before each call is answered; the index counts every call. */
  beforeCall: ((call: Call, index: number) => void) | undefined;
  /** Runs once a call's answer is made, before it is returned (the host changes in between). */
  afterCall: ((call: Call, index: number) => void) | undefined;
  /** Called for every process that ends. */
  onExit: ((pid: number) => void) | undefined;

  constructor(recordingName: string) {
    for (const row of JSON.parse(recording(recordingName)) as Row[]) this.rows.set(row.ProcessId, row);
  }

  alive(pid: number): boolean {
    return this.rows.has(pid);
  }

  exit(pid: number): void {
    if (this.rows.delete(pid)) this.onExit?.(pid);
  }

  /**
   * Cuts the parent links that name a pid nobody holds (a recorded host always has some: explorer
   * names its dead parent). With one, procwarden never walks /T, since a new member could be given
   * that pid; tests of the /T mechanics cut them first.
   */
  withoutDanglingParents(): this {
    for (const row of this.rows.values()) if (!this.rows.has(row.ParentProcessId)) row.ParentProcessId = 0;
    return this;
  }

  /** Replaces whatever holds `pid` with an unrelated process started now. */
  reuse(pid: number, name: string, ppid: number, createdMs: number): void {
    this.rows.set(pid, {
      ProcessId: pid,
      ParentProcessId: ppid,
      CreationDate: `/Date(${createdMs})/`,
      Name: name,
    });
  }

  taskkillCalls(): string[][] {
    return this.calls.filter((c) => c.file.endsWith('taskkill.exe')).map((c) => c.args);
  }

  readonly runner: CommandRunner = async (file, args) => {
    const call = { file, args: [...args] };
    this.calls.push(call);
    const index = this.calls.length - 1;
    this.beforeCall?.(call, index);
    const answer = file.toLowerCase().endsWith('powershell.exe')
      ? this.powershell(args)
      : file.toLowerCase().endsWith('taskkill.exe')
        ? this.taskkill(file, args)
        : { code: null, stdout: '', stderr: '', error: enoent(file) };
    this.afterCall?.(call, index);
    return answer;
  };

  /** process.kill as Windows does it: any signal terminates; ESRCH / EPERM as Node reports them. */
  readonly send = (pid: number, signal: NodeJS.Signals): void => {
    this.sent.push({ pid, signal });
    if (!this.rows.has(pid)) throw Object.assign(new Error(`kill ESRCH ${pid}`), { code: 'ESRCH' });
    if (this.behaviour.get(pid)?.protected)
      throw Object.assign(new Error(`kill EPERM ${pid}`), { code: 'EPERM' });
    this.exit(pid);
  };

  private powershell(args: readonly string[]): CommandResult {
    const script = Buffer.from(args[args.length - 1] ?? '', 'base64').toString('utf16le');
    const filter = /-Filter "ProcessId=(\d+)"/.exec(script);
    const rows = [...this.rows.values()].filter((r) => !filter || r.ProcessId === Number(filter[1]));
    const json = rows.length === 0 ? '' : JSON.stringify(rows.length === 1 ? rows[0] : rows);
    // Windows PowerShell escapes the slashes of /Date(...)/.
    return {
      code: 0,
      stdout: json === '' ? '' : `${json.replaceAll('/Date(', '\\/Date(').replaceAll(')/', ')\\/')}\r\n`,
      stderr: '',
    };
  }

  private taskkill(file: string, args: readonly string[]): CommandResult {
    if (this.taskkillMissing) return { code: null, stdout: '', stderr: '', error: enoent(file) };
    const pid = Number(args[args.indexOf('/PID') + 1]);
    const tree = args.includes('/T');
    const force = args.includes('/F');
    if (!this.rows.has(pid)) return { code: 128, stdout: '', stderr: `${fill('notFound', pid)}\r\n` };
    const order: { pid: number; parent: number | null }[] = [];
    const seen = new Set<number>();
    const walk = (p: number, parent: number | null) => {
      seen.add(p);
      for (const r of this.rows.values()) {
        if (tree && r.ParentProcessId === p && !seen.has(r.ProcessId)) walk(r.ProcessId, p);
      }
      order.push({ pid: p, parent });
    };
    walk(pid, null);
    const out: string[] = [];
    const err: string[] = [];
    for (const { pid: p, parent } of order) {
      const b = this.behaviour.get(p) ?? {};
      const suffix = parent === null ? '' : 'Child';
      if (b.protected) err.push(fill(`denied${suffix}`, p, parent));
      else if (force) out.push(fill(`forced${suffix}`, p, parent));
      else if (b.closesOnRequest) out.push(fill(`gracefulSent${suffix}`, p, parent));
      else err.push(fill(`needsForce${suffix}`, p, parent));
      if (!b.protected && (force || b.closesOnRequest)) this.exit(p);
    }
    const code = err.length === 0 ? 0 : out.length === 0 ? 1 : 255;
    return { code, stdout: out.map((l) => `${l}\r\n`).join(''), stderr: err.map((l) => `${l}\r\n`).join('') };
  }
}

function fill(message: string, pid: number, parent: number | null = null): string {
  return (MESSAGES[message] ?? '').replaceAll('{pid}', String(pid)).replaceAll('{parent}', String(parent));
}

function enoent(file: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`spawn ${file} ENOENT`), {
    code: 'ENOENT',
    errno: -2,
    syscall: `spawn ${file}`,
  });
}
