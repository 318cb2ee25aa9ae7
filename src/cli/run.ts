import { closeSync, openSync, statSync } from 'node:fs';
import { isProcwardenError } from '../errors.js';
import { signalTree } from '../kill/index.js';
import { tty } from '../lazy-builtins.js';
import { MAX_OOM_SCORE_RAISE, normalizeSignal, parseDuration } from '../options/index.js';
import { type TerminalOut, type TerminalOuts, terminalOuts } from '../output/terminal-out.js';
import { Supervisor } from '../supervisor/index.js';
import type { ContainmentMode, RunHandle, RunResult, RunSpec } from '../types.js';
import { parseOptions, splitAtCommand, UsageError } from './args.js';
import { painter, useColour } from './colour.js';
import { dieOfAtExit } from './die-of.js';
import type { EarlySignals } from './early-signals.js';
import { EXIT_FAILED } from './exit-codes.js';
import { deathSignal, runStatus } from './exit-status.js';
import { onControllingTerminal } from './foreground.js';
import { printable } from './format.js';
import { RUN_HELP } from './help.js';
import { inheritedFds } from './inherited-fds.js';
import { keepRunningWhileTheJobReads } from './job-control.js';
import { connectPty } from './pty-terminal.js';
import { onStopSignals, TERMINAL_SIGNALS } from './signals.js';
import { stopLine } from './stop-line.js';
import { noteWriteError, writeAll, writeNow } from './write-now.js';

const OPTIONS = {
  timeout: { type: 'string' },
  'idle-timeout': { type: 'string' },
  grace: { type: 'string' },
  signal: { type: 'string' },
  containment: { type: 'string' },
  'keep-leftovers': { type: 'boolean' },
  'hold-leftovers': { type: 'boolean' },
  'hold-limit': { type: 'string' },
  cwd: { type: 'string' },
  env: { type: 'string', multiple: true },
  pty: { type: 'boolean' },
  'oom-score-adj': { type: 'string' },
  json: { type: 'string' },
  quiet: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const CONTAINMENTS: readonly ContainmentMode[] = ['auto', 'process-group', 'cgroup', 'none'];

/** Not a usage mistake: --help has nothing to say about a guard that could not be had, or the environment. */
const NOT_USAGE: readonly string[] = ['GUARD_UNAVAILABLE', 'INVALID_ENV', 'OOM_SCORE_UNAVAILABLE'];

/** Bad values are usage errors: exit 125, one line, nothing started. */
function checked<T>(make: () => T): T {
  try {
    return make();
  } catch (error) {
    if (isProcwardenError(error))
      throw new UsageError(error.message, EXIT_FAILED, !NOT_USAGE.includes(error.code));
    throw error;
  }
}

function leftoversOption(values: {
  'keep-leftovers'?: boolean;
  'hold-leftovers'?: boolean;
  'hold-limit'?: string;
}): Pick<RunSpec, 'leftovers' | 'holdMs'> {
  if (values['keep-leftovers'] && values['hold-leftovers'])
    throw new UsageError('--keep-leftovers and --hold-leftovers: give one of them', EXIT_FAILED);
  const limit = values['hold-limit'];
  if (limit !== undefined && !values['hold-leftovers'])
    throw new UsageError('--hold-limit bounds --hold-leftovers: give --hold-leftovers too', EXIT_FAILED);
  if (values['keep-leftovers']) return { leftovers: 'keep' };
  if (!values['hold-leftovers']) return { leftovers: 'kill' };
  return {
    leftovers: 'hold',
    ...(limit === undefined ? {} : { holdMs: checked(() => parseDuration(limit, '--hold-limit')) }),
  };
}

function parseEnv(pairs: readonly string[] = []): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new UsageError(`--env ${JSON.stringify(pair)}: write NAME=VALUE`, EXIT_FAILED);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return env;
}

/** `--oom-score-adj N|off`: RunSpec.oomScoreAdj (an increase over procwarden's own score), or false. */
function parseOomScoreAdj(text: string | undefined): number | false | undefined {
  if (text === undefined) return undefined;
  if (text === 'off') return false;
  if (/^\d{1,4}$/.test(text) && Number(text) <= MAX_OOM_SCORE_RAISE) return Number(text);
  throw new UsageError(
    `--oom-score-adj ${JSON.stringify(text)}: give a whole number from 0 to ${MAX_OOM_SCORE_RAISE}, added to procwarden's own oom_score_adj (the sum capped at 1000), or off`,
    EXIT_FAILED,
  );
}

