import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunResult } from '../src/index.js';
import { CLI, startCli } from './helpers/cli.js';
import { alive, LeakGuard, makeTmp } from './helpers/procs.js';

// Issue 46, item 6: a stop signal that reaches `run` or `timeout` while the CLI is still loading
// (over a second on a loaded machine) is passed on to the command once it runs, as GNU timeout,
// which listens from its first millisecond, does; it used to kill procwarden alone, before the
// command was even started. strace delivers the signal at an exact moment: as procwarden opens a
// file of its own that it loads after its entry's first statement and before it listens itself.

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const CHUNKS = join(CLI, '..', '..', 'cjs');

function straceSkipReason(): string | null {
  if (process.platform !== 'linux') return 'strace and ptrace are Linux-only here';
  const probe = spawnSync('strace', ['-qq', '-o', '/dev/null', 'true']);
  if (probe.error) return 'no strace to send a signal at an exact moment of start-up';
  return probe.status === 0 ? null : `strace cannot trace here: ${probe.stderr.toString().trim()}`;
}
const skip = straceSkipReason();

/**
 * The built CLI's chunk `name-HASH.cjs` (rolldown adds an 8-character hash), and no other: for
 * `tree`, a prefix alone may find `tree-kill.cjs` (whichever the directory lists first).
 */
function chunk(name: string): string {
  const file = readdirSync(CHUNKS).find((f) => new RegExp(`^${name}-[\\w-]{8}\\.cjs$`).test(f));
  if (!file) throw new Error(`no ${name} chunk in ${CHUNKS}: is dist built?`);
  return join(CHUNKS, file);
}

/**
 * `procwarden ARGS` under strace, which sends SIGNAL to it (its main thread only, not a child:
 * no -f) as it opens the chunk NAME, and writes what it saw to `log`.
 */
function startAt(name: string, signal: string, log: string, args: string[]) {
  const under = ['strace', '-qq', '-o', log, '-P', chunk(name), '-e', 'trace=openat'];
  const cli = startCli(args, { under: [...under, '-e', `inject=openat:signal=${signal}:when=1`] });
  leaks.track(cli.child.pid);
  return cli;
}

const ownLines = (stderr: string) => stderr.split('\n').filter((l) => l.startsWith('procwarden'));

