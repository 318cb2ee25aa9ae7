import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI } from './helpers/cli.js';
import { alive, LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

// `procwarden run` and `timeout` (no --pty) at the prompt of an interactive bash in a real terminal
// (tmux): the command is in procwarden's job, so the shell's job control reaches both, as it reaches
// GNU timeout and its command (issue 46, item 3).

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const hasTmux = spawnSync('tmux', ['-V']).status === 0;
const onLinux = process.platform === 'linux';

/** A process's stat fields after the command name: state, ppid, pgrp... */
function stat(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** T while stopped. */
const state = (pid: number) => stat(pid)?.[0] ?? 'gone';

/**
 * The live children of `pid` whose command name (comm) is `name` and whose command line includes
 * `text`: procwarden has helpers of its own (its watchdog, a `sh`).
 */
function childrenOf(pid: number, name: string, text = ''): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = stat(Number(entry));
    if (!fields || Number(fields[1]) !== pid || fields[0] === 'Z') continue;
    try {
      const comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      if (comm === name && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text))
        found.push(Number(entry));
    } catch {
      // gone
    }
  }
  return found;
}

/** An interactive bash in a tmux server of our own (no one else's is touched); `dir` in its environment. */
function shellInTmux(dir: string) {
  const socket = `procwarden-jobs-${process.pid}-${Date.now()}`;
  const tmux = (...args: string[]) => {
    const r = spawnSync('tmux', ['-L', socket, '-f', '/dev/null', ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`tmux ${args[0]}: ${r.stderr}`);
    return r.stdout;
  };
  // Every process started from the shell has `dir` in its environment: the leak check finds it.
  tmux(
    'new-session',
    '-d',
    '-s',
    'pw',
    '-x',
    // Wide: the shell's "Stopped" line names the command by its full path (a Node under a cache
    // directory is long), and a wrapped line is not matched.
    '400',
    '-y',
    '40',
    'env',
    `FIXTURE_DIR=${dir}`,
    'ENV=',
    'PS1=pw$ ',
    'bash',
    '--norc',
    '--noprofile',
    '-i',
  );
  const shell = Number(tmux('display-message', '-p', '-t', 'pw', '#{pane_pid}').trim());
  const screen = () => tmux('capture-pane', '-p', '-t', 'pw', '-S', '-200');
  const shows = async (pattern: string | RegExp) => {
    const test = (s: string) => (typeof pattern === 'string' ? s.includes(pattern) : pattern.test(s));
    try {
      await waitFor(() => test(screen()), { what: `${String(pattern)} on screen` });
    } catch (error) {
      const lines = screen()
        .split('\n')
        .filter((line) => line.trim() !== '');
      throw new Error(
        `${(error as Error).message}; the screen's last lines: ${JSON.stringify(lines.slice(-8))}`,
      );
    }
  };
  return {
    shell,
    screen,
    shows,
    type: (...keys: string[]) => tmux('send-keys', '-t', 'pw', ...keys),
    close: () => spawnSync('tmux', ['-L', socket, 'kill-server']),
  };
}

/** procwarden started at the prompt (`line` after `node CLI`), and its command, once both run. */
async function start(t: ReturnType<typeof shellInTmux>, line: string, command: string, text = '') {
  // Typed only at the prompt: keys sent while an interactive bash still starts up (a loaded CI run)
  // were once never run as a command line.
  await t.shows(/^pw\$/m);
  t.type(`${process.execPath} ${CLI} ${line}`, 'Enter');
  // The shell's only child: procwarden, once the fork has exec'ed node.
  let cli: number;
  try {
    cli = await waitFor(() => childrenOf(t.shell, 'node')[0], { what: 'procwarden started' });
  } catch (error) {
    const lines = t
      .screen()
      .split('\n')
      .filter((l) => l.trim() !== '');
    throw new Error(
      `${(error as Error).message}; the screen's last lines: ${JSON.stringify(lines.slice(-8))}`,
    );
  }
  leaks.track(cli);
  const child = await waitFor(() => childrenOf(cli, command, text)[0], { what: `${command} started` });
  leaks.track(child);
  return { cli, child };
}

describe.skipIf(!hasTmux || !onLinux)('job control at a shell prompt, no --pty (tmux, bash)', () => {
  it('Ctrl-Z stops `procwarden timeout 20 cat` and cat together; fg continues both, cat reads again', async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = shellInTmux(dir);
    try {
      const { cli, child } = await start(t, 'timeout 20 cat', 'cat');
      t.type('C-z');
      await t.shows('Stopped');
      await waitFor(() => state(cli) === 'T' && state(child) === 'T', {
        what: 'procwarden and cat both stopped',
      });
      // The shell has its terminal back: what is typed is the shell's.
      t.type('jobs; echo shell-read-this', 'Enter');
      await t.shows(/\[1\]\+ +Stopped +.*timeout 20 cat/);
      await t.shows(/^shell-read-this$/m);
      t.type('fg', 'Enter');
      await waitFor(() => state(cli) !== 'T' && state(child) !== 'T', {
        what: 'procwarden and cat both running again',
      });
      t.type('line-for-cat', 'Enter');
      // Once as the terminal echoes it, once as cat writes it back.
      await waitFor(() => (t.screen().match(/^line-for-cat$/gm) ?? []).length === 2, {
        what: 'cat to echo the line',
      });
      t.type('C-d');
      await waitFor(() => !alive(child) && !alive(cli), { what: 'cat and procwarden gone' });
      t.type('echo status=$?', 'Enter');
      await t.shows('status=0');
    } finally {
      t.close();
    }
  });

  it("`procwarden run -- cat &` does not take the shell's input: cat is stopped reading, procwarden runs; fg, and cat reads", async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = shellInTmux(dir);
    try {
      const { cli, child } = await start(t, 'run -- cat &', 'cat');
      t.type('echo hello-$((6*7))', 'Enter');
      // The shell ran the line: cat would have written it back as typed.
      await t.shows(/^hello-42$/m);
      await waitFor(() => state(child) === 'T', { what: 'cat stopped by its read (SIGTTIN)' });
      expect(state(cli)).not.toBe('T');
      // bash sends no SIGCONT to a job it sees running: procwarden continues cat once in the foreground.
      t.type('fg', 'Enter');
      await waitFor(() => state(child) !== 'T', { what: 'cat running again' });
      t.type('line-for-cat', 'Enter');
      await waitFor(() => (t.screen().match(/^line-for-cat$/gm) ?? []).length === 2, {
        what: 'cat to echo the line',
      });
      t.type('C-d');
      await waitFor(() => !alive(child) && !alive(cli), { what: 'cat and procwarden gone' });
      t.type('echo status=$?', 'Enter');
      await t.shows('status=0');
    } finally {
      t.close();
    }
  });

  it('the time stopped counts, as with GNU timeout: `timeout 8` stopped past its 8 s ends 124 on fg, the command run no more', async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = shellInTmux(dir);
    const ticks = join(dir, 'ticks');
    const count = () => (existsSync(ticks) ? readFileSync(ticks, 'utf8').length : 0);
    try {
      // A command that leaves a mark every 50 ms it runs.
      const loop = `while :; do printf t >> ${ticks}; sleep 0.05; done`;
      // 8 s, not 3: the Ctrl-Z must come before the limit, and on a loaded machine (CI, Node 22)
      // starting node, the command and tmux's screen took longer than 3 s.
      const t0 = Date.now();
      const { cli, child } = await start(t, `timeout 8 sh -c '${loop}'`, 'sh', ticks);
      await waitFor(() => count() > 0, { what: 'the command running' });
      t.type('C-z');
      await t.shows('Stopped');
      await waitFor(() => state(cli) === 'T' && state(child) === 'T', {
        what: 'procwarden and its command both stopped',
      });
      // Stopped until the whole limit has passed since the start.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, t0 + 8500 - Date.now())));
      const before = count();
      t.type('fg; echo status=$?', 'Enter');
      await waitFor(() => !alive(child) && !alive(cli), { what: 'the command and procwarden gone' });
      await t.shows('status=124');
      // The time ran out while stopped: the command is ended as soon as procwarden runs again, not
      // after seconds more of running (20 marks a second on an idle machine; fewer on a loaded one).
      expect(count() - before).toBeLessThan(30);
    } finally {
      t.close();
    }
  });
});
