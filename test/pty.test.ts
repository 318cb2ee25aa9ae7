import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isProcwardenError, type RunHandle, type RunSpec, type RunStdin, Supervisor } from '../src/index.js';
import { createPtyLauncher } from '../src/spawn/index.js';
import { alive, fixture, killEach, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

interface Started {
  handle: RunHandle;
  dir: string;
  output: () => string;
  /** Every onData call as it came: [text, stream]. */
  chunks: [string, string][];
}

/** Starts a PTY run of `argv` (a fixture gets a tracked temp dir as $1), recording onData. */
function startPty(argv: string[], extra: Partial<RunSpec> = {}): Started {
  const dir = leaks.trackDir(makeTmp());
  const chunks: [string, string][] = [];
  const [file, ...rest] = argv as [string, ...string[]];
  const handle = sup.spawn({
    argv: file.endsWith('.sh') ? [fixture(file), dir, ...rest] : [file, ...rest],
    mode: 'pty',
    output: {
      onData: (text, stream) => {
        chunks.push([text, stream]);
      },
    },
    ...extra,
  });
  leaks.track(handle.pid);
  return { handle, dir, chunks, output: () => chunks.map(([t]) => t).join('') };
}

const seen = (s: Started, text: string) =>
  waitFor(() => s.output().includes(text), { what: JSON.stringify(text) });

describe('a command on a terminal', () => {
  it('sees a /dev/pts device; stdout and stderr are one stream named pty', async () => {
    const s = startPty(['bash', '-c', 'tty; echo to-stderr >&2']);
    const r = await s.handle.result;
    expect(r.reason).toBe('exit');
    expect(r.exitCode).toBe(0);
    expect(r.stdout.text).toMatch(/^\/dev\/pts\/\d+\r\n/);
    expect(r.stdout.text).toContain('to-stderr');
    expect(r.stderr).toEqual({ text: '', bytes: 0, truncated: false });
    expect(new Set(s.chunks.map(([, stream]) => stream))).toEqual(new Set(['pty']));
  });

  it('gets 120x30 by default, the size and TERM asked for otherwise, and the cookie', async () => {
    const show = ['bash', '-c', 'stty size; echo "term=$TERM run=$PROCWARDEN_RUN"'];
    const plain = await startPty(show).handle.result;
    expect(plain.stdout.text).toContain('30 120\r\n');
    const sized = startPty(show, { pty: { cols: 90, rows: 20, term: 'vt100' } });
    const r = await sized.handle.result;
    expect(r.stdout.text).toContain('20 90\r\n');
    expect(r.stdout.text).toContain(`term=vt100 run=${sized.handle.id}\r\n`);
  });

  it('loses no output: every byte reaches onData, the capture and the file sink', async () => {
    // The terminal turns each \n into \r\n.
    let expected = 0;
    for (let i = 1; i <= 100_000; i++) expected += String(i).length + 2;
    // The tail of a fast writer is what gets lost when the end of a terminal is misread; one run
    // shows it most of the time, three nearly always.
    for (let round = 0; round < 3; round++) {
      const file = join(leaks.trackDir(makeTmp()), 'out.log');
      const s = startPty(['seq', '1', '100000'], { output: { file, onData: undefined } });
      const r = await s.handle.result;
      expect(r.stdout.bytes).toBe(expected);
      expect(r.stdout.truncated).toBe(false);
      expect(r.stdout.text.endsWith('99999\r\n100000\r\n')).toBe(true);
      expect(readFileSync(file, 'utf8')).toBe(r.stdout.text);
    }
  });

  it('a command that does not exist is a spawn error, as in child mode', async () => {
    const r = await startPty(['procwarden-no-such-command']).handle.result;
    expect(r.reason).toBe('spawn-error');
    expect(r.error?.code).toBe('ENOENT');
    const notExecutable = await startPty([fixture('flood.mjs')]).handle.result;
    expect(notExecutable.reason).toBe('spawn-error');
    expect(notExecutable.error?.code).toBe('EACCES');
  });

  it.each(['process-group', 'none'] as const)(
    'a script whose #! interpreter does not exist is a spawn error, as in child mode (containment %s)',
    async (containment) => {
      // It used to be an exit 1 with execvp's "No such file or directory" as the output.
      const dir = leaks.trackDir(makeTmp());
      const script = join(dir, 'bad-interpreter.sh');
      writeFileSync(script, '#!/procwarden/no/such/interpreter -e\necho hi\n', { mode: 0o755 });
      for (const mode of ['child', 'pty'] as const) {
        const r = await sup.spawn({ argv: [script], mode, containment }).result;
        expect({ mode, reason: r.reason, error: r.error }).toEqual({
          mode,
          reason: 'spawn-error',
          error: { code: 'ENOENT', message: `${script}: its interpreter (the #! line) was not found.` },
        });
      }
      // One that is there (with an argument, after blanks) runs.
      const good = join(dir, 'good-interpreter.sh');
      writeFileSync(good, '#! /bin/sh -e\necho ran\n', { mode: 0o755 });
      const ok = await sup.spawn({ argv: [good], mode: 'pty', containment }).result;
      expect(ok.reason).toBe('exit');
      expect(ok.stdout.text).toBe('ran\r\n');
    },
  );
});

describe('termination on a terminal', () => {
  it.each(['auto', 'none'] as const)(
    'a bash that traps TERM gets SIGTERM on cancel; its cleanup output arrives before the result (containment %s)',
    async (containment) => {
      const s = startPty(['pty-trap.sh'], { graceMs: 5000, containment });
      await seen(s, 'ready');
      s.handle.cancel('test');
      const r = await s.handle.result;
      const atResult = s.output();
      expect(r.reason).toBe('cancelled');
      expect(r.exitCode).toBe(0);
      expect(r.escalated).toBe(false);
      expect(readFileSync(join(s.dir, 'signals'), 'utf8')).toBe('TERM\n');
      expect(atResult).toContain('cleanup done after TERM');
      expect(r.stdout.text).toContain('cleanup done after TERM');
      const main = readPids(s.dir).get('main');
      expect(main).toBeGreaterThan(1);
      expect(alive(main ?? 0)).toBe(false);
    },
  );

  it('a program that ignores TERM and HUP is SIGKILLed at the end of the grace', async () => {
    const s = startPty(['pty-ignore.sh'], { graceMs: 600 });
    await seen(s, 'ready');
    s.handle.cancel();
    const r = await s.handle.result;
    expect(r.reason).toBe('cancelled');
    expect(r.exitSignal).toBe('SIGKILL');
    expect(r.escalated).toBe(true);
    expect(r.tree.report?.graceUsedMs).toBeGreaterThanOrEqual(590);
    const main = readPids(s.dir).get('main');
    const mainReport = r.tree.report?.members.find((m) => m.pid === main);
    expect(mainReport?.signals.map((e) => e.signal)).toEqual(['SIGTERM', 'SIGKILL']);
    expect(mainReport?.outcome).toBe('killed');
    expect(alive(main ?? 0)).toBe(false);
  });

  it('overall timeout, AbortSignal and kill() end a PTY run with their own reasons', async () => {
    const timed = startPty(['sleep', '30'], { timeoutMs: 300 });
    const controller = new AbortController();
    const aborted = startPty(['sleep', '30'], { signal: controller.signal });
    const killed = startPty(['sleep', '30']);
    await waitFor(() => aborted.handle.state === 'running' && killed.handle.state === 'running');
    controller.abort(new Error('user left'));
    killed.handle.kill();
    const [t, a, k] = await Promise.all([timed, aborted, killed].map((s) => s.handle.result));
    expect([t?.reason, t?.timedOut, t?.exitSignal]).toEqual(['overall-timeout', true, 'SIGTERM']);
    expect([a?.reason, a?.detail, a?.exitSignal]).toEqual(['aborted', 'user left', 'SIGTERM']);
    expect([k?.reason, k?.escalated, k?.exitSignal]).toEqual(['cancelled', true, 'SIGKILL']);
  });

  it('no-output timeout applies to the terminal stream', async () => {
    const s = startPty(['bash', '-c', 'echo start; sleep 30'], { noOutputTimeoutMs: 300 });
    const r = await s.handle.result;
    expect(r.reason).toBe('no-output-timeout');
    expect(r.timedOut).toBe(true);
    expect(r.stdout.text).toContain('start');
    expect(r.durationMs).toBeLessThan(10_000);
  });
});

/** An interactive bash that starts one `&` job and one `nohup` job, pids in $dir. */
async function shellWithJobs(extra: Partial<RunSpec>) {
  const s = startPty(['bash', '--norc', '--noprofile', '-i'], {
    stdin: 'pipe',
    env: { PS1: '$ ' },
    ...extra,
  });
  const stdin = s.handle.stdin;
  if (!stdin) throw new Error('no stdin');
  stdin.write(`sleep 300 & echo $! > ${s.dir}/bg.pid\n`);
  stdin.write(`nohup sleep 300 > /dev/null 2>&1 & echo $! > ${s.dir}/nohup.pid\n`);
  // Arithmetic: only the shell's answer, not the echo of the typed line, contains "jobs-2".
  stdin.write('echo "jobs-$((1+1))"\n');
  await seen(s, 'jobs-2');
  const pids = readPids(s.dir);
  const jobs = [pids.get('bg') ?? 0, pids.get('nohup') ?? 0];
  expect(jobs.every(alive)).toBe(true);
  return { ...s, jobs };
}

describe('background jobs of a shell on a terminal', () => {
  it('control: with leftovers keep, the & and nohup jobs outlive the shell', async () => {
    const s = await shellWithJobs({ leftovers: 'keep' });
    s.handle.stdin?.write('exit\n');
    const r = await s.handle.result;
    expect(r.reason).toBe('exit');
    expect(r.tree.leftovers).toBeGreaterThanOrEqual(2);
    expect(s.jobs.every(alive)).toBe(true);
    killEach(s.jobs);
    await waitFor(() => !s.jobs.some(alive), { what: 'jobs killed by the test' });
  });

  it('the shell exits normally: the & and nohup jobs are gone after the run', async () => {
    const s = await shellWithJobs({});
    s.handle.stdin?.write('exit\n');
    const r = await s.handle.result;
    expect(r.reason).toBe('exit');
    expect(r.exitCode).toBe(0);
    expect(r.tree.leftovers).toBeGreaterThanOrEqual(2);
    expect(s.jobs.some(alive)).toBe(false);
  });

  it('the shell is cancelled: it ignores TERM and is killed at grace end; the jobs are gone', async () => {
    const s = await shellWithJobs({ graceMs: 500 });
    s.handle.cancel();
    const r = await s.handle.result;
    expect(r.reason).toBe('cancelled');
    // An interactive bash ignores SIGTERM; its jobs do not.
    expect(r.escalated).toBe(true);
    expect(r.exitSignal).toBe('SIGKILL');
    const jobReports = r.tree.report?.members.filter((m) => s.jobs.includes(m.pid)) ?? [];
    expect(jobReports.map((m) => m.outcome)).toEqual(['exited-in-grace', 'exited-in-grace']);
    expect(s.jobs.some(alive)).toBe(false);
  });
});

describe('input and size', () => {
  it('input the program does not read (raw mode, busy) never blocks the host: timers fire, the exit is seen', async () => {
    // libuv wrote to the master in a blocking loop: a megabyte to a program in raw mode that does
    // not read stopped the event loop until it read, and for ever if it exited without reading.
    const { handle } = startPty(['sh', '-c', 'stty raw -echo; sleep 0.3; exit 3'], { stdin: 'pipe' });
    leaks.track(handle.pid);
    await new Promise((resolve) => setTimeout(resolve, 100));
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    const t0 = Date.now();
    handle.stdin?.write(Buffer.alloc(1024 * 1024, 0x61));
    expect(Date.now() - t0).toBeLessThan(1000);
    const result = await handle.result;
    clearInterval(ticker);
    expect(result.exitCode).toBe(3);
    // A loop blocked by the write would not tick at all (and the write above would not return);
    // how often it ticks on a loaded machine is not this test's business.
    expect(ticks).toBeGreaterThan(0);
  });

  it("handle.stdin has a Writable's backpressure: false above the high-water mark, then 'drain'", async () => {
    // The input a program has not read yet used to be queued without limit while write() said
    // true: a writer had no way to know it should wait (and `run --pty` grew without bound).
    // The program reads nothing until told (the file `go`), and only once its terminal is raw: in
    // canonical mode the kernel drops what a line holds beyond 4095 bytes.
    const dir = leaks.trackDir(makeTmp());
    const s = startPty(
      [
        'sh',
        '-c',
        `stty raw -echo; echo ready; while [ ! -e ${dir}/go ]; do sleep 0.05; done; exec head -c 1048577 >/dev/null`,
      ],
      { stdin: 'pipe', timeoutMs: 20_000 },
    );
    await seen(s, 'ready');
    const stdin = s.handle.stdin as RunStdin;
    expect(stdin.write('x')).toBe(true); // a little input is taken at once
    const drained = new Promise<void>((resolve) => stdin.once('drain', resolve));
    expect(stdin.write(Buffer.alloc(1024 * 1024, 0x61))).toBe(false);
    writeFileSync(join(dir, 'go'), '');
    await drained; // head read it all
    const result = await s.handle.result;
    expect(result.reason).toBe('exit');
    expect(result.exitCode).toBe(0);
    // Dropped, and a writer waiting for 'drain' is let go all the same.
    expect(stdin.writable).toBe(false);
    const late = new Promise<void>((resolve) => stdin.once('drain', resolve));
    expect(stdin.write('late')).toBe(false);
    await late;
  });

  it('a program driven through stdin: write a line, read the answer, end with EOT', async () => {
    const s = startPty(['pty-answer.sh'], { stdin: 'pipe', timeoutMs: 20_000 });
    s.handle.stdin?.write('hello\n');
    await seen(s, 'got: hello');
    s.handle.stdin?.end();
    const r = await s.handle.result;
    expect(r.reason).toBe('exit');
    expect(r.exitCode).toBe(0);
    expect(r.stdout.text).toContain('bye (last: )');
    expect(s.handle.stdin?.write('late\n')).toBe(false);
  });

  it('end() after a partial line delivers the line and then end-of-input', async () => {
    const s = startPty(['pty-answer.sh'], { stdin: 'pipe', timeoutMs: 20_000 });
    s.handle.stdin?.write('no newline');
    s.handle.stdin?.end();
    const r = await s.handle.result;
    expect(r.reason).toBe('exit');
    expect(r.stdout.text).toContain('bye (last: no newline)');
  });

  it('stdin data is typed into the terminal, then end-of-input', async () => {
    const r = await startPty(['pty-answer.sh'], { stdin: 'one\ntwo\n', timeoutMs: 20_000 }).handle.result;
    expect(r.reason).toBe('exit');
    expect(r.stdout.text).toContain('got: one');
    expect(r.stdout.text).toContain('got: two');
    expect(r.stdout.text).toContain('bye');
  });

  it('resize is seen by the program', async () => {
    const s = startPty(['pty-size.sh'], { stdin: 'pipe', pty: { cols: 90, rows: 20 } });
    await seen(s, 'size 20 90');
    s.handle.resize(100, 40);
    s.handle.stdin?.write('\n');
    const r = await s.handle.result;
    expect(r.stdout.text).toContain('size 40 100');
    // After the run a resize has nothing to act on and is not an error.
    expect(() => s.handle.resize(80, 24)).not.toThrow();
  });

  it('resize with a bad size, or in child mode, is a clear error', async () => {
    const s = startPty(['pty-size.sh'], { stdin: 'pipe' });
    expect(() => s.handle.resize(0, 10)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
    expect(() => s.handle.resize(80, 1.5)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
    s.handle.stdin?.end();
    await s.handle.result;
    const child = sup.spawn({ argv: ['true'] });
    expect(() => child.resize(80, 24)).toThrow(expect.objectContaining({ code: 'NOT_A_PTY' }));
    await child.result;
  });

  it("stdin 'inherit' is refused in PTY mode", () => {
    expect(() => sup.spawn({ argv: ['true'], mode: 'pty', stdin: 'inherit' })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
  });
});

describe('without node-pty', () => {
  const missing = () => {
    throw Object.assign(new Error("Cannot find module '@lydell/node-pty'\nRequire stack: ..."), {
      code: 'MODULE_NOT_FOUND',
    });
  };
  const brokenBinary = () => {
    throw new Error('The @lydell/node-pty package could not find the binary package: x/pty.node');
  };

  it('PTY_UNAVAILABLE says how to install it; child mode still works', async () => {
    const bare = new Supervisor({ launchers: { pty: createPtyLauncher({ requireModule: missing }) } });
    let error: unknown;
    try {
      bare.spawn({ argv: ['true'], mode: 'pty' });
    } catch (e) {
      error = e;
    }
    expect(isProcwardenError(error) && error.code).toBe('PTY_UNAVAILABLE');
    expect((error as Error).message).toMatch(/npm install @lydell\/node-pty/);
    expect(bare.running()).toEqual([]);
    const r = await bare.spawn({ argv: ['true'] }).result;
    expect(r.reason).toBe('exit');
  });

  it('an installed but unloadable node-pty is PTY_UNAVAILABLE too, with the cause', () => {
    const bare = new Supervisor({ launchers: { pty: createPtyLauncher({ requireModule: brokenBinary }) } });
    expect(() => bare.spawn({ argv: ['true'], mode: 'pty' })).toThrow(
      expect.objectContaining({
        code: 'PTY_UNAVAILABLE',
        message: expect.stringMatching(/could not be loaded \(.*binary package.*\)/),
      }),
    );
  });
});