describe.skipIf(skip !== null)(`a signal while the CLI loads${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('run: a SIGTERM as the run command loads reaches the command, which is started for it', async () => {
    const dir = leaks.trackDir(makeTmp('pw-early-'));
    const json = join(dir, 'result.json');
    const cli = startAt('run', 'SIGTERM', join(dir, 'strace.log'), [
      'run',
      '--json',
      json,
      '--',
      'sh',
      '-c',
      'sleep 30',
    ]);
    const r = await cli.done;
    expect(readFileSync(join(dir, 'strace.log'), 'utf8')).toMatch(
      /SIGTERM \{si_signo=SIGTERM, si_code=SI_KERNEL/,
    );
    // Told and passed on: SIGTERM keeps its 128+N (cli.md), the command got --signal.
    expect({ status: r.status, signal: r.signal }).toEqual({ status: 143, signal: null });
    expect(ownLines(r.stderr)).toEqual([
      expect.stringMatching(
        /^procwarden: got SIGTERM, stopping the command; SIGTERM to \d+ process(es)?; no SIGKILL needed/,
      ),
    ]);
    const result = JSON.parse(readFileSync(json, 'utf8')) as RunResult & { pid?: number };
    expect(result.reason).toBe('cancelled');
    expect(result.tree.signalled).toBeGreaterThan(0);
  });

  it('run: a Ctrl-C as the CLI starts to load (its entry has just run) goes to the command as SIGINT', async () => {
    const dir = leaks.trackDir(makeTmp('pw-early-'));
    const cli = startAt('dispatch', 'SIGINT', join(dir, 'strace.log'), ['run', '--', 'sleep', '30']);
    const r = await cli.done;
    // sleep dies of it, and so do we, as a shell expects of a Ctrl-C'd job.
    expect({ status: r.status, signal: r.signal }).toEqual({ status: null, signal: 'SIGINT' });
    expect(ownLines(r.stderr)).toEqual([
      expect.stringMatching(
        /^procwarden: got SIGINT, stopping the command; SIGINT to 1 process; no SIGKILL needed/,
      ),
    ]);
  });

  it('timeout: a SIGTERM as the timeout command loads is sent on to the command, and timeout dies of it', async () => {
    const dir = leaks.trackDir(makeTmp('pw-early-'));
    const cli = startAt('timeout', 'SIGTERM', join(dir, 'strace.log'), [
      'timeout',
      '-v',
      '30',
      'sleep',
      '30',
    ]);
    const r = await cli.done;
    // -v tells each signal sent, as timeout(1) does for one it received too: before, we died of it
    // first and started nothing.
    expect(r.stderr).toBe("procwarden timeout: sending signal TERM to command 'sleep'\n");
    expect({ status: r.status, signal: r.signal }).toEqual({ status: null, signal: 'SIGTERM' });
  });

  it('a usage error after a signal came: nothing runs, and we die of the signal as we would have', async () => {
    const dir = leaks.trackDir(makeTmp('pw-early-'));
    const cli = startAt('run', 'SIGTERM', join(dir, 'strace.log'), ['run', '--no-such-option', '--', 'true']);
    const r = await cli.done;
    expect({ status: r.status, signal: r.signal }).toEqual({ status: null, signal: 'SIGTERM' });
    expect(r.stderr).toMatch(/unknown option|unrecognized option|--no-such-option/);
  });

  // The spawn refuses a missing --cwd after `run` has taken the signals: they must still end us, as
  // after any usage error. At the run chunk the signal is not yet heard when they are taken (it is
  // heard a turn of the loop later, when nothing listened any more: lost); at dispatch it was.
  for (const at of ['dispatch', 'run']) {
    it(`a --cwd the spawn refuses after a SIGTERM (at the ${at} chunk): nothing runs, and we die of it`, async () => {
      const dir = leaks.trackDir(makeTmp('pw-early-'));
      const missing = join(dir, 'no-such-dir');
      const cli = startAt(at, 'SIGTERM', join(dir, 'strace.log'), ['run', '--cwd', missing, '--', 'true']);
      const r = await cli.done;
      expect(readFileSync(join(dir, 'strace.log'), 'utf8')).toMatch(/si_code=SI_KERNEL/);
      expect({ status: r.status, signal: r.signal }).toEqual({ status: null, signal: 'SIGTERM' });
      expect(r.stderr).toContain('does not exist');
    });
  }

  // `--json FIFO` waits in open(2) for a reader, before `run` listens: a signal must end it there as
  // it did before the entry recorded signals (the loop cannot turn to hear a recorded one: it hung).
  it('run --json to a FIFO no one reads: a SIGTERM while it waits for a reader ends it', async () => {
    const dir = leaks.trackDir(makeTmp('pw-early-'));
    const fifo = join(dir, 'result.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const cli = startCli(['run', '--json', fifo, '--', 'true']);
    const pid = cli.child.pid as number;
    leaks.track(pid);
    const waiting = () => {
      try {
        return readFileSync(`/proc/${pid}/wchan`, 'utf8').includes('partner');
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 200 && !waiting(); i++) await new Promise((r) => setTimeout(r, 50));
    expect(waiting()).toBe(true);
    process.kill(pid, 'SIGTERM');
    const hung = setTimeout(() => cli.child.kill('SIGKILL'), 3000);
    const r = await cli.done;
    clearTimeout(hung);
    expect({ status: r.status, signal: r.signal }).toEqual({ status: null, signal: 'SIGTERM' });
  });

  it('another command keeps the default action: `tree` dies of a SIGTERM at once, recording nothing', async () => {
    const dir = leaks.trackDir(makeTmp('pw-early-'));
    const cli = startAt('tree', 'SIGTERM', join(dir, 'strace.log'), ['tree', String(process.pid)]);
    const r = await cli.done;
    expect({ status: r.status, signal: r.signal, out: r.stdout.length }).toEqual({
      status: null,
      signal: 'SIGTERM',
      out: 0,
    });
    expect(alive(process.pid)).toBe(true);
  });
});
