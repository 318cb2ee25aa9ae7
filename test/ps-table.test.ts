import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ProcwardenError } from '../src/index.js';
import {
  type CommandRunner,
  isGone,
  ProcfsTable,
  PsTable,
  parsePs,
  platformTable,
} from '../src/tree/index.js';
import { fixture } from './helpers/procs.js';

const MACOS = readFileSync(fixture('recorded/ps-macos.txt'), 'utf8');

/** A runner that answers from recorded output and remembers what it was asked. */
function recorded(answer: (args: readonly string[]) => { code: number | null; stdout: string }) {
  const calls: string[][] = [];
  const runner: CommandRunner = async (file, args) => {
    calls.push([file, ...args]);
    return { stderr: '', ...answer(args) };
  };
  return { runner, calls };
}

describe('ps process table (macOS/BSD)', () => {
  it('parses recorded macOS output: paths with spaces, one-digit hours, every state', () => {
    const rows = parsePs(MACOS);
    expect(rows).toHaveLength(10);
    expect(rows[3]).toEqual({
      pid: 4077,
      ppid: 4051,
      pgid: 4051,
      sid: -1,
      startTime: 'Tue Nov 24 19:44:05 2026',
      state: 'S',
      command:
        '/Applications/Google Chrome.app/Contents/Frameworks/Google Chrome Helper (Renderer).app/Contents/MacOS/Google Chrome Helper (Renderer)',
    });
    expect(rows.find((r) => r.pid === 9188)?.startTime).toBe('Mon Nov 30 0:02:07 2026');
    expect(rows.map((r) => r.state).join('')).toBe('SSSSSRSTZU');
    expect(isGone(rows.find((r) => r.pid === 9192))).toBe(true);
    expect(parsePs('garbage\n\n  12 x\n')).toEqual([]);
  });

  it('asks ps once per snapshot, with the documented columns', async () => {
    const { runner, calls } = recorded(() => ({ code: 0, stdout: MACOS }));
    const list = await new PsTable(runner).list();
    expect(list).toHaveLength(10);
    expect(calls).toEqual([['ps', '-A', '-o', 'pid=,ppid=,pgid=,lstart=,stat=,comm=']]);
  });

  it('get(pid) reads one process; ps exiting 1 with nothing printed means "no such process"', async () => {
    const line = MACOS.split('\n').find((l) => l.includes(' 9191 ')) ?? '';
    const { runner, calls } = recorded((args) =>
      args.includes('9191') ? { code: 0, stdout: `${line}\n` } : { code: 1, stdout: '' },
    );
    const table = new PsTable(runner);
    expect(await table.get(9191)).toMatchObject({ pid: 9191, state: 'T', command: 'vim' });
    expect(await table.get(4242)).toBeNull();
    expect(await table.get(-3)).toBeNull();
    expect(calls[0]).toEqual(['ps', '-o', 'pid=,ppid=,pgid=,lstart=,stat=,comm=', '-p', '9191']);
    expect(calls).toHaveLength(2);
  });

  it('a ps that cannot run is a typed error that says what to do', async () => {
    const missing: CommandRunner = async () => ({
      code: null,
      stdout: '',
      stderr: '',
      error: Object.assign(new Error('spawn ps ENOENT'), { code: 'ENOENT' }),
    });
    const error = await new PsTable(missing).list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProcwardenError);
    expect((error as ProcwardenError).code).toBe('UNSUPPORTED_PLATFORM');
    expect((error as Error).message).toContain('needs a working ps');
  });

  it('forced on Linux with the real ps, it agrees with /proc about live processes', async () => {
    const ps = new PsTable();
    const procfs = new ProcfsTable();
    const me = await ps.get(process.pid);
    const truth = procfs.getSync(process.pid);
    expect(me).toMatchObject({ pid: process.pid, ppid: truth?.ppid, pgid: truth?.pgid });
    const list = await ps.list();
    const parent = list.find((p) => p.pid === process.ppid);
    expect(parent?.pid).toBe(process.ppid);
    expect(list.length).toBeGreaterThan(2);
    // Identity is stable between two reads.
    expect((await ps.get(process.pid))?.startTime).toBe(me?.startTime);
  });
});

describe('platformTable', () => {
  it('picks procfs on Linux, ps on macOS and the BSDs, and refuses the rest with a typed error', () => {
    expect(platformTable('linux').name).toBe('procfs');
    expect(platformTable('darwin').name).toBe('ps');
    expect(platformTable('freebsd').name).toBe('ps');
    let error: unknown;
    try {
      platformTable('haiku' as NodeJS.Platform);
    } catch (e) {
      error = e;
    }
    expect((error as ProcwardenError).code).toBe('UNSUPPORTED_PLATFORM');
  });

  it('hands its runner to the ps backend', async () => {
    const { runner, calls } = recorded(() => ({ code: 0, stdout: MACOS }));
    await platformTable('darwin', runner).list();
    expect(calls).toHaveLength(1);
  });
});
