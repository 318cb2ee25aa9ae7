import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { terminateTree } from '../src/index.js';
import { defaultSend, isGuardOf } from '../src/kill/index.js';
import { ProcfsTable, PsTable } from '../src/tree/index.js';
import { GUARD_NAME, GUARD_SCRIPT } from '../src/watchdog/script.js';
import { CLI, startCli } from './helpers/cli.js';
import { alive, exists, fixture, killEach, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** Live children of `pid`, from /proc. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === pid && state !== 'Z') out.push(Number(entry));
    } catch {
      // gone
    }
  }
  return out;
}

/** Whether `pid`'s command line is a guard's (its $0 is procwarden-guard). */
const isGuardShaped = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[3] === GUARD_NAME;
  } catch {
    return false;
  }
};

/**
 * Starts test/fixtures/fake-host-guard.mjs with a pipe for stdin (`feed` writes into it: `:` exits
 * at once, `exec sleep 600` holds it), in a session of its own; resolves with its pids once ready.
 */
async function startFakeHost(host: 'dies' | 'slow' | 'stays', forge = 'none', feed = ':') {
  const dir = leaks.trackDir(makeTmp());
  const child = spawn(
    'bash',
    ['-c', `exec "$0" "$@" < <(${feed})`, process.execPath, fixture('fake-host-guard.mjs'), dir, host, forge],
    {
      detached: true,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, PW_GUARD_SCRIPT: GUARD_SCRIPT },
    },
  );
  leaks.track(child.pid);
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  await waitFor(() => out.includes('ready'), { what: 'fake host ready' });
  const pids = readPids(dir);
  const [hostPid, guard, term] = ['host', 'guard', 'child'].map((n) => pids.get(n) ?? 0) as [
    number,
    number,
    number,
  ];
  expect(hostPid).toBe(child.pid);
  // Everything the host started (the guard, the TERM ignorer, what fed its stdin) is tracked.
  for (const pid of childrenOf(hostPid)) leaks.track(pid);
  return { dir, host: hostPid, guard, term };
}

/** terminateTree, with every signal it sends recorded. */
async function endTree(pid: number, graceMs: number) {
  const sent: Array<{ pid: number; signal: string }> = [];
  const report = await terminateTree(pid, {
    graceMs,
    send: (target, signal) => {
      sent.push({ pid: target, signal });
      defaultSend(target, signal);
    },
  });
  return { report, sent };
}

const guardNote = (guard: number, host: number) =>
  `pid ${guard} is procwarden's guard of supervisor ${host}: left to end ${host}'s runs`;

/** The guard ran its (fake) reaper, told its host's pid and start time, and then ended by itself. */
async function expectReapedAndGone(dir: string, guard: number, host: number): Promise<void> {
  await waitFor(() => exists(join(dir, 'reaped')), { what: 'the guard starts its reaper' });
  expect(readFileSync(join(dir, 'reaped'), 'utf8')).toMatch(new RegExp(`^${host} \\d+\n$`));
  await waitFor(() => !alive(guard), { what: 'the guard done' });
}