type JsonSink = (text: string) => Promise<NodeJS.ErrnoException | null>;

function isFifo(path: string): boolean {
  try {
    return statSync(path).isFIFO();
  } catch {
    return false;
  }
}

/**
 * Where --json goes: a file (opened now, so a bad path fails before anything runs), stdout or
 * stderr. Writing it says whether it got there: the status depends on it.
 */
function openJsonSink(target: string | undefined, terminals: TerminalOuts): JsonSink | null {
  if (target === undefined) return null;
  const toStream =
    (stream: NodeJS.WriteStream, terminal: TerminalOut | undefined): JsonSink =>
    (text) =>
      terminal
        ? (terminal.write(Buffer.from(text)) ?? Promise.resolve(null))
        : new Promise((resolve) => {
            stream.write(text, (error) =>
              resolve((error as NodeJS.ErrnoException | null | undefined) ?? null),
            );
          });
  if (target === '') return toStream(process.stderr, terminals[2]);
  if (target === '-') return toStream(process.stdout, terminals[1]);
  let fd: number;
  try {
    fd = openSync(target, 'w');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(`--json: cannot write ${JSON.stringify(target)} (${code})`, EXIT_FAILED);
  }
  return async (text) => {
    const { error } = writeAll(fd, text);
    closeSync(fd);
    return error ?? null;
  };
}

/**
 * Writes a chunk; a promise while the stream is full, settled by 'drain' (or its end). A terminal
 * goes through its writer (output/terminal-out.ts): Node's stream would block in write(2) while it stops
 * reading; its failure goes to `failed`, as a stream's goes to its 'error' listener.
 */
function passOn(
  out: NodeJS.WriteStream,
  terminal: TerminalOut | undefined,
  failed: (error: NodeJS.ErrnoException) => void,
  chunk: Uint8Array,
): Promise<void> | undefined {
  if (terminal) {
    const pending = terminal.write(chunk);
    return pending?.then((error) => {
      if (error) failed(error);
    });
  }
  if (out.write(chunk)) return undefined;
  return new Promise((resolve) => {
    const done = () => {
      out.off('drain', done);
      out.off('error', done);
      out.off('close', done);
      resolve();
    };
    out.on('drain', done);
    out.on('error', done);
    out.on('close', done);
  });
}

/** Our stdout was a terminal that has hung up: it answers EIO to isatty(3)'s ioctl now. */
function stdoutHungUp(): boolean {
  return process.stdout.isTTY === true && !tty().isatty(1);
}

