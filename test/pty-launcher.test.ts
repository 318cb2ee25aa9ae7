import { closeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import type { LaunchPlan } from '../src/containment/index.js';
import { createPtyLauncher } from '../src/spawn/index.js';
import type { PtyForkOptions, PtyModule, PtyProcess, UnixPtyBinding } from '../src/spawn/pty-module.js';
import { ptyPlatform } from '../src/spawn/pty-platform.js';
import type { LaunchEvents, LaunchOptions } from '../src/spawn/types.js';
import { fixture } from './helpers/procs.js';

// The launcher against a fake node-pty: how Windows ConPTY is exercised without a Windows machine,
// and how the platform conventions are pinned down without depending on a real terminal's timing.

interface Fake {
  module: PtyModule;
  spawned: { file: string; args: string[]; options: PtyForkOptions }[];
  writes: string[];
  resizes: [number, number][];
  data(chunk: Buffer | string): void;
  exit(e: { exitCode: number; signal?: number }): void;
}

function fakePty(): Fake {
  let onData: (d: Buffer | string) => void = () => {};
  let onExit: (e: { exitCode: number; signal?: number }) => void = () => {};
  const fake: Fake = {
    spawned: [],
    writes: [],
    resizes: [],
    data: (chunk) => onData(chunk),
    exit: (e) => onExit(e),
    module: {
      spawn(file, args, options) {
        fake.spawned.push({ file, args, options });
        const term: PtyProcess = {
          pid: 4242,
          onData: (l) => {
            onData = l;
            return { dispose() {} };
          },
          onExit: (l) => {
            onExit = l;
            return { dispose() {} };
          },
          write: (d) => fake.writes.push(Buffer.isBuffer(d) ? d.toString('utf8') : d),
          resize: (cols, rows) => fake.resizes.push([cols, rows]),
        };
        return term;
      },
    },
  };
  return fake;
}

function recorder() {
  const log: string[] = [];
  const output: Buffer[] = [];
  const events: LaunchEvents = {
    output: (stream, chunk) => {
      log.push(`output:${stream}`);
      output.push(chunk);
    },
    spawned: () => log.push('spawned'),
    exited: (code, signal) => log.push(`exited:${code}:${signal}`),
    failed: (error) => log.push(`failed:${error.code}`),
  };
  return { log, output, events };
}

const plan = (file: string): LaunchPlan => ({
  file,
  args: ['/c', 'echo hi'],
  cwd: 'C:\\work',
  env: { PATH: 'C:\\Windows', PROCWARDEN_RUN: 'cookie' },
  newSession: true,
});
const options = (stdin: LaunchOptions['stdin'] = { kind: 'pipe' }): LaunchOptions => ({
  stdin,
  pty: { cols: 100, rows: 25, term: 'xterm-256color' },
});

describe('Windows ConPTY path (fake node-pty)', () => {
  const launch = (fake: Fake) => createPtyLauncher({ platform: 'win32', requireModule: () => fake.module });

  it('spawns the plan as given: no Unix exec check, size, TERM, cwd, env with the cookie', () => {
    const fake = fakePty();
    const { log, events } = recorder();
    const launched = launch(fake)(plan('cmd.exe'), options(), events);
    expect(launched.pid).toBe(4242);
    expect(fake.spawned).toEqual([
      {
        file: 'cmd.exe',
        args: ['/c', 'echo hi'],
        options: {
          name: 'xterm-256color',
          cols: 100,
          rows: 25,
          cwd: 'C:\\work',
          env: { PATH: 'C:\\Windows', PROCWARDEN_RUN: 'cookie' },
          encoding: null,
        },
      },
    ]);
    expect(log).toEqual(['spawned']);
  });

  it('text output becomes bytes on the pty stream; the exit code is reported without a signal', async () => {
    const fake = fakePty();
    const { log, output, events } = recorder();
    const launched = launch(fake)(plan('cmd.exe'), options(), events);
    fake.data('héllo\r\n');
    fake.exit({ exitCode: 3 });
    await launched.outputDone;
    expect(Buffer.concat(output).toString('utf8')).toBe('héllo\r\n');
    expect(log).toEqual(['spawned', 'output:pty', 'exited:3:null']);
  });

  it('end() types Ctrl-Z and Enter, after closing an open line', () => {
    const fake = fakePty();
    const { events } = recorder();
    const launched = launch(fake)(plan('cmd.exe'), options(), events);
    launched.stdin?.write('dir');
    launched.stdin?.end();
    launched.stdin?.end();
    expect(fake.writes).toEqual(['dir', '\r\x1a\r']);
    expect(launched.stdin?.write('more')).toBe(false);
  });

  it('resize reaches the terminal until it has exited', () => {
    const fake = fakePty();
    const { events } = recorder();
    const launched = launch(fake)(plan('cmd.exe'), options(), events);
    launched.resize?.(132, 43);
    fake.exit({ exitCode: 0 });
    launched.resize?.(80, 24);
    expect(fake.resizes).toEqual([[132, 43]]);
  });
});

describe('Unix conventions (node-pty binding with a fake fork)', () => {
  // A real terminal pair from the native binding, but no process: the test plays the waitpid thread.
  const realBinding = (): UnixPtyBinding & { open(cols: number, rows: number): OpenedPty } =>
    (
      createRequire(import.meta.url)('@lydell/node-pty/requireBinary.js') as {
        requireBinary(f: string): UnixPtyBinding & { open(cols: number, rows: number): OpenedPty };
      }
    ).requireBinary('pty.node');
  interface OpenedPty {
    master: number;
    slave: number;
    pty: string;
  }
  function fakeFork() {
    const binding = realBinding();
    const forks: { file: string; onExit: (code: number, signal: number) => void; opened: OpenedPty }[] = [];
    const fake: UnixPtyBinding = {
      fork(file, _args, _env, _cwd, cols, rows, _uid, _gid, _utf8, _helper, onExit) {
        const opened = binding.open(cols, rows);
        forks.push({ file, onExit, opened });
        return { fd: opened.master, pid: 4242, pty: opened.pty };
      },
      resize: () => {},
    };
    const requireModule = (id: string) =>
      id.endsWith('requireBinary.js') ? { requireBinary: () => fake } : fakePty().module;
    return { forks, launcher: createPtyLauncher({ platform: 'linux', requireModule }) };
  }

  it('a signal death is reported as the signal, not as the exit code 0 beside it', async () => {
    const { forks, launcher } = fakeFork();
    const { log, events } = recorder();
    const launched = launcher(plan('/bin/sh'), options(), events);
    forks[0]?.onExit(0, 15);
    forks[0]?.onExit(3, 0);
    expect(log).toEqual(['spawned', 'exited:null:SIGTERM', 'exited:3:null']);
    launched.releaseOutput();
    closeSync(forks[0]?.opened.slave ?? -1);
    await launched.outputDone;
  });

  it('a file that cannot be executed is refused before anything is forked', () => {
    const { forks, launcher } = fakeFork();
    const { events } = recorder();
    expect(() => launcher(plan('/no/such/program'), options(), events)).toThrow(
      expect.objectContaining({ code: 'ENOENT' }),
    );
    expect(() =>
      launcher({ ...plan('procwarden-no-such-cmd'), env: { PATH: '/usr/bin:/bin' } }, options(), events),
    ).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(() => launcher(plan(fixture('flood.mjs')), options(), events)).toThrow(
      expect.objectContaining({ code: 'EACCES' }),
    );
    expect(forks).toEqual([]);
  });

  it('end-of-input is one Ctrl-D at the start of a line, two after a partial line', () => {
    const unix = ptyPlatform('linux');
    expect([unix.endOfInput(false), unix.endOfInput(true)]).toEqual(['\x04', '\x04\x04']);
  });
});

describe('loading node-pty', () => {
  it('is lazy and happens once per launcher', () => {
    const fake = fakePty();
    let loads = 0;
    const launcher = createPtyLauncher({
      platform: 'win32',
      requireModule: () => {
        loads++;
        return fake.module;
      },
    });
    expect(loads).toBe(0);
    launcher.preflight?.();
    launcher(plan('cmd.exe'), options(), recorder().events);
    launcher(plan('cmd.exe'), options(), recorder().events);
    expect(loads).toBe(1);
  });

  it('a module without spawn() is PTY_UNAVAILABLE', () => {
    const launcher = createPtyLauncher({ requireModule: () => ({}) });
    expect(() => launcher.preflight?.()).toThrow(expect.objectContaining({ code: 'PTY_UNAVAILABLE' }));
  });
});
