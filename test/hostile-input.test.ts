// Values no careful caller passes, from callers that are not careful: callbacks and abort reasons
// that cannot be turned into text, arrays with holes, options of the wrong shape. Each one gets a
// note or a ProcwardenError with its code; none crashes the host, hangs a result or half-installs
// anything.
import { execFile } from 'node:child_process';
import { chmodSync, closeSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import {
  LiveSessionPool,
  parseDuration,
  type RunStdin,
  reap,
  Supervisor,
  terminateTree,
} from '../src/index.js';
import treeKill from '../src/tree-kill.js';
import { LeakGuard, makeTmp } from './helpers/procs.js';

const exec = promisify(execFile);
const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

/** Neither String() nor a template literal can describe it: both throw a TypeError. */
const opaque = () => Object.create(null) as object;
const within = <T>(p: Promise<T>, ms = 10_000) =>
  Promise.race([
    p,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms)),
  ]);

describe('callbacks that throw or reject what cannot be described', () => {
  it('onData throwing a Symbol is a note', async () => {
    const result = await within(
      sup.spawn({
        argv: ['echo', 'x'],
        output: {
          onData: () => {
            throw Symbol('bad');
          },
        },
      }).result,
    );
    expect(result.reason).toBe('exit');
    expect(result.notes).toEqual(['output.onData threw: Symbol(bad)']);
  });

  it('onData rejecting with a Symbol: the result still settles, with a note', async () => {
    const result = await within(
      sup.spawn({ argv: ['echo', 'x'], output: { onData: () => Promise.reject(Symbol('bad')) } }).result,
    );
    expect(result.reason).toBe('exit');
    expect(result.notes).toEqual(['output.onData rejected: Symbol(bad)']);
  });

  it('onBytes throwing an object without a prototype is a note', async () => {
    const result = await within(
      sup.spawn({
        argv: ['echo', 'x'],
        output: {
          onBytes: () => {
            throw opaque();
          },
        },
      }).result,
    );
    expect(result.notes).toEqual(['output.onBytes threw: [object Object]']);
  });

  it("a live session's 'line' listener throwing one loses no line and is an error event", async () => {
    const pool = new LiveSessionPool({ supervisor: sup, env: {} });
    const session = await pool.acquire('k', { argv: ['cat'] });
    leaks.track(session.pid);
    const codes: string[] = [];
    session.on('error', (e) => codes.push(e.code));
    const lines: string[] = [];
    session.on('line', (line) => {
      if (line === 'two') throw opaque();
    });
    session.on('line', (line) => lines.push(line));
    const third = new Promise<void>((resolve) => session.on('line', (l) => l === 'three' && resolve()));
    session.write('one\ntwo\nthree\n');
    await within(third);
    expect(lines).toEqual(['one', 'two', 'three']);
    expect(codes).toEqual(['LISTENER_THREW']);
    await pool.shutdown();
  });
});

describe('an abort reason that cannot be described', () => {
  it('aborting a running run with it stops the run; the detail says what it can', async () => {
    const ac = new AbortController();
    const handle = sup.spawn({ argv: ['sleep', '30'], signal: ac.signal });
    leaks.track(handle.pid);
    setTimeout(() => ac.abort(opaque()), 50);
    const result = await within(handle.result);
    expect(result.reason).toBe('aborted');
    expect(result.detail).toBe('[object Object]');
  });

  it('a signal already aborted with it: spawn does not throw, the run never starts, shutdown resolves', async () => {
    const own = new Supervisor();
    const ac = new AbortController();
    ac.abort(opaque());
    const handle = own.spawn({ argv: ['sleep', '30'], signal: ac.signal });
    const result = await within(handle.result);
    expect(result.reason).toBe('aborted');
    expect(handle.pid).toBeUndefined();
    await within(own.shutdown());
  });
});

