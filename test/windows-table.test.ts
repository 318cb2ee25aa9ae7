import { describe, expect, it } from 'vitest';
import { ProcwardenError } from '../src/errors.js';
import { Taskkill } from '../src/kill/index.js';
import { execRunner, platformTable, WindowsTable } from '../src/tree/index.js';
import { canonicalDate, cimScript, parseCimJson } from '../src/tree/windows-cim.js';
import { systemRoot } from '../src/tree/windows-system.js';
import { POWERSHELL, recording } from './helpers/fake-windows.js';

/** A runner that answers every call with one recorded output and remembers what it was asked. */
function replay(stdout: string, code: number | null = 0) {
  const calls: { file: string; args: string[] }[] = [];
  const table = new WindowsTable({
    env: {},
    runner: async (file, args) => {
      calls.push({ file, args: [...args] });
      return { code, stdout, stderr: code === 0 ? '' : 'Get-CimInstance : Access denied\r\n' };
    },
  });
  return { table, calls };
}

const decode = (args: string[]) => Buffer.from(args[args.length - 1] ?? '', 'base64').toString('utf16le');

describe('Windows process table from recorded PowerShell output', () => {
  it('runs one Get-CimInstance call by absolute path, arguments as an array, script base64-encoded', async () => {
    const { table, calls } = replay(recording('three-level.json'));
    await table.list();
    expect(calls).toHaveLength(1);
    expect(calls[0]?.file).toBe(POWERSHELL);
    expect(calls[0]?.args.slice(0, 4)).toEqual([
      '-NoProfile',
      '-NonInteractive',
      '-NoLogo',
      '-EncodedCommand',
    ]);
    expect(decode(calls[0]?.args ?? [])).toBe(
      "$ErrorActionPreference='Stop';[Console]::OutputEncoding=New-Object System.Text.UTF8Encoding $false;" +
        'Get-CimInstance -ClassName Win32_Process | Select-Object ProcessId,ParentProcessId,CreationDate,Name | ConvertTo-Json -Compress',
    );
  });

  it('get(pid) uses a filtered query and validates the pid before it reaches a script', async () => {
    const { table, calls } = replay(recording('single-object.json'));
    const info = await table.get(41000);
    expect(decode(calls[0]?.args ?? [])).toContain(
      'Get-CimInstance -ClassName Win32_Process -Filter "ProcessId=41000" |',
    );
    expect(info).toEqual({
      pid: 41000,
      ppid: 3000,
      pgid: 0,
      sid: 0,
      startTime: '2026-11-30T01:37:13.1230000Z',
      state: '?',
      command: 'cmd.exe',
    });
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 60]) expect(await table.get(bad)).toBeNull();
    expect(calls).toHaveLength(1);
    expect(() => cimScript(-4)).toThrow(ProcwardenError);
  });

  it('keeps odd names whole: spaces, unicode, commas, quotes, backslashes', async () => {
    const { table } = replay(recording('odd-names.json'));
    const names = (await table.list()).map((p) => p.command);
    expect(names).toEqual([
      'My App (x86).exe',
      'naïve 工具 ✓.exe',
      `a,b;c "quoted" 'x'.exe`,
      '  spaces  around  .exe',
      'emoji 🚀\\back\\slash.exe',
    ]);
  });

  it('accepts a single object (not an array), a BOM, and empty output', async () => {
    expect(parseCimJson(recording('single-object.json')).map((r) => r.pid)).toEqual([41000]);
    expect(parseCimJson(recording('empty.txt'))).toEqual([]);
    expect(parseCimJson(recording('blank-lines.txt'))).toEqual([]);
    expect(await replay('').table.get(41000)).toBeNull();
  });

  it('skips unusable rows and reads the quirks of Windows PowerShell 5.1', () => {
    const rows = parseCimJson(recording('ps51-quirks.json'));
    expect(rows).toEqual([
      { pid: 41000, ppid: 3000, created: '2026-11-30T01:37:13.1230000Z', name: 'cmd.exe' },
      // A /Date offset is informational: the number is already UTC.
      { pid: 42000, ppid: 41000, created: '2026-11-30T01:37:13.4560000Z', name: 'child.exe' },
    ]);
  });

  it('puts every CreationDate format on one UTC scale, with sub-millisecond digits where given', () => {
    const [pwsh, child] = parseCimJson(recording('ps7-iso.json'));
    expect(pwsh?.created).toBe('2026-11-30T01:37:13.1234567Z');
    expect(child?.created).toBe('2026-11-30T01:37:13.5000000Z');
    const [cmd, west] = parseCimJson(recording('dmtf.json'));
    expect(cmd?.created).toBe('2026-11-30T01:37:13.1234560Z');
    expect(west?.created).toBe('2026-11-30T01:37:13.1234560Z');
    expect(canonicalDate('/Date(1796002633123)/')).toBe('2026-11-30T01:37:13.1230000Z');
    expect(canonicalDate(null)).toBe('');
    expect(canonicalDate('some day')).toBe('some day');
  });

  it('says clearly when PowerShell fails or prints something else', async () => {
    await expect(replay('', 1).table.list()).rejects.toMatchObject({ code: 'PROCESS_TABLE_UNAVAILABLE' });
    await expect(replay('WARNING: something\r\n').table.list()).rejects.toThrow(/expected JSON/);
    const missing = new WindowsTable({
      env: {},
      runner: async () => ({
        code: null,
        stdout: '',
        stderr: '',
        error: Object.assign(new Error('x'), { code: 'ENOENT' }),
      }),
    });
    await expect(missing.list()).rejects.toThrow(/ENOENT/);
  });

  it('cuts a parent link that points to a process created after the child (a reused pid)', async () => {
    const { table } = replay(recording('stale-parent.json'));
    const snap = await table.snapshot();
    const updater = snap.processes.find((p) => p.pid === 51000);
    const worker = snap.processes.find((p) => p.pid === 43000);
    expect(updater?.ppid).toBe(0); // its recorded parent 41000 is younger than itself
    expect(worker?.ppid).toBe(41000);
    expect([...snap.staleParents]).toEqual([41000]);
  });

  it('finds taskkill and PowerShell under %SystemRoot%, never through PATH or an odd value', () => {
    expect(systemRoot({ SystemRoot: 'D:\\WINNT\\' })).toBe('D:\\WINNT');
    expect(new WindowsTable({ env: { SystemRoot: 'D:\\WINNT' } }).powershell).toBe(
      'D:\\WINNT\\System32\\WindowsPowerShell\\v1.0\\powershell.exe',
    );
    for (const odd of ['Windows', '\\\\server\\share', 'C:\\Win"dows', '', '/usr/bin']) {
      expect(systemRoot({ SystemRoot: odd })).toBe('C:\\Windows');
    }
    expect(systemRoot({})).toBe('C:\\Windows');
  });

  it('through the real runner on this Linux host: PowerShell and taskkill are absent, and both say so', async () => {
    await expect(new WindowsTable({ env: {} }).list()).rejects.toMatchObject({
      code: 'PROCESS_TABLE_UNAVAILABLE',
      message: expect.stringContaining('(ENOENT)'),
    });
    const result = await new Taskkill(execRunner, {}).run({ pid: 8, tree: true, force: true });
    expect(result.outcome).toBe('unavailable');
    expect(result.note).toBe(
      'taskkill /PID 8 /T /F: C:\\Windows\\System32\\taskkill.exe could not be run (ENOENT)',
    );
  });

  it('is not the table of this (Linux) host', () => {
    expect(platformTable()).not.toBeInstanceOf(WindowsTable);
  });
});
