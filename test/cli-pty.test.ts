import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cgroupSkipReason, hostCgroups } from './helpers/cgroups.js';
import { CLI, startCli } from './helpers/cli.js';
import { alive, exists, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';
import { typeSizeUntil } from './helpers/pty.js';

// `procwarden run --pty` end to end: from a real terminal (tmux, when installed) and from a pipe.

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const hasTmux = spawnSync('tmux', ['-V']).status === 0;
const hasPython = spawnSync('python3', ['-c', '']).status === 0;

/**
 * A tmux server of our own (its own socket, so no one else's sessions are touched) running `script`
 * in a 100x30 window (100 x `rows`), through a shell that records the terminal's settings before and after
 * procwarden and procwarden's exit status.
 */
function inTmux(dir: string, cli: string, rows = 30) {
  const socket = `procwarden-test-${process.pid}-${Date.now()}`;
  const tmux = (...args: string[]) => {
    const r = spawnSync('tmux', ['-L', socket, '-f', '/dev/null', ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`tmux ${args[0]}: ${r.stderr}`);
    return r.stdout;
  };
  const script =
    `stty -g > ${dir}/stty.before; ${cli}; echo $? > ${dir}/status.tmp; ` +
    `stty -g > ${dir}/stty.after; mv ${dir}/status.tmp ${dir}/status`;
  tmux('new-session', '-d', '-s', 'pw', '-x', '100', '-y', String(rows), 'sh', '-c', script);
  const screen = () => tmux('capture-pane', '-p', '-t', 'pw', '-S', '-100');
  return {
    socket,
    tmux,
    screen,
    shows: (text: string) =>
      waitFor(() => screen().includes(text), { what: `${JSON.stringify(text)} on screen` }),
    /** After a resize: the window's SIGWINCH reaches the command's terminal through procwarden. */
    answersSize: (text: string) =>
      typeSizeUntil(screen, () => tmux('send-keys', '-t', 'pw', 'size', 'Enter'), text),
    status: async () => {
      await waitFor(() => exists(join(dir, 'status')), { what: "procwarden's exit status" });
      return Number(readFileSync(join(dir, 'status'), 'utf8'));
    },
    sttyRestored: () =>
      readFileSync(join(dir, 'stty.after'), 'utf8') === readFileSync(join(dir, 'stty.before'), 'utf8'),
    close: () => spawnSync('tmux', ['-L', socket, 'kill-server']),
    /** Whether the window's terminal is cooked (canonical, echoing), as a shell wants it. */
    cooked: () => {
      const tty = tmux('display-message', '-p', '-t', 'pw', '#{pane_tty}').trim();
      const modes = spawnSync('stty', ['-F', tty, '-a'], { encoding: 'utf8' }).stdout.split(/\s+/);
      return modes.includes('icanon') && modes.includes('echo');
    },
  };
}

describe.skipIf(!hasTmux)('procwarden run --pty from a terminal (tmux)', () => {
  it('keystrokes pass through, Ctrl-C reaches the command, the size follows, status and tty restored', async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = inTmux(dir, `${process.execPath} ${CLI} run --pty -- ${fixture('pty-interactive.sh')} ${dir}`);
    try {
      await t.shows('ready');
      expect(t.screen()).toContain('size=30 100 tty=yes');
      t.tmux('send-keys', '-t', 'pw', 'hello there', 'Enter');
      await t.shows('line=[hello there]');
      // Raw mode: ^C is a byte for the command's terminal, whose line discipline makes it SIGINT
      // for the command; procwarden itself is not interrupted and the run goes on.
      t.tmux('send-keys', '-t', 'pw', 'C-c');
      await t.shows('got-INT');
      t.tmux('resize-window', '-t', 'pw', '-x', '120', '-y', '40');
      await t.answersSize('size=40 120');
      t.tmux('send-keys', '-t', 'pw', 'quit', 'Enter');
      expect(await t.status()).toBe(5);
      expect(t.sttyRestored()).toBe(true);
    } finally {
      t.close();
    }
  });

  it('a window of 0 x 0 (at the start, then resized to it): the default size, then the last real one', async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = inTmux(
      dir,
      `stty cols 0 rows 0; ${process.execPath} ${CLI} run --pty -- ${fixture('pty-interactive.sh')} ${dir}`,
    );
    try {
      await t.shows('ready');
      expect(t.screen()).toContain('size=30 120 tty=yes'); // the default terminal size
      t.tmux('resize-window', '-t', 'pw', '-x', '90', '-y', '20');
      await t.answersSize('size=20 90');
      // What `stty` on the terminal does from outside: procwarden gets SIGWINCH, and a window of
      // 0 x 0, which no terminal can take (it used to end procwarden with an uncaught error).
      const tty = t.tmux('display-message', '-p', '-t', 'pw', '#{pane_tty}').trim();
      expect(spawnSync('stty', ['-F', tty, 'cols', '0', 'rows', '0']).status).toBe(0);
      const answers = () => t.screen().split('size=20 90').length - 1;
      const before = answers();
      t.tmux('send-keys', '-t', 'pw', 'size', 'Enter');
      // The command's terminal kept the last real size (it says so once more).
      await waitFor(() => answers() > before, { what: 'the size again' });
      t.tmux('send-keys', '-t', 'pw', 'quit', 'Enter');
      expect(await t.status()).toBe(5);
    } finally {
      t.close();
    }
  });

  /**
   * procwarden runs `script` in a window of its own, through a shell that ignores SIGHUP (so that
   * it outlives its terminal and records procwarden's status); then the terminal hangs up: its
   * server (the master's holder) is gone. Stderr goes to DIR/stderr.
   */
  async function hungUp(script: string, pty: boolean) {
    const dir = leaks.trackDir(makeTmp());
    const t = inTmux(
      dir,
      `trap '' HUP; ${process.execPath} ${CLI} run${pty ? ' --pty' : ''} -- ${fixture(script)} ${dir} 2> ${dir}/stderr`,
    );
    let closed = false;
    try {
      await t.shows('ready');
      const cli = readPids(dir).get('cli') as number;
      const main = readPids(dir).get('main') as number;
      leaks.track(cli);
      leaks.track(main);
      const server = Number(t.tmux('display-message', '-p', '#{pid}').trim());
      t.close();
      closed = true;
      await waitFor(() => !alive(server), { what: 'the tmux server gone' });
      return { dir, t, cli, main };
    } finally {
      if (!closed) t.close();
    }
  }

  // Node restores a terminal's settings as it exits, and aborted (status 134) when it had hung up.
  for (const [how, pty, status] of [
    ['SIGHUP to procwarden', false, 129],
    ['SIGHUP to procwarden', true, 129],
    ['no signal to procwarden, the command killed', false, 137],
  ] as const) {
    it(`after the terminal hung up, ${how}${pty ? ' (--pty)' : ''}: status ${status}, no crash`, async () => {
      const { dir, t, cli, main } = await hungUp('pty-interactive.sh', pty);
      if (status === 129) process.kill(cli, 'SIGHUP');
      else process.kill(main, 'SIGKILL');
      expect(await t.status()).toBe(status);
      expect(readFileSync(join(dir, 'stderr'), 'utf8')).not.toContain('Assertion');
      await waitFor(() => !alive(main), { what: 'the command gone' });
    });
  }

  for (const pty of [false, true]) {
    it(`after the terminal hung up, SIGHUP and a command that prints on it${pty ? ' (--pty)' : ''}: its status (0), no write error`, async () => {
      // The line the command printed on its SIGHUP went to a terminal that answers EIO: that used to
      // be "write error: write EIO" and status 125 in place of 129. The command handles the SIGHUP
      // passed on and exits 0: that is the status, as under timeout(1) (issue 46; it was 129).
      const { dir, t, cli } = await hungUp('hup-prints.sh', pty);
      process.kill(cli, 'SIGHUP');
      expect(await t.status()).toBe(0);
      expect(exists(join(dir, 'hup'))).toBe(true);
      const stderr = readFileSync(join(dir, 'stderr'), 'utf8');
      expect(stderr).not.toContain('write error');
      expect(stderr).toMatch(/^procwarden: got SIGHUP, stopping the command/m);
    });
  }

  for (const pty of [false, true]) {
    for (const [how, status] of [
      ['--timeout 2', 124],
      ['SIGTERM to procwarden', 143],
    ] as const) {
      it(`a terminal that stops reading (${pty ? 'tmux stopped' : 'Ctrl-S'}) does not hold procwarden: ${how}${pty ? ' (--pty)' : ''}, status ${status} while it is stopped`, async () => {
        // Node writes to a terminal with a blocking write(2): while the terminal took nothing, the
        // event loop stood still in it. The timeout never fired and SIGTERM was not acted on until
        // Ctrl-Q, with `yes` running all along.
        const dir = leaks.trackDir(makeTmp());
        const command = `echo $$ > ${dir}/main.pid; echo $PPID > ${dir}/cli.pid; exec yes`;
        const timeout = how === '--timeout 2' ? ' --timeout 2' : '';
        const t = inTmux(
          dir,
          `stty ixon; ${process.execPath} ${CLI} run${pty ? ' --pty' : ''}${timeout} -- sh -c '${command}' 2> ${dir}/stderr`,
        );
        let server = 0;
        try {
          const pids = await waitFor(() => (readPids(dir).size === 2 ? readPids(dir) : null), {
            what: 'the pids',
          });
          const cli = pids.get('cli') as number;
          const main = pids.get('main') as number;
          leaks.track(cli);
          leaks.track(main);
          await t.shows('y\ny\n');
          // Raw mode (--pty) makes Ctrl-S a key for the command's terminal: there, the window stops
          // reading as a stalled ssh link does, its tmux server stopped.
          if (pty) server = Number(t.tmux('display-message', '-p', '#{pid}').trim());
          if (server) process.kill(server, 'SIGSTOP');
          else t.tmux('send-keys', '-t', 'pw', 'C-s');
          // Long enough for what the terminal still took to be gone, and `yes` to be held.
          await new Promise((r) => setTimeout(r, 500));
          if (status === 143) process.kill(cli, 'SIGTERM');
          const written = await waitFor(() => exists(join(dir, 'status')), {
            what: "procwarden's exit status, the terminal still stopped",
            timeoutMs: 8000,
          });
          expect(written).toBe(true);
          expect(readFileSync(join(dir, 'status'), 'utf8').trim()).toBe(String(status));
          await waitFor(() => !alive(main), { what: 'yes gone' });
          expect(t.sttyRestored()).toBe(true);
        } finally {
          // Gone with the shell once it has recorded the status; only the old code gets here stopped.
          if (server) process.kill(server, 'SIGCONT');
          else spawnSync('tmux', ['-L', t.socket, 'send-keys', '-t', 'pw', 'C-q']);
          t.close();
        }
      });
    }
  }

  it('--env TERM=dumb from a terminal: the command gets dumb, not our TERM', async () => {
    // Our TERM went to the command's terminal as pty.term, which outranks the run's env.TERM.
    const dir = leaks.trackDir(makeTmp());
    const t = inTmux(
      dir,
      `TERM=xterm-256color ${process.execPath} ${CLI} run --pty --env TERM=dumb -- sh -c '[ -t 0 ] && echo "$TERM" > ${dir}/term'`,
    );
    try {
      expect(await t.status()).toBe(0);
      expect(readFileSync(join(dir, 'term'), 'utf8')).toBe('dumb\n');
    } finally {
      t.close();
    }
  });

  it("keys typed while the command's leftovers end are the shell's: not read, the terminal cooked again", async () => {
    // Once the command had exited, procwarden still read its terminal until the leftovers' grace
    // was over: the first keys typed meanwhile were read and dropped (the rest stayed, unechoed).
    const dir = leaks.trackDir(makeTmp());
    const command = `echo $$ > ${dir}/cmd.pid; trap "" TERM HUP; sleep 30 & exit 0`;
    const t = inTmux(
      dir,
      `${process.execPath} ${CLI} run --pty --grace 4s -- sh -c '${command}'; read -r line; echo "after=[$line]" > ${dir}/after`,
    );
    try {
      const pid = await waitFor(() => readPids(dir).get('cmd'), { what: "the command's pid" });
      leaks.track(pid);
      // Reaped, and the terminal cooked again: procwarden has acted on the exit (it stopped reading
      // then), and its leftover's grace has begun. Keys typed between the reaping and that moment
      // are read by a program that still reads its terminal, as any would.
      await waitFor(() => !existsSync(`/proc/${pid}`), { what: 'the command reaped' });
      // Well before the grace is over (4 s): procwarden kept its terminal raw, and read it, until then.
      await waitFor(() => t.cooked(), { what: 'the terminal cooked again', timeoutMs: 2000 });
      t.tmux('send-keys', '-t', 'pw', 'typed in grace', 'Enter');
      await t.status();
      expect(readFileSync(join(dir, 'after'), 'utf8')).toBe('after=[typed in grace]\n');
      expect(t.sttyRestored()).toBe(true);
    } finally {
      t.close();
    }
  });

  // stdin is the window's terminal, stdout is not: the size is the window's all the same (it was
  // 120 x 30, the default, and no resize reached the command).
  for (const [how, redirect] of [
    ['stdout to a file', '> OUT'],
    ['stdout and stderr to a file', '> OUT 2>&1'],
    ['stdout into a pipe', '2>/dev/null | cat > OUT'],
  ] as const) {
    it(`with ${how}: the command gets the window's size, and follows a resize`, async () => {
      const dir = leaks.trackDir(makeTmp());
      const out = join(dir, 'out');
      writeFileSync(
        join(dir, 'poll.sh'),
        'while :; do s=$(stty size); echo "size=$s"; [ "$s" = "40 120" ] && exit 0; sleep 0.1; done\n',
      );
      const cli = `${process.execPath} ${CLI} run --pty --timeout 60s -- sh ${dir}/poll.sh ${redirect.replace('OUT', out)}`;
      const t = inTmux(dir, cli, 37);
      const said = (text: string) => () => exists(out) && readFileSync(out, 'utf8').includes(text);
      try {
        await waitFor(said('size=37 100'), { what: 'the size 37 100 in the output' });
        t.tmux('resize-window', '-t', 'pw', '-x', '120', '-y', '40');
        expect(await t.status()).toBe(0);
        expect(said('size=40 120')()).toBe(true);
      } finally {
        t.close();
      }
    });
  }

  it('SIGTERM to procwarden: the command is stopped, status 143, the terminal is restored', async () => {
    const dir = leaks.trackDir(makeTmp());
    const t = inTmux(dir, `${process.execPath} ${CLI} run --pty -- ${fixture('pty-interactive.sh')} ${dir}`);
    try {
      await t.shows('ready');
      const cli = readPids(dir).get('cli') as number;
      process.kill(cli, 'SIGTERM');
      expect(await t.status()).toBe(143);
      expect(t.sttyRestored()).toBe(true);
    } finally {
      t.close();
    }
  });
});