describe('terminateTree on a procwarden host spares its guard', () => {
  it('a host that dies of SIGTERM: its guard is never signalled, not counted, and named once in the notes', async () => {
    const { dir, host, guard, term } = await startFakeHost('dies');
    const { report, sent } = await endTree(host, 300);
    expect(sent.filter((s) => Math.abs(s.pid) === guard)).toEqual([]);
    expect(report.members.map((m) => m.pid)).not.toContain(guard);
    expect(report.notes.filter((n) => n === guardNote(guard, host))).toHaveLength(1);
    expect(report.members.find((m) => m.pid === host)?.signals.map((s) => s.signal)).toEqual(['SIGTERM']);
    expect(report.members.find((m) => m.pid === term)?.outcome).toBe('killed');
    expect(report.escaped).toBe(0);
    expect(alive(host)).toBe(false);
    expect(alive(term)).toBe(false);
    // It did its job (its host died busy, so it started its reaper), and the report waited for it.
    await expectReapedAndGone(dir, guard, host);
  });

  it('a host that ignores SIGTERM gets the SIGKILL bound beyond the grace; the rest get SIGKILL at its end', async () => {
    const { dir, host, guard, term } = await startFakeHost('stays');
    const { report, sent } = await endTree(host, 300);
    expect(sent.filter((s) => Math.abs(s.pid) === guard)).toEqual([]);
    const kills = (pid: number) =>
      report.members.find((m) => m.pid === pid)?.signals.find((s) => s.signal === 'SIGKILL')?.atMs ?? -1;
    expect(kills(term)).toBeGreaterThanOrEqual(290);
    expect(kills(term)).toBeLessThan(2000);
    expect(kills(host)).toBeGreaterThanOrEqual(kills(term) + 2900);
    expect(report.members.find((m) => m.pid === host)?.outcome).toBe('killed');
    expect(report.escaped).toBe(0);
    expect(alive(host)).toBe(false);
    // SIGKILLed busy: its guard takes over.
    await expectReapedAndGone(dir, guard, host);
  });

  it('includeRoot: false on a live host: its guard is spared and not waited for (its host lives)', async () => {
    const { host, guard, term } = await startFakeHost('stays');
    const sent: Array<{ pid: number; signal: string }> = [];
    const report = await terminateTree(host, {
      graceMs: 300,
      includeRoot: false,
      send: (target, signal) => {
        sent.push({ pid: target, signal });
        defaultSend(target, signal);
      },
    });
    expect(sent.filter((s) => Math.abs(s.pid) === guard || Math.abs(s.pid) === host)).toEqual([]);
    expect(report.escaped).toBe(0);
    expect(report.durationMs).toBeLessThan(4000);
    expect(alive(term)).toBe(false);
    expect(alive(host) && alive(guard)).toBe(true);
    killEach([host]);
    await waitFor(() => !alive(guard), { what: 'the guard done' });
  });

  it('a spared guard that does not end once its host is gone is counted as escaped, never signalled', async () => {
    // Its pipe is held open by a stray process: it never hears that its host died.
    const { dir, host, guard } = await startFakeHost('dies', 'held');
    const holder = await waitFor(() => readPids(dir).get('holder'), { what: 'the stray holder' });
    leaks.track(holder);
    const { report, sent } = await endTree(host, 300);
    expect(sent.filter((s) => Math.abs(s.pid) === guard)).toEqual([]);
    expect(report.escaped).toBe(1);
    expect(report.notes.join('\n')).toMatch(
      new RegExp(`still alive .* pid ${guard}: not signalled, counted as escaped`),
    );
    killEach([guard, holder]);
  }, 20_000);

  it('a host that stops its runs and exits in that time is not SIGKILLed; its guard, told idle, exits by itself', async () => {
    const { host, guard, term } = await startFakeHost('slow');
    const { report, sent } = await endTree(host, 300);
    expect(sent.filter((s) => Math.abs(s.pid) === guard)).toEqual([]);
    expect(report.members.find((m) => m.pid === host)?.signals.map((s) => s.signal)).toEqual(['SIGTERM']);
    expect(report.members.find((m) => m.pid === term)?.outcome).toBe('killed');
    expect(report.durationMs).toBeGreaterThanOrEqual(650);
    expect(report.durationMs).toBeLessThan(3000);
    expect(alive(host)).toBe(false);
    await waitFor(() => !alive(guard), { what: 'the idle guard exits at its host’s end' });
  });

  for (const [forge, feed, what] of [
    ['pid', ':', 'names another pid as its host'],
    ['session', ':', 'is not a session leader'],
    ['stdin', 'exec sleep 600', 'reads a pipe its parent does not hold'],
  ] as const) {
    it(`a guard-shaped member that ${what} is ended like any other`, async () => {
      const { host, guard } = await startFakeHost('dies', forge, feed);
      expect(isGuardShaped(guard)).toBe(true);
      const { report, sent } = await endTree(host, 300);
      // A member like any other: in the report, and signalled unless it was gone by its turn (the
      // `stdin` one hears end-of-file, and exits, once the member that feeds its pipe is ended).
      const row = report.members.find((m) => m.pid === guard);
      expect(row).toBeDefined();
      if (row?.outcome !== 'gone-before-signal') {
        expect(sent.some((s) => Math.abs(s.pid) === guard && s.signal === 'SIGTERM')).toBe(true);
        expect(row?.signals[0]?.signal).toBe('SIGTERM');
      }
      expect(report.notes.join('\n')).not.toMatch(/guard of supervisor/);
      expect(report.escaped).toBe(0);
      await waitFor(() => !alive(guard), { what: 'the forged guard gone' });
    });
  }

  it('a table that cannot show command lines and descriptors (ps) recognises no guard', async () => {
    const { host, guard } = await startFakeHost('dies');
    const procfs = new ProcfsTable();
    const [h, g] = [await procfs.get(host), await procfs.get(guard)];
    if (!h || !g) throw new Error('fake host gone');
    expect(isGuardOf(procfs, g, h)).toBe(true);
    expect(isGuardOf(new PsTable(), g, h)).toBe(false);
    const others = childrenOf(host).filter((pid) => pid !== guard);
    killEach([host, ...others]);
    // Its host died busy: the guard starts its reaper, which ends by itself.
    await waitFor(() => !alive(guard), { what: 'the guard done' });
  });
});

