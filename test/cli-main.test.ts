import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, runCli, startCli } from './helpers/cli.js';
import { LeakGuard } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const version = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

describe('procwarden (no command)', () => {
  it('--help lists every command; --version prints the package version', async () => {
    for (const flag of ['--help', '-h', 'help']) {
      const r = await runCli([flag]);
      expect(r.status).toBe(0);
      for (const c of ['run', 'timeout', 'kill', 'tree', 'proof'])
        expect(r.stdout.toString()).toMatch(new RegExp(`^  ${c} `, 'm'));
    }
    for (const flag of ['--version', '-V']) {
      const r = await runCli([flag]);
      expect(r.stdout.toString()).toBe(`procwarden ${version}\n`);
    }
  });

  it('every command has --help, on stdout, exit 0', async () => {
    for (const c of ['run', 'timeout', 'kill', 'tree', 'proof']) {
      const r = await runCli([c, '--help']);
      expect(r.status).toBe(0);
      expect(r.stdout.toString()).toMatch(new RegExp(`^Usage: procwarden ${c}`));
      // Fits a standard terminal.
      for (const line of r.stdout.toString().split('\n')) expect(line.length).toBeLessThanOrEqual(100);
    }
  });

  it('no command: the help on stderr, exit 2; an unknown command or option: one line, exit 2', async () => {
    const none = await runCli([]);
    expect(none.status).toBe(2);
    expect(none.stderr).toMatch(/^procwarden - run commands/);
    const unknown = await runCli(['frobnicate']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toBe(
      "procwarden: unknown command 'frobnicate'\nTry 'procwarden --help' for more information.\n",
    );
    // The command table is read by its own keys: what every object inherits names no command.
    for (const name of ['constructor', '__proto__', 'toString']) {
      const inherited = await runCli([name]);
      expect({ status: inherited.status, stderr: inherited.stderr.split('\n')[0] }).toEqual({
        status: 2,
        stderr: `procwarden: unknown command '${name}'`,
      });
    }
    const option = await runCli(['--frob']);
    expect(option.status).toBe(2);
    expect(option.stderr.split('\n')[0]).toBe("procwarden: unrecognized option '--frob'");
  });

  it('help, version and reports into a reader that has gone: exit 0, nothing on stderr (no EPIPE trace)', async () => {
    const commands = ['--version', '--help', 'tree', 'reap --dry-run', 'kill --help', 'proof --help'];
    for (const c of ['run', 'timeout', 'tree', 'reap']) commands.push(`${c} --help`);
    for (const command of commands) {
      const { child, done } = startCli(command.split(' '), {
        env: { PROCWARDEN_STATE_DIR: join(tmpdir(), `pw-epipe-none-${process.pid}`) },
      });
      // Our end of its stdout closes long before Node has started: its write gets EPIPE.
      child.stdout?.destroy();
      const r = await done;
      expect({ command, status: r.status, stderr: r.stderr }).toEqual({ command, status: 0, stderr: '' });
    }
  });

  // Python, not Node, makes the pipe: libuv clears O_NONBLOCK on a child's stdio, Python's
  // subprocess passes the descriptor as it is.
  const python = spawnSync('python3', ['-c', '0']).status === 0;
  it.runIf(python)(
    '--version into a full non-blocking pipe (EAGAIN) still prints it all (needs python3)',
    () => {
      const script = `
import fcntl, os, subprocess, sys, time
r, w = os.pipe()
fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
filled = 0
try:
    while True:
        filled += os.write(w, b"x" * 4096)
except BlockingIOError:
    pass
child = subprocess.Popen(sys.argv[1:], stdout=w)
os.close(w)
time.sleep(0.5)
data = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
sys.stdout.write("%d %s" % (child.wait(), data[filled:].decode()))
`;
      const r = spawnSync('python3', ['-c', script, process.execPath, CLI, '--version'], {
        encoding: 'utf8',
      });
      expect(r.stderr).toBe('');
      expect(r.stdout).toBe(`0 procwarden ${version}\n`);
    },
  );

  it.runIf(existsSync('/dev/full'))(
    'a write that fails (stdout on /dev/full): one line on stderr and the failure status',
    async () => {
      for (const [command, status, prog] of [
        ['--version', 1, 'procwarden'],
        ['tree', 1, 'procwarden tree'],
        ['timeout --help', 125, 'procwarden timeout'],
      ] as const) {
        const full = openSync('/dev/full', 'w');
        const r = spawnSync(process.execPath, [CLI, ...command.split(' ')], {
          stdio: ['ignore', full, 'pipe'],
          encoding: 'utf8',
        });
        closeSync(full);
        expect({ command, status: r.status, stderr: r.stderr }).toEqual({
          command,
          status,
          stderr: `${prog}: write error: ENOSPC: no space left on device, write\n`,
        });
      }
    },
  );
});