describe('procwarden run --pty from a pipe or a file', () => {
  async function run(args: string[], input?: string) {
    const cli = startCli(['run', '--pty', '--', ...args], { input });
    leaks.track(cli.child.pid);
    return cli.done;
  }
  // --timeout: a lost EOT shows as 124, not as a test that hangs.
  async function runTimed(args: string[], input?: string) {
    const cli = startCli(['run', '--pty', '--timeout', '60s', '--', ...args], { input });
    leaks.track(cli.child.pid);
    return cli.done;
  }

  it('piped input is typed into the terminal and ended with EOT: cat echoes it and exits 0', async () => {
    const r = await run(['cat'], 'one\ntwo\n');
    expect(r.status).toBe(0);
    // The terminal echoes what is typed and cat writes it back: each line twice, as on a terminal
    // (in an order that depends on when cat reads).
    expect(r.stdout.toString().split('\r\n').sort()).toEqual(['', 'one', 'one', 'two', 'two']);
  });

  // The input is all typed before the command has set its terminal up; the EOT must still end it.
  it.skipIf(!hasPython)(
    'piped input into a REPL (python3 -q, readline in raw mode): it runs and ends with 0',
    async () => {
      const r = await runTimed(['python3', '-q'], 'print(6*7)\n');
      expect(r.status).toBe(0);
      expect(r.stdout.toString()).toContain('42');
    },
  );

  it('piped input into a command that goes raw, then cooked again, after it started: EOT still ends it', async () => {
    // As a line editor does: the input arrives in canonical mode, is read in raw mode, and the
    // command then waits for the rest in canonical mode.
    const script = 'sleep 0.5; stty -icanon min 1; head -c 5; stty icanon; echo; cat; echo "end $?"';
    const r = await runTimed(['sh', '-c', script], 'hello\nrest\n');
    expect(r.status).toBe(0);
    expect(r.stdout.toString()).toMatch(/hello[\s\S]*rest[\s\S]*end 0/);
  });

  it('piped lines into sh reading them: each is run, and the EOT ends sh with 0', async () => {
    const script = 'while read -r l; do echo "got [$l]"; done; echo done';
    const r = await runTimed(['sh', '-c', script], 'one\ntwo\n');
    expect(r.status).toBe(0);
    expect(r.stdout.toString()).toMatch(/got \[one\][\s\S]*got \[two\][\s\S]*done/);
  });

  // The cgroup shim's shell execs the command: it used to report the missing interpreter itself,
  // on the terminal (`./x: 1: exec: ./x: not found`, 127), where process-group mode says why.
  for (const containment of ['process-group', 'cgroup'] as const) {
    const skip = containment === 'cgroup' ? cgroupSkipReason() : null;
    const title = `--containment ${containment}: a script whose #! interpreter is missing is reported as such, 127`;
    it.skipIf(skip !== null)(skip === null ? title : `${title} (skipped: ${skip})`, async () => {
      const dir = leaks.trackDir(makeTmp());
      const script = join(dir, 'no-interpreter');
      writeFileSync(script, '#!/nonexistent/interpreter\necho ran\n', { mode: 0o755 });
      const cli = startCli(['run', '--pty', '--containment', containment, '--', script]);
      leaks.track(cli.child.pid);
      const r = await cli.done;
      expect(r.status).toBe(127);
      expect(r.stderr).toContain(`${script}: its interpreter (the #! line) was not found.`);
      expect(r.stdout.toString()).toBe('');
      if (containment === 'cgroup') expect(await hostCgroups(r.pid)).toEqual([]);
    });
  }

  it('an empty input (</dev/null) is an immediate EOT; the command sees a terminal', async () => {
    const r = await run(['tty']);
    expect(r.status).toBe(0);
    expect(r.stdout.toString()).toMatch(/^\/dev\/pts\/\d+\r\n$/);
  });

  it("the command's exit status and signal death are procwarden's status, as without --pty", async () => {
    expect((await run(['sh', '-c', 'exit 3'])).status).toBe(3);
    expect((await run(['sh', '-c', 'kill -USR1 $$'])).status).toBe(128 + 10);
  });

  it.skipIf(process.platform !== 'linux')(
    'once the command has exited, its input is no longer read while leftovers end: a flood waits in the pipe',
    async () => {
      // The input is over when the command exits; every write then says false with a 'drain' after
      // it. The CLI resumed on that 'drain' and read its stdin as fast as it came, dropping it,
      // through the leftovers' whole grace (1.3 GB in 1.8 s measured); keys typed at a terminal
      // meanwhile were lost to the shell.
      const cli = spawn(
        process.execPath,
        [
          CLI,
          'run',
          '--pty',
          '--grace',
          '1500ms',
          '--',
          'sh',
          '-c',
          'trap "" TERM HUP; sleep 30 & sleep 0.3; exit 0',
        ],
        { stdio: ['pipe', 'ignore', 'pipe'] },
      );
      leaks.track(cli.pid);
      const exited = new Promise<number | null>((resolve) => cli.once('exit', (code) => resolve(code)));
      const input = cli.stdin as NonNullable<typeof cli.stdin>;
      input.on('error', () => {}); // EPIPE once the CLI has exited
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let taken = 0;
      let over = false;
      const pump = () => {
        while (!over && input.writableLength < 1024 * 1024)
          input.write(chunk, (error) => {
            if (!error) taken += chunk.length;
          });
        if (!over) input.once('drain', pump);
      };
      pump();
      const code = await exited;
      over = true;
      input.destroy();
      expect(code).toBe(0);
      expect(taken).toBeLessThan(16 * 1024 * 1024);
    },
    20_000,
  );

  it.skipIf(process.platform !== 'linux')(
    'a flood on stdin into a command that never reads: memory stays bounded, the run ends cleanly',
    async () => {
      // `yes | procwarden run --pty -- sleep 3`: the input used to be read as fast as `yes` wrote
      // it and queued for a terminal no one reads (750 MB in 4 s, growing). Now procwarden stops
      // reading its stdin while the terminal's queue is full, so `yes` blocks on the pipe instead.
      const yes = spawn('yes', [], { stdio: ['ignore', 'pipe', 'ignore'] });
      leaks.track(yes.pid);
      const cli = spawn(process.execPath, [CLI, 'run', '--pty', '--', 'sleep', '3'], {
        stdio: [yes.stdout, 'ignore', 'pipe'],
      });
      leaks.track(cli.pid);
      let stderr = '';
      cli.stderr?.on('data', (c: Buffer) => {
        stderr += c.toString();
      });
      const exited = new Promise<number | null>((resolve) => cli.once('exit', (code) => resolve(code)));
      let peakKb = 0;
      const sample = setInterval(() => {
        try {
          const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${cli.pid}/status`, 'utf8'));
          peakKb = Math.max(peakKb, Number(hwm?.[1] ?? 0));
        } catch {
          // it has just exited
        }
      }, 100);
      try {
        expect(await exited).toBe(0);
      } finally {
        clearInterval(sample);
        yes.kill();
      }
      await new Promise((resolve) =>
        yes.exitCode === null && yes.signalCode === null ? yes.once('exit', resolve) : resolve(null),
      );
      expect(stderr).toBe('');
      expect(peakKb).toBeGreaterThan(0);
      expect(peakKb).toBeLessThan(150 * 1024);
    },
    20_000,
  );
});