describe('procwarden kill on a `procwarden run` host (dist)', () => {
  it('lets it stop its run: it exits 143, nothing survives, its guard is never signalled', async () => {
    const dir = leaks.trackDir(makeTmp());
    const command = `trap "" TERM; setsid sh -c 'trap "" TERM; echo $$ > "$0/escapee.pid"; exec sleep 600' "$0" & echo $$ > "$0/sh.pid"; sleep 600`;
    const cli = spawn(process.execPath, [CLI, 'run', '--', 'sh', '-c', command, dir], {
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    leaks.track(cli.pid);
    let stderr = '';
    cli.stderr.on('data', (c: Buffer) => (stderr += c));
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      cli.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const pids = await waitFor(
      () => {
        const p = readPids(dir);
        return p.has('escapee') && p.has('sh') ? p : null;
      },
      { what: 'the run started' },
    );
    const host = cli.pid ?? 0;
    // Their command lines do not name the directory: tracked by pid (the sleeps, should this fail).
    for (const pid of [pids.get('sh') ?? 0, pids.get('escapee') ?? 0]) leaks.track(pid);
    for (const pid of childrenOf(pids.get('sh') ?? 0)) leaks.track(pid);
    const guard = await waitFor(() => childrenOf(host).find(isGuardShaped), { what: "the host's guard" });
    leaks.track(guard);
    // Node's stdio 'pipe' is a socket pair: recognised as the guard's all the same.
    expect(readlinkSync(`/proc/${guard}/fd/0`)).toMatch(/^socket:/);

    const kill = startCli(['kill', '--grace', '1s', '--json', String(host)]);
    leaks.track(kill.child.pid);
    const r = await kill.done;
    const status = await exited;
    // 143: it died of the SIGTERM it got (as timeout(1) does), not of a SIGKILL (137).
    expect({ status, stderr, exit143: status.signal === 'SIGTERM' || status.code === 143 }).toMatchObject({
      exit143: true,
    });
    expect(r.status).toBe(0);
    const [outcome] = JSON.parse(r.stdout.toString());
    expect(outcome.report.members.map((m: { pid: number }) => m.pid)).not.toContain(guard);
    expect(outcome.report.notes).toContain(guardNote(guard, host));
    const hostRow = outcome.report.members.find((m: { pid: number }) => m.pid === host);
    expect(hostRow.signals.map((s: { signal: string }) => s.signal)).toEqual(['SIGTERM']);
    expect(outcome.report.escaped).toBe(0);
    for (const pid of [host, pids.get('sh') ?? 0, pids.get('escapee') ?? 0]) expect(alive(pid)).toBe(false);
    // Its host ended its runs and told it so: the guard exits by itself.
    await waitFor(() => !alive(guard), { what: 'the guard exits after its host' });
  });
});