describe('options checked before anything is done', () => {
  it('argv with holes, or claiming a billion elements, is INVALID_ARGV', () => {
    // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
    expect(() => sup.spawn({ argv: ['echo', , 'x'] as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGV' }),
    );
    // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
    expect(() => sup.spawn({ argv: [, 'x'] as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGV' }),
    );
    const huge = Object.assign(['true'], { length: 1e9 });
    const t0 = performance.now();
    expect(() => sup.spawn({ argv: huge as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGV' }),
    );
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  it("argv is read by index, not through the array's own iterator", async () => {
    const argv = ['echo', 'elements'];
    Object.defineProperty(argv, Symbol.iterator, {
      value: function* () {
        yield 'sh';
        yield '-c';
        yield 'echo iterated';
      },
    });
    expect((await sup.spawn({ argv: argv as never }).result).stdout.text).toBe('elements\n');
  });

  it('a message shows a huge value by its start, at once', () => {
    const handle = sup.spawn({ argv: ['cat'], stdin: 'pipe' });
    leaks.track(handle.pid);
    const t0 = performance.now();
    let message = '';
    try {
      handle.stdin?.write(new Int16Array(20_000_000) as never);
    } catch (error) {
      message = (error as Error).message;
    }
    handle.stdin?.end();
    expect(message).toMatch(/^stdin\.write takes a string or a Uint8Array, not Int16Array/);
    expect(message.length).toBeLessThan(300);
    expect(performance.now() - t0).toBeLessThan(1000);
    return handle.result;
  });

  it('argv is read once: what was checked is what runs', async () => {
    let reads = 0;
    const argv = ['echo', 'checked'];
    Object.defineProperty(argv, 1, {
      get: () => (++reads === 1 ? 'checked' : 'changed'),
      enumerable: true,
    });
    const result = await sup.spawn({ argv: argv as never }).result;
    expect(result.stdout.text).toBe('checked\n');
  });

  it('pty.term must be a terminal name', () => {
    for (const term of [{}, 'a\0b', '', 7]) {
      expect(() => sup.spawn({ argv: ['true'], mode: 'pty', pty: { term: term as never } })).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      );
    }
  });

  it("a supervisor's defaults are checked when it is made", () => {
    expect(() => new Supervisor({ defaults: { foo: 1 } as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
    expect(() => new Supervisor({ defaults: { graceMs: -1 } })).toThrow(
      expect.objectContaining({ code: 'INVALID_DURATION' }),
    );
    expect(() => new Supervisor({ defaults: { killSignal: 'SIGNOPE' as never } })).toThrow(
      expect.objectContaining({ code: 'INVALID_SIGNAL' }),
    );
  });

  it("an on/off option is true or false: shell: 'false' runs no shell, it is refused (review)", () => {
    const bad: Record<string, unknown>[] = [
      { shell: 'false' },
      { extendEnv: 'no' },
      { cookie: null },
      { replaceScope: 'yes' },
      { output: { inherit: 'yes' } },
    ];
    for (const extra of bad) {
      expect(() => sup.spawn({ argv: ['true'], ...extra } as never), JSON.stringify(extra)).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      );
    }
  });

  it('Supervisor options: an object, known names, switches true or false (review)', () => {
    for (const options of [null, 'x', { maxExitd: 5 }, { watchdog: 'no' }, { journal: 0 }]) {
      expect(() => new Supervisor(options as never), JSON.stringify(options)).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      );
    }
    expect(() => sup.list(null as never)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
    const handle = sup.spawn({ argv: ['true'] });
    expect(() => sup.read(handle.id, null as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
    return handle.result;
  });

  it('parseDuration of what is not text is INVALID_DURATION, not a TypeError (review)', () => {
    for (const value of [5, null, undefined, {}]) {
      expect(() => parseDuration(value as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_DURATION' }),
      );
    }
  });

  it('a signal name that is no signal, or a BigInt, is INVALID_SIGNAL, not a TypeError', () => {
    for (const killSignal of [10n, opaque(), 'SIGFOO']) {
      expect(() => sup.spawn({ argv: ['true'], killSignal: killSignal as never })).toThrow(
        expect.objectContaining({ code: 'INVALID_SIGNAL' }),
      );
    }
    expect(() => sup.spawn({ argv: ['true'], graceMs: opaque() as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_DURATION' }),
    );
  });

  it('shutdown({ graceMs }) refuses NaN and negatives before stopping anything', async () => {
    const own = new Supervisor();
    const handle = own.spawn({ argv: ['sleep', '30'] });
    leaks.track(handle.pid);
    for (const graceMs of [Number.NaN, -1, 'abc']) {
      expect(() => own.shutdown({ graceMs: graceMs as never })).toThrow(
        expect.objectContaining({ code: 'INVALID_DURATION' }),
      );
    }
    expect(() => own.shutdown(null as never)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
    expect(handle.state).not.toBe('exited');
    const closing = own.shutdown({ graceMs: 2000 });
    // Called again, it is the same promise, whatever it is given.
    expect(own.shutdown({ graceMs: Number.NaN })).toBe(closing);
    const [result] = await closing;
    expect(result?.reason).toBe('shutdown');
    expect(result?.escalated).toBe(false);
  });
});

describe('the state directory, reap and pids', () => {
  it('an empty or non-string stateDir is INVALID_OPTION; a relative one is made absolute at once', async () => {
    for (const stateDir of ['', 42, 'a\0b']) {
      expect(() => new Supervisor({ stateDir: stateDir as never })).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      );
      await expect(reap({ stateDir: stateDir as never })).rejects.toMatchObject({ code: 'INVALID_OPTION' });
    }
    const dir = makeTmp();
    const report = await reap({ stateDir: join(dir, 'x', '..', 'state'), dryRun: true });
    expect(report.stateDir).toBe(resolve(dir, 'state'));
  });

  it('reap checks its grace and dryRun before reading any record', async () => {
    const stateDir = makeTmp();
    for (const graceMs of [-1, Number.NaN, '5s']) {
      await expect(reap({ stateDir, graceMs: graceMs as never })).rejects.toMatchObject({
        code: 'INVALID_DURATION',
      });
    }
    await expect(reap({ stateDir, dryRun: 'yes' as never })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
    await expect(reap(null as never)).rejects.toMatchObject({ code: 'INVALID_OPTION' });
  });

  it('terminateTree refuses a pid no platform can have, and one JavaScript has rounded', async () => {
    for (const pid of [2 ** 32, 2 ** 53 + 1, 0, -1, 1.5, Number.NaN]) {
      await expect(terminateTree(pid)).rejects.toMatchObject({ code: 'INVALID_PID' });
    }
  });

  it('terminateTree refuses an option it does not know (grace for graceMs) before anything (review)', async () => {
    await expect(terminateTree(process.pid + 1_000_000, { grace: 1 } as never)).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
  });

  it('tree-kill: a number whose text is no integer (1e21, 1e-7) is INVALID_PID, not "pid 1" (review)', async () => {
    for (const pid of [1e21, 1e-7]) {
      const error = await new Promise<Error | undefined>((resolve) => treeKill(pid, resolve));
      expect(error).toMatchObject({ code: 'INVALID_PID' });
    }
  });
});

describe('installSignalHandlers', () => {
  it('a bad call throws its code and leaves the process able to install good ones', () => {
    const own = new Supervisor();
    const bad: [unknown, string][] = [
      [{ signals: ['SIGKILL'] }, 'INVALID_SIGNAL'],
      [{ signals: ['SIGSTOP'] }, 'INVALID_SIGNAL'],
      [{ signals: ['SIGFOO'] }, 'INVALID_SIGNAL'],
      // A real-time signal is a run's killSignal on Linux, but Node cannot listen to one.
      [{ signals: ['SIGRTMIN+1'] }, 'INVALID_SIGNAL'],
      [{ signals: 'SIGINT' }, 'INVALID_SIGNAL'],
      // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
      [{ signals: [, 'SIGINT'] }, 'INVALID_SIGNAL'],
      [{ graceMs: -5 }, 'INVALID_DURATION'],
      [{ exit: 'no' }, 'INVALID_OPTION'],
      [null, 'INVALID_OPTION'],
    ];
    const before = process.listenerCount('SIGINT');
    for (const [options, code] of bad) {
      expect(() => own.installSignalHandlers(options as never)).toThrow(expect.objectContaining({ code }));
    }
    expect(process.listenerCount('SIGINT')).toBe(before);
    const options = { signals: ['INT', 'SIGINT'] as NodeJS.Signals[], graceMs: 100 };
    const remove = own.installSignalHandlers(options);
    // Read once: what the caller changes afterwards is not what a signal would use.
    options.graceMs = Number.NaN;
    options.signals.push('SIGKILL');
    expect(process.listenerCount('SIGINT')).toBe(before + 1);
    remove();
    expect(process.listenerCount('SIGINT')).toBe(before);
  });
});

describe('handles', () => {
  it('cancel(reason, null) and cancel(an Error) work; the detail is text', async () => {
    const a = sup.spawn({ argv: ['sleep', '30'] });
    const b = sup.spawn({ argv: ['sleep', '30'] });
    leaks.track(a.pid);
    leaks.track(b.pid);
    a.cancel('x', null as never);
    b.cancel(new Error('why') as never);
    expect((await a.result).detail).toBe('x');
    expect((await b.result).detail).toBe('why');
  });

  it('the options of cancel, shutdown and list are checked: a misspelt or mistyped one is INVALID_OPTION, not ignored', async () => {
    const handle = sup.spawn({ argv: ['sleep', '30'] });
    leaks.track(handle.pid);
    const invalid = expect.objectContaining({ code: 'INVALID_OPTION' });
    expect(() => handle.cancel('r', 'SIGINT' as never)).toThrow(invalid);
    expect(() => handle.cancel('r', { sginal: 'SIGINT' } as never)).toThrow(invalid);
    expect(['starting', 'running']).toContain(handle.state);
    const own = new Supervisor();
    expect(() => own.shutdown({ graceMS: 10 } as never)).toThrow(invalid);
    expect(() => own.shutdown(5 as never)).toThrow(invalid);
    expect(() => own.list({ scope: 5 } as never)).toThrow(invalid);
    expect(() => own.list({ scop: 'x' } as never)).toThrow(invalid);
    expect(own.list({ scope: 'x', state: 'running' })).toEqual([]);
    await own.shutdown();
    handle.cancel('r', { signal: 'SIGINT' });
    expect((await handle.result).reason).toBe('cancelled');
  });

  it('stdin.write of a number is INVALID_OPTION', async () => {
    const handle = sup.spawn({ argv: ['cat'], stdin: 'pipe' });
    leaks.track(handle.pid);
    const stdin = handle.stdin as RunStdin;
    expect(() => stdin.write(123 as never)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
    stdin.write('ok\n');
    stdin.end();
    expect((await handle.result).stdout.text).toBe('ok\n');
  });

  it('a replaceScope run aborted before it was asked for replaces nothing', async () => {
    const own = new Supervisor();
    const first = own.spawn({ argv: ['sleep', '30'], scope: 's' });
    leaks.track(first.pid);
    const ac = new AbortController();
    ac.abort('never mind');
    const second = own.spawn({ argv: ['true'], scope: 's', replaceScope: true, signal: ac.signal });
    expect((await second.result).reason).toBe('aborted');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(own.get(first.id)?.reason).toBeNull();
    expect(first.state).not.toBe('exited');
    await own.shutdown();
  });
});

describe('a current directory that was removed', () => {
  it('the command still runs there (as under a plain spawn), and no journal record stays behind', async () => {
    const dir = makeTmp();
    const state = join(dir, 'state');
    const library = join(import.meta.dirname, '..', 'dist', 'index.js');
    const script = `import(${JSON.stringify(library)}).then(async (m) => {
      const r = await m.run({ argv: ['sh', '-c', 'exit 7'] }).result;
      const s = await m.run({ argv: ['./nowhere'] }).result;
      console.log(JSON.stringify([r.reason, r.exitCode, s.error?.code ?? s.exitCode]));
    })`;
    const { stdout } = await exec(
      'sh',
      ['-c', 'mkdir gone && cd gone && rmdir ../gone && exec "$0" -e "$1"', process.execPath, script],
      {
        cwd: dir,
        env: { ...process.env, PROCWARDEN_STATE_DIR: state },
      },
    );
    const [reason, code, missing] = JSON.parse(stdout);
    expect([reason, code]).toEqual(['exit', 7]);
    // Not found: a spawn error, or (through the cgroup's shim, which cannot tell a relative name
    // from a removed directory in advance) the shell's 127.
    expect(['ENOENT', 127]).toContain(missing);
    expect(readdirSync(state)).toEqual([]);
  });

  it('an absolute script whose #! interpreter is missing is still named so from there (review)', async () => {
    const dir = makeTmp();
    const bad = join(dir, 'pw-bad-interpreter');
    writeFileSync(bad, '#!/nonexistent/interpreter\n');
    chmodSync(bad, 0o755);
    const library = join(import.meta.dirname, '..', 'dist', 'index.js');
    const script = `import(${JSON.stringify(library)}).then(async (m) => {
      const r = await m.run({ argv: [${JSON.stringify(bad)}], containment: 'process-group' }).result;
      console.log(JSON.stringify(r.error?.message));
    })`;
    const { stdout } = await exec(
      'sh',
      ['-c', 'mkdir gone && cd gone && rmdir ../gone && exec "$0" -e "$1"', process.execPath, script],
      { cwd: dir, env: { ...process.env, PROCWARDEN_STATE_DIR: join(dir, 'state') } },
    );
    expect(JSON.parse(stdout)).toBe(`${bad}: its interpreter (the #! line) was not found.`);
  });
});

describe('the capture', () => {
  it("the truncation marker counts the bytes of a character cut at the head's end", async () => {
    // 7 × 'é' (2 bytes each) = 14 bytes; 3 kept at the head, 2 at the tail: the head's last byte
    // starts an 'é' it cannot finish, so the text shows 1 + 1 characters, 4 bytes in all.
    const result = await sup.spawn({
      argv: ['printf', 'ééééééé'],
      output: { maxBytes: 5 },
    }).result;
    expect(result.stdout.truncated).toBe(true);
    expect(result.stdout.text).toBe('é\n[… 10 bytes truncated …]\né');
  });
});

describe('live sessions', () => {
  it('at capacity, a spec whose file cannot be opened, or that inherits output, evicts nothing', async () => {
    const pool = new LiveSessionPool({ supervisor: sup, env: {}, maxSessions: 1 });
    const a = await pool.acquire('a', { argv: ['cat'] });
    leaks.track(a.pid);
    const dir = makeTmp();
    for (const output of [{ file: `${dir}/missing/x.log` }, { file: dir }, { inherit: true }, 'x.log']) {
      await expect(pool.acquire('b', { argv: ['cat'], output: output as never })).rejects.toMatchObject({
        code: 'INVALID_OPTION',
      });
      expect(a.state).toBe('open');
    }
    await pool.shutdown();
  });
});

describe('LiveSessionPool options', () => {
  it('a supervisor, clock or env that is not one is INVALID_OPTION when the pool is made', () => {
    for (const options of [{ supervisor: {} }, { clock: 5 }, { clock: {} }, { env: 'str' }]) {
      expect(() => new LiveSessionPool(options as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      );
    }
  });
});

describe('inheritFds', () => {
  it('passes descriptors of ours to the command under the same numbers', async () => {
    const dir = makeTmp();
    const file = join(dir, 'out');
    const fd = openSync(file, 'w');
    try {
      const result = await sup.spawn({ argv: ['bash', '-c', 'echo hi >&$0', String(fd)], inheritFds: [fd] })
        .result;
      expect(result.exitCode).toBe(0);
      expect(readFileSync(file, 'utf8')).toBe('hi\n');
      // Not listed, not passed.
      const without = await sup.spawn({ argv: ['bash', '-c', 'echo hi >&$0', String(fd)] }).result;
      expect(without.exitCode).not.toBe(0);
    } finally {
      closeSync(fd);
    }
  });

  it('refuses stdio numbers, fractions, non-arrays, and a terminal', () => {
    for (const inheritFds of [[2], [3.5], [5000], 'x', [undefined]]) {
      expect(() => sup.spawn({ argv: ['true'], inheritFds: inheritFds as never })).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      );
    }
    expect(() => sup.spawn({ argv: ['true'], mode: 'pty', inheritFds: [3] })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
  });
});

describe('small things said plainly', () => {
  it('a fractional output.maxBytes is INVALID_OPTION, not rounded down in silence', () => {
    expect(() => sup.spawn({ argv: ['true'], output: { maxBytes: 1.5 } })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
  });

  it('a directory given as the command is said to be one', async () => {
    const result = await sup.spawn({ argv: ['/tmp'], containment: 'process-group' }).result;
    expect(result.reason).toBe('spawn-error');
    expect(result.error?.message).toBe('/tmp: is a directory, not a program.');
  });
});

describe('limits said up front', () => {
  it('a capture too large for one string is INVALID_OPTION, not a result that never settles', () => {
    expect(() => sup.spawn({ argv: ['true'], output: { maxBytes: 2 ** 30 } })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
  });
});

describe('a host out of file descriptors', () => {
  // Under `ulimit -n`, with every descriptor taken but three: the spawn fails (EMFILE), the
  // result says so, and the host goes on (a failed spawn's streams are undefined, not null: a
  // check for null made the host die of an unhandled rejection after the result).
  for (const pty of [false, true]) {
    it(`a spawn that fails with EMFILE is a spawn-error result${pty ? ' (PTY), its message said once' : '; the host lives on'}`, async () => {
      const library = join(import.meta.dirname, '..', 'dist', 'index.js');
      const script = `
        import { openSync, closeSync } from 'node:fs';
        const { run } = await import(process.argv[1]);
        // The host's guard, started by a first run, needs no descriptor of a later run's.
        await run({ argv: ['true'] }).result;
        const held = [];
        try { for (;;) held.push(openSync('/dev/null', 'r')); } catch {}
        for (const fd of held.splice(-${pty ? 1 : 3})) closeSync(fd);
        const result = await run({ argv: ['true'], mode: '${pty ? 'pty' : 'child'}' }).result;
        await new Promise((r) => setTimeout(r, 200));
        console.log(JSON.stringify({ reason: result.reason, ...result.error }));`;
      const r = await exec(
        '/bin/sh',
        [
          '-c',
          'ulimit -n 64 && exec "$0" --input-type=module -e "$1" "$2"',
          process.execPath,
          script,
          library,
        ],
        { encoding: 'utf8', timeout: 30_000 },
      ).catch((error: { code: number; stdout: string; stderr: string }) => error);
      expect('code' in r ? r.code : 0, r.stderr).toBe(0);
      const said = JSON.parse(r.stdout);
      expect(said.reason).toBe('spawn-error');
      expect(said.message).toMatch(/^true: could not be started: .*[^.]\.$/);
    });
  }
});
