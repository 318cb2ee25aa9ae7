import { ProcwardenError } from '../errors.js';

/** One row of `Get-CimInstance Win32_Process`, with CreationDate in canonical form. */
export interface CimProcess {
  pid: number;
  ppid: number;
  /** UTC, `YYYY-MM-DDTHH:MM:SS.fffffffZ` (100 ns ticks, Windows' own resolution); '' when unknown. */
  created: string;
  name: string;
}

const FIELDS = 'ProcessId,ParentProcessId,CreationDate,Name';

/**
 * The PowerShell script for the whole table, or for one pid. Output is forced to UTF-8 without a
 * BOM: redirected Windows PowerShell otherwise writes in the OEM code page and mangles non-ASCII
 * names. JSON rather than CSV because CSV dates follow the host's culture and drop sub-seconds.
 */
export function cimScript(pid?: number): string {
  if (pid !== undefined && (!Number.isSafeInteger(pid) || pid < 0)) {
    throw new ProcwardenError('INVALID_PID', `pid ${String(pid)} is not a valid process id.`);
  }
  const filter = pid === undefined ? '' : ` -Filter "ProcessId=${pid}"`;
  return (
    "$ErrorActionPreference='Stop';" +
    '[Console]::OutputEncoding=New-Object System.Text.UTF8Encoding $false;' +
    `Get-CimInstance -ClassName Win32_Process${filter} | Select-Object ${FIELDS} | ConvertTo-Json -Compress`
  );
}

/** `-EncodedCommand` takes base64 of UTF-16LE: no quoting rules of any shell or of PowerShell apply. */
export function encodeCommand(script: string): string {
  return Buffer.from(script, 'utf16le').toString('base64');
}

/**
 * Parses ConvertTo-Json output: an array, a single object (PowerShell unwraps one-element
 * pipelines), or nothing at all (no match). Rows without a usable ProcessId are skipped.
 */
export function parseCimJson(text: string): CimProcess[] {
  const body = text.replace(/^\uFEFF/, '').trim();
  if (body === '') return [];
  let data: unknown;
  try {
    data = JSON.parse(body);
  } catch {
    throw new ProcwardenError(
      'PROCESS_TABLE_UNAVAILABLE',
      `PowerShell did not print the expected JSON process list (starts with ${JSON.stringify(body.slice(0, 60))}); ` +
        'check that Get-CimInstance works in a non-interactive PowerShell on this host.',
    );
  }
  const rows = Array.isArray(data) ? data : [data];
  const out: CimProcess[] = [];
  for (const row of rows) {
    if (typeof row !== 'object' || row === null) continue;
    const pid = toId(field(row, 'ProcessId'));
    if (pid === null) continue;
    const name = field(row, 'Name');
    out.push({
      pid,
      ppid: toId(field(row, 'ParentProcessId')) ?? 0,
      created: canonicalDate(field(row, 'CreationDate')),
      name: typeof name === 'string' ? name : '',
    });
  }
  return out;
}

function field(row: object, name: string): unknown {
  const record = row as Record<string, unknown>;
  if (name in record) return record[name];
  const lower = name.toLowerCase();
  for (const key of Object.keys(record)) if (key.toLowerCase() === lower) return record[key];
  return undefined;
}

function toId(value: unknown): number | null {
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/**
 * CreationDate as the different PowerShells print it, reduced to one canonical UTC form so that
 * identity survives a time-zone or DST change between two reads:
 * - `/Date(1764466633123)/` (Windows PowerShell 5.1; milliseconds, always UTC),
 * - `{ value: '/Date(...)/', DateTime: ... }` (5.1 when the DateTime carries extra properties),
 * - ISO 8601 with up to 7 fraction digits and an offset (PowerShell 7),
 * - DMTF `20261130013713.123456+060` (WMI; local time, offset in minutes).
 * Anything else is kept verbatim: equality still works, ordering is not attempted.
 */
export function canonicalDate(value: unknown): string {
  if (value === null || value === undefined || value === '') return '';
  if (typeof value === 'object') return canonicalDate((value as Record<string, unknown>).value);
  if (typeof value === 'number') return fromMs(value, '');
  if (typeof value !== 'string') return '';
  const text = value.trim();
  const ms = /^\/Date\((-?\d+)(?:[+-]\d{4})?\)\/$/.exec(text);
  if (ms) return fromMs(Number(ms[1]), '');
  const dmtf = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})\.(\d{6})([+-])(\d{3})$/.exec(text);
  if (dmtf) {
    const [, y, mo, d, h, mi, s, micro = '', sign, off] = dmtf;
    const local = Date.UTC(+(y ?? 0), +(mo ?? 1) - 1, +(d ?? 1), +(h ?? 0), +(mi ?? 0), +(s ?? 0));
    const offsetMs = (sign === '-' ? -1 : 1) * Number(off) * 60_000;
    return fromMs(local - offsetMs + Number(micro.slice(0, 3)), micro.slice(3));
  }
  const iso = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,7}))?(Z|[+-]\d{2}:\d{2})?$/.exec(text);
  if (iso) {
    const [, base, fraction = '', zone = 'Z'] = iso;
    const whole = Date.parse(`${base}${zone}`);
    if (Number.isNaN(whole)) return text;
    const digits = fraction.padEnd(7, '0');
    return fromMs(whole + Number(digits.slice(0, 3)), digits.slice(3));
  }
  return text;
}

function fromMs(ms: number, extra: string): string {
  const date = new Date(ms);
  if (!Number.isFinite(ms) || Number.isNaN(date.getTime())) return String(ms);
  return date.toISOString().replace('Z', `${extra.padEnd(4, '0')}Z`);
}

/** Whether a canonical creation date is before `ms` (Unix ms); null when it is not canonical. */
export function createdBefore(created: string, ms: number): boolean | null {
  const order = compareCreated(created, fromMs(ms, ''));
  return order === null ? null : order < 0;
}

/** Compares two canonical creation dates; null when either is unknown or not canonical. */
export function compareCreated(a: string, b: string): number | null {
  const canonical = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{7}Z$/;
  if (!canonical.test(a) || !canonical.test(b)) return null;
  return a < b ? -1 : a > b ? 1 : 0;
}
