import type { ChildProcess } from 'node:child_process';
import { childProcess } from '../lazy-builtins.js';
import { spawnSealed } from '../spawn/pty-masters.js';

export interface CommandResult {
  /** Exit code; null when the command could not be run at all (then `error` says why). */
  code: number | null;
  stdout: string;
  stderr: string;
  error?: NodeJS.ErrnoException;
}

/**
 * Runs a helper command (ps, PowerShell, taskkill) without a shell. Injected so that the macOS and
 * Windows paths can be driven on Linux with recorded outputs. `env` replaces the environment the
 * helper gets (ps prints dates in the locale and time zone it is given).
 */
export type CommandRunner = (
  file: string,
  args: readonly string[],
  env?: NodeJS.ProcessEnv,
) => Promise<CommandResult>;

/**
 * How long a helper may take before it is killed and its read fails: a ps or a WMI query that
 * hangs must not hold a run's result (or a kill) for ever. Generous: a loaded macOS takes about a
 * second for a ps, a cold PowerShell several.
 */
export const HELPER_TIMEOUT_MS = 30_000;

/** What a helper may print before it is killed and its read fails: a ps of a huge host fits. */
const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;

/**
 * Spawned, not execFile'd, to keep open PTY masters out of the helper (see spawnSealed; execFile
 * takes no stdio): a helper forked while a PTY run is open would otherwise hold that run's terminal
 * for as long as it runs. Its stdin is /dev/null: a helper that reads it (PowerShell) sees its end.
 */
export const execRunner: CommandRunner = (file, args, env) =>
  new Promise((resolve) => {
    let child: ChildProcess;
    try {
      child = spawnSealed(['ignore', 'pipe', 'pipe'], (stdio) =>
        childProcess().spawn(file, [...args], { windowsHide: true, stdio, ...(env ? { env } : {}) }),
      );
    } catch (error) {
      resolve({ code: null, stdout: '', stderr: '', error: error as NodeJS.ErrnoException });
      return;
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let bytes = 0;
    let failure: NodeJS.ErrnoException | undefined;
    const stop = (error: NodeJS.ErrnoException) => {
      failure ??= error;
      child.kill('SIGKILL');
    };
    const take = (into: Buffer[]) => (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > MAX_OUTPUT_BYTES) {
        stop(
          Object.assign(new Error(`${file} printed more than ${MAX_OUTPUT_BYTES} bytes`), {
            code: 'ENOBUFS',
          }),
        );
        return;
      }
      into.push(chunk);
    };
    child.stdout?.on('data', take(out));
    child.stderr?.on('data', take(err));
    const timer = setTimeout(
      () =>
        stop(
          Object.assign(new Error(`${file} did not answer within ${HELPER_TIMEOUT_MS} ms`), {
            code: 'ETIMEDOUT',
          }),
        ),
      HELPER_TIMEOUT_MS,
    );
    let settled = false;
    const settle = (result: CommandResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    // 'close', after 'exit': the output is whole once both pipes are at their end.
    child.once('close', (code, signal) => {
      const stdout = Buffer.concat(out).toString('utf8');
      const stderr = Buffer.concat(err).toString('utf8');
      if (failure) settle({ code: null, stdout, stderr, error: failure });
      else if (code !== null) settle({ code, stdout, stderr });
      else settle({ code: null, stdout, stderr, error: new Error(`${file} was ended by ${signal}`) });
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      failure ??= error;
      // A spawn that failed (ENOENT, EACCES) has no pid: nothing more will come of it.
      if (child.pid === undefined) settle({ code: null, stdout: '', stderr: '', error });
    });
  });
