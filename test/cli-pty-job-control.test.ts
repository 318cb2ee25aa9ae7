import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import tty from 'node:tty';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI } from './helpers/cli.js';
import { alive, exists, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

// `procwarden run --pty` stopped and continued from an interactive shell with job control, in a real
// terminal (tmux). The shell is dash (`sh -i`): unlike bash, it leaves the terminal as the stopped
// job left it, so a raw mode that procwarden did not give back shows.

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const hasTmux = spawnSync('tmux', ['-V']).status === 0;

/** A process's state letter: T while stopped. */
function state(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

/** An interactive shell in a 100x30 window of a tmux server of our own (no one else's is touched). */
function shellInTmux(dir: string, shell: string[] = ['sh', '-i']) {
  const socket = `procwarden-job-${process.pid}-${Date.now()}`;
  const tmux = (...args: string[]) => {
    const r = spawnSync('tmux', ['-L', socket, '-f', '/dev/null', ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`tmux ${args[0]}: ${r.stderr}`);
    return r.stdout;
  };
  // ENV unset: no start-up file of the machine's changes the shell.
  tmux('new-session', '-d', '-s', 'pw', '-x', '100', '-y', '30', 'env', 'ENV=', 'PS1=pw$ ', ...shell);
  const tty = tmux('display-message', '-p', '-t', 'pw', '#{pane_tty}').trim();
  const screen = () => tmux('capture-pane', '-p', '-t', 'pw', '-S', '-100');
  const file = (name: string) => join(dir, name);
  return {
    tmux,
    screen,
    type: (...keys: string[]) => tmux('send-keys', '-t', 'pw', ...keys),
    shows: async (text: string) => {
      try {
        await waitFor(() => screen().includes(text), { what: `${JSON.stringify(text)} on screen` });
      } catch (error) {
        // What the screen showed instead is what tells a failure's cause; its last lines first,
        // on the error's own line, since a CI log may keep only the lines near it.
        const lines = screen()
          .split('\n')
          .filter((line) => line.trim() !== '');
        throw new Error(
          `${(error as Error).message}; the screen's last lines: ${JSON.stringify(lines.slice(-6))}; all of it:\n${lines.join('\n')}`,
        );
      }
    },
    /** The terminal's settings as the shell sees them, from a command typed at its prompt. */
    settings: async (name: string) => {
      tmux(
        'send-keys',
        '-t',
        'pw',
        `stty -g > ${file(`${name}.tmp`)}; mv ${file(`${name}.tmp`)} ${file(name)}`,
        'Enter',
      );
      await waitFor(() => exists(file(name)), { what: `the shell to run a command (${name})` });
      return readFileSync(file(name), 'utf8');
    },
    /** Raw as procwarden sets it: no signals from keys (a shell's line editor keeps them). */
    raw: () => /(^|\s)-isig(\s|$)/.test(spawnSync('stty', ['-F', tty, '-a'], { encoding: 'utf8' }).stdout),
    /** The window's size as its terminal holds it ("rows cols"). */
    size: () => spawnSync('stty', ['-F', tty, 'size'], { encoding: 'utf8' }).stdout.trim(),
    close: () => spawnSync('tmux', ['-L', socket, 'kill-server']),
  };
}

/** The shell's terminal settings, then `procwarden run --pty` started at its prompt, once ready. */
async function startRun(
  t: ReturnType<typeof shellInTmux>,
  dir: string,
  { options = [] as string[], background = false } = {},
) {
  const before = await t.settings('stty.before');
  const line = [process.execPath, CLI, 'run', '--pty', ...options, '--', fixture('pty-interactive.sh'), dir];
  t.type(`${line.join(' ')}${background ? ' &' : ''}`, 'Enter');
  await t.shows('ready');
  const cli = readPids(dir).get('cli') as number;
  const main = readPids(dir).get('main') as number;
  leaks.track(cli);
  leaks.track(main);
  return { before, cli, main };
}

describe("Node's terminal streams", () => {
  it('can be asked the window size at once (_refreshSize): what fg relies on before keys typed ahead', () => {
    // Without it procwarden falls back to a SIGWINCH of its own, which libuv handles after the
    // input already waiting: the type-ahead cases below would then fail only now and then.
    const proto = tty.WriteStream.prototype as unknown as { _refreshSize?: unknown };
    expect(typeof proto._refreshSize).toBe('function');
  });
});

describe.skipIf(!hasTmux)('procwarden run --pty stopped and continued from a shell (tmux)', () => {
  for (const [signal, how] of [
    ['SIGTSTP', ': the shell gets its terminal mode back; bg: the shell keeps it; fg'],
    ['SIGTTIN', ': the shell gets its terminal mode back; fg'],
    ['SIGTTOU', ': the shell gets its terminal mode back; fg'],
    ['SIGSTOP', ', which cannot be caught, then fg (SIGCONT)'],
  ] as const) {
    it(`${signal} to procwarden${how}: raw again, the new size; the command went on`, async () => {
      const dir = leaks.trackDir(makeTmp());
      const t = shellInTmux(dir);
      try {
        const { before, cli, main } = await startRun(t, dir);
        expect(t.raw()).toBe(true);

        process.kill(cli, signal);
        await waitFor(() => state(cli) === 'T', { what: 'procwarden stopped' });
        // Changed while procwarden is stopped: its SIGWINCH goes to the shell, not to procwarden.
        t.tmux('resize-window', '-t', 'pw', '-x', '120', '-y', '40');
        // tmux sets a pane's terminal size a moment after the command (it batches resizes): once it
        // holds, only what procwarden asks of the terminal on fg can give it to the command.
        await waitFor(() => t.size() === '40 120', { what: 'the window resized' });
        if (signal === 'SIGSTOP') {
          // Nothing can run on a SIGSTOP: the terminal stays raw (docs/pty.md), so the line is ended
          // with a newline, not the Enter that raw mode leaves a carriage return.
          expect(t.raw()).toBe(true);
        } else {
          expect(await t.settings('stty.stopped')).toBe(before);
          expect(t.raw()).toBe(false);
        }
        // The command is not stopped with procwarden: it is in a session of its own.
        expect(alive(main) && state(main) !== 'T').toBe(true);
        if (signal === 'SIGTSTP') {
          // In the background procwarden leaves the terminal alone (it is stopped by SIGTTIN when
          // it reads what is typed for the shell): the shell's command runs as typed.
          t.type('bg', 'Enter');
          expect(await t.settings('stty.bg')).toBe(before);
        }

        // Nothing of procwarden's runs on a SIGSTOP, so its stdin is never let go: the first keys
        // after fg may be read before its SIGCONT handler runs (and after a SIGSTOP the terminal is
        // raw, so the shell would read keys typed ahead). After the others, keys typed ahead, at
        // once with the fg: the shell reads its line, and the rest waits in the terminal for
        // procwarden. Either way the command gets the new size before the keys.
        t.type('fg', ...(signal === 'SIGSTOP' ? ['C-j'] : ['Enter', 'size', 'Enter']));
        await waitFor(() => state(cli) !== 'T' && t.raw(), { what: 'procwarden running, the terminal raw' });
        if (signal === 'SIGSTOP') t.type('size', 'Enter');
        await t.shows('size=40 120');
        t.type('quit', 'Enter');
        await waitFor(() => !alive(main) && !alive(cli), { what: 'the command and procwarden gone' });
        t.type('echo status=$?', 'Enter');
        await t.shows('status=5');
        expect(await t.settings('stty.after')).toBe(before);
      } finally {
        t.close();
      }
    });
  }

  it("SIGTERM and SIGCONT to a stopped procwarden (bash's `kill %1`): the run ends, 143, the terminal as it was", async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = shellInTmux(dir);
    try {
      const { before, cli, main } = await startRun(t, dir);
      process.kill(cli, 'SIGTSTP');
      await waitFor(() => state(cli) === 'T', { what: 'procwarden stopped' });
      // As a user at the prompt would: once the shell has seen the stop. Continued before the
      // shell's waitpid, the stop is never reported to it, the job ends as a foreground one, and
      // `wait %1` finds no job (a loaded machine did that).
      await t.shows('Stopped');
      process.kill(cli, 'SIGTERM');
      process.kill(cli, 'SIGCONT');
      // Continued in the background, it used to stop again (SIGTTOU) taking the terminal back.
      await waitFor(() => !alive(main) && !alive(cli), { what: 'the command and procwarden gone' });
      t.type('wait %1; echo status=$?', 'Enter');
      await t.shows('status=143');
      expect(await t.settings('stty.after')).toBe(before);
    } finally {
      t.close();
    }
  });
  it('bash: bg, then fg (bash sends no SIGCONT to a running job): procwarden takes the terminal again, every key reaches the command', async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = shellInTmux(dir, ['bash', '--norc', '--noprofile', '-i']);
    try {
      const { cli, main } = await startRun(t, dir);
      process.kill(cli, 'SIGTSTP');
      await t.shows('Stopped');
      t.type('bg', 'Enter');
      await waitFor(() => state(cli) !== 'T', { what: 'procwarden running in the background' });
      t.type('fg', 'Enter');
      await waitFor(() => t.raw(), { what: 'the terminal raw again' });
      t.type('typed after fg', 'Enter');
      await t.shows('line=[typed after fg]');
      t.type('quit', 'Enter');
      await waitFor(() => !alive(main) && !alive(cli), { what: 'the command and procwarden gone' });
    } finally {
      t.close();
    }
  });

  // Started with `&`, procwarden set raw mode from the background at once: SIGTTOU stopped it
  // before its timeout ran or its watchdog started, and a `kill -9 %1` left the command running.
  it('started in the background (`&`): not stopped, the terminal left alone, --timeout ends it (124)', async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = shellInTmux(dir, ['bash', '--norc', '--noprofile', '-i']);
    try {
      const { before, cli, main } = await startRun(t, dir, {
        options: ['--timeout', '1.5'],
        background: true,
      });
      expect(state(cli)).not.toBe('T');
      expect(t.raw()).toBe(false);
      await waitFor(() => !alive(main) && !alive(cli), { what: 'the timeout to end the run' });
      t.type('wait %1; echo status=$?', 'Enter');
      await t.shows('status=124');
      expect(await t.settings('stty.after')).toBe(before);
    } finally {
      t.close();
    }
  });

  it('started in the background (`&`), then fg: procwarden takes the terminal, every key reaches the command', async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = shellInTmux(dir, ['bash', '--norc', '--noprofile', '-i']);
    try {
      const { before, cli, main } = await startRun(t, dir, { background: true });
      // The shell still reads its own lines: what it runs here is typed in its own mode.
      expect(await t.settings('stty.bg')).toBe(before);
      expect(state(cli)).not.toBe('T');
      t.type('fg', 'Enter');
      await waitFor(() => t.raw(), { what: 'the terminal raw' });
      t.type('typed after fg', 'Enter');
      await t.shows('line=[typed after fg]');
      t.type('quit', 'Enter');
      await waitFor(() => !alive(main) && !alive(cli), { what: 'the command and procwarden gone' });
      t.type('echo status=$?', 'Enter');
      await t.shows('status=5');
      expect(await t.settings('stty.after')).toBe(before);
    } finally {
      t.close();
    }
  });

  it('the terminal hangs up while procwarden is stopped: the run ends, no crash (no uncaught error)', async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = shellInTmux(dir);
    try {
      await t.settings('stty.before');
      const err = join(dir, 'stderr');
      t.type(
        `${process.execPath} ${CLI} run --pty -- ${fixture('pty-interactive.sh')} ${dir} 2>${err}`,
        'Enter',
      );
      await t.shows('ready');
      const cli = readPids(dir).get('cli') as number;
      const main = readPids(dir).get('main') as number;
      leaks.track(cli);
      leaks.track(main);
      process.kill(cli, 'SIGTSTP');
      await waitFor(() => state(cli) === 'T', { what: 'procwarden stopped' });
      t.close();
      await waitFor(() => !alive(main) && !alive(cli), { what: 'the command and procwarden gone' });
      const text = readFileSync(err, 'utf8');
      expect(text).not.toMatch(/Error| {4}at /);
    } finally {
      t.close();
    }
  });
});
