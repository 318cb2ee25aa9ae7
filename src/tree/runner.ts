import { childProcess } from '../lazy-builtins.js';

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

export const execRunner: CommandRunner = (file, args, env) =>
  new Promise((resolve) => {
    childProcess().execFile(
      file,
      [...args],
      {
        windowsHide: true,
        maxBuffer: 64 * 1024 * 1024,
        encoding: 'utf8',
        timeout: HELPER_TIMEOUT_MS,
        killSignal: 'SIGKILL',
        ...(env ? { env } : {}),
      },
      (error, stdout, stderr) => {
        if (!error) return resolve({ code: 0, stdout, stderr });
        const failure = error as NodeJS.ErrnoException & { killed?: boolean };
        if (failure.killed) {
          const timedOut = Object.assign(new Error(`${file} did not answer within ${HELPER_TIMEOUT_MS} ms`), {
            code: 'ETIMEDOUT',
          });
          return resolve({ code: null, stdout, stderr, error: timedOut });
        }
        const code = failure.code as unknown;
        if (typeof code === 'number') return resolve({ code, stdout, stderr });
        resolve({ code: null, stdout, stderr, error: failure });
      },
    );
  });