export async function runCommand(args: string[], _prog: string, early?: EarlySignals): Promise<number> {
  const { ours, rest } = splitAtCommand(args, OPTIONS, { optionalValue: ['json'] });
  const { values } = parseOptions(ours, OPTIONS, EXIT_FAILED);
  if (values.help) {
    writeNow(1, RUN_HELP);
    return 0;
  }
  const [command, ...commandArgs] = rest;
  if (command === undefined) {
    throw new UsageError('missing COMMAND; e.g. procwarden run --timeout 30s -- npm test', EXIT_FAILED);
  }
  const containment = values.containment ?? 'auto';
  if (!CONTAINMENTS.includes(containment as ContainmentMode)) {
    throw new UsageError(
      `--containment ${JSON.stringify(containment)}: use one of ${CONTAINMENTS.join(', ')}`,
      EXIT_FAILED,
    );
  }
  // An empty value is a bad duration (as timeout(1) says), not a missing one.
  const timeoutMs = checked(() =>
    values.timeout === undefined ? 0 : parseDuration(values.timeout, '--timeout'),
  );
  const idleTimeoutMs = checked(() =>
    values['idle-timeout'] === undefined ? 0 : parseDuration(values['idle-timeout'], '--idle-timeout'),
  );
  const graceMs = checked(() => (values.grace === undefined ? 5000 : parseDuration(values.grace, '--grace')));
  const killSignal = checked(() => normalizeSignal(values.signal ?? 'SIGTERM', '--signal'));
  const leftovers = leftoversOption(values);
  const oomScoreAdj = parseOomScoreAdj(values['oom-score-adj']);
  const terminals = terminalOuts();
  /** One of our own lines on stderr, in its place after the command's output on a terminal. */
  const say = (text: string) => {
    if (terminals[2]) terminals[2].write(Buffer.from(text));
    else process.stderr.write(text);
  };
  // Opening a FIFO waits for its reader, for ever if none comes: a stop signal meanwhile must end
  // us, as before we listened, not wait unheard (one that came before ends us then: nothing runs).
  const openJson = () => openJsonSink(values.json, terminals);
  const writeJson =
    early && values.json && isFifo(values.json) ? await early.unguarded(openJson) : openJson();

  let stdoutOpen = true;
  let stderrOpen = true;
  /** Our stdout refused the command's output (a full disk, an I/O error): it was lost. */
  let writeFailed = null as NodeJS.ErrnoException | null;
  const env = parseEnv(values.env);
  const terminal = values.pty ? connectPty(env) : null;
  const inheritGroup = !terminal && onControllingTerminal();
  const spec: RunSpec = {
    argv: [command, ...commandArgs],
    mode: values.pty ? 'pty' : 'child',
    cwd: values.cwd,
    env,
    stdin: terminal ? 'pipe' : 'inherit',
    // What our parent passed us beyond stdio, as a shell would pass it on (not to a terminal).
    ...(terminal ? {} : { inheritFds: inheritedFds() }),
    // On our controlling terminal, the command is in our job (our process group), as under GNU
    // timeout: Ctrl-Z stops it with us, `fg`/`bg` continue both, and started with `&` it is stopped
    // by SIGTTIN when it reads, never taking the shell's input. A --pty command has its own terminal.
    inheritGroup,
    pty: terminal?.pty,
    timeoutMs,
    noOutputTimeoutMs: idleTimeoutMs,
    graceMs,
    killSignal,
    containment: containment as ContainmentMode,
    ...leftovers,
    ...(oomScoreAdj === undefined ? {} : { oomScoreAdj }),
    output: {
      // Capture only feeds --json; pass-through is the raw bytes. A reader slower than the command
      // holds it: while our stdout (or stderr) is full, the command's pipe is not read.
      maxBytes: writeJson ? undefined : 0,
      onBytes: (chunk, stream) => {
        if (stream === 'stderr')
          return stderrOpen ? passOn(process.stderr, terminals[2], outputFailed.stderr, chunk) : undefined;
        if (stdoutOpen) return passOn(process.stdout, terminals[1], outputFailed.stdout, chunk);
      },
    },
  };
  // Assigned by the spawn below; `stop` only runs from a signal or an error event, after it.
  let handle!: RunHandle;
  // Set once `handle` is: output reaches onBytes only after the spawn.
  const outputFailed = {} as Record<'stdout' | 'stderr', (error: NodeJS.ErrnoException) => void>;
  let received: NodeJS.Signals | null = null;
  /** Our stdout's reader went away (EPIPE) before anything else stopped the run: SIGPIPE stands for it. */
  let readerGone = false;
  const stop = (signal: NodeJS.Signals, count: number) => {
    received ??= signal;
    if (count > 1) handle.kill();
    // A terminal's signals reach the tree as they are, as without procwarden in between; any other
    // request to stop (SIGTERM, SIGUSR1, SIGALRM...) was addressed to us: the tree gets --signal.
    else if (TERMINAL_SIGNALS.includes(signal)) handle.cancel(signal, { signal });
    else handle.cancel(signal);
  };
  // Listening before the spawn: a signal sent as soon as the command runs (a loaded machine can
  // run it before this process gets the CPU back) must reach the tree, not kill us alone.
  // Our job is in the foreground again after a read from the background stopped the command: it
  // reads on (job-control.ts).
  const continueJob = () => {
    if (handle?.pid !== undefined && handle.state !== 'exited')
      signalTree(handle.pid, 'SIGCONT').catch(() => {});
  };
  const signals = onStopSignals(stop, early);
  const unignore = inheritGroup ? keepRunningWhileTheJobReads(continueJob) : () => {};
  const uninstall = () => {
    signals.uninstall();
    unignore();
  };
  try {
    handle = checked(() => new Supervisor().spawn(spec));
  } catch (error) {
    uninstall();
    throw error;
  }
  signals.replayEarly();
  const detach = terminal?.attach(handle);
  // A stream that fails is written to no more (a destroyed stream fails every write at once: the
  // command's output would spin through it). Its reader went away (`procwarden run -- yes | head
  // -1`, or the same on stderr): stop the command as the closed pipe would have stopped it, and
  // report it as SIGPIPE. Our stdout refused the output otherwise (ENOSPC, EIO): the command is
  // stopped and we fail (125), as a program that cannot write its output does; what stderr
  // refuses is dropped, as most programs drop it. Once we were told to stop, or our terminal hung
  // up (a closed window answers EIO, and its SIGHUP is on its way), a refused write is a reader
  // gone with it: the signal, not the lost output, says how we end.
  const onOutputError = (stream: 'stdout' | 'stderr') => (error: NodeJS.ErrnoException) => {
    // Our own SIGPIPE follows: noted, it is not taken for a request to stop.
    noteWriteError(error);
    if (stream === 'stdout' ? !stdoutOpen : !stderrOpen) return;
    if (stream === 'stdout') stdoutOpen = false;
    else stderrOpen = false;
    if (error.code === 'EPIPE') {
      readerGone = received === null;
      stop('SIGPIPE', 1);
    } else if (stream === 'stdout' && received === null && !stdoutHungUp()) {
      writeFailed ??= error;
      handle.cancel(`write error on stdout (${error.code})`);
    }
  };
  outputFailed.stdout = onOutputError('stdout');
  outputFailed.stderr = onOutputError('stderr');
  process.stdout.on('error', outputFailed.stdout);
  process.stderr.on('error', outputFailed.stderr);

  const result: RunResult = await handle.result;
  // A terminal that stopped reading (Ctrl-S) holds no more than a moment what is left to write.
  terminals.end();
  try {
    detach?.();
    // The EPIPE listener stays: `--json -` into a closed stdout must not crash with a trace.
    uninstall();
    // A reader that went away while a timeout was already ending the run changed nothing: the
    // first reason wins, as the stop line says.
    if (readerGone && received === 'SIGPIPE' && result.timedOut) received = null;

    if (result.reason === 'spawn-error') {
      // The message names the command as given: its escapes and newlines must not reach a terminal.
      say(`procwarden run: ${printable(result.error?.message ?? 'the command could not be started')}\n`);
    } else if (writeFailed) {
      if (stderrOpen) say(`procwarden run: write error: ${writeFailed.message}\n`);
    } else if (!values.quiet) {
      const line = stopLine(
        result,
        { timeoutMs, idleTimeoutMs, graceMs, received, killSignal },
        painter(useColour(process.stderr)),
      );
      if (line) say(`${line}\n`);
    }
    if (writeFailed) {
      writeJson?.(`${JSON.stringify(result, null, 2)}\n`);
      return EXIT_FAILED;
    }
    // Its failure may come as the write's error, the stream's 'error' event (above), or both.
    const jsonError =
      (writeJson ? await writeJson(`${JSON.stringify(result, null, 2)}\n`) : null) ?? writeFailed;
    if (jsonError && received === null) {
      noteWriteError(jsonError);
      // Its reader went away (`--json - | true`): as a closed pipe ends a writer, 141.
      if (jsonError.code === 'EPIPE') return runStatus(result, 'SIGPIPE');
      if (stderrOpen) say(`procwarden run: --json: write error: ${jsonError.message}\n`);
      return EXIT_FAILED;
    }
    // A terminal's signal went to the command as it is: the command's status says how it ended (a
    // command that handles Ctrl-C and exits 42: 42), and a death is ours too, as under timeout(1).
    const passedOn = received && TERMINAL_SIGNALS.includes(received) ? received : null;
    // A signal addressed to us (SIGTERM: the tree got --signal) keeps its 128+N, told, not died of.
    const death = deathSignal(result, passedOn);
    if (death && received === passedOn) dieOfAtExit(death);
    return runStatus(result, received, passedOn);
  } finally {
    // Our own lines and the last output, unless the terminal has stalled: then the status, at once.
    await terminals.drained();
  }
}
