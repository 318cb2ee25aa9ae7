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
 * Windows paths can be driven on Linux with recorded outputs.
 */
export type CommandRunner = (file: string, args: readonly string[]) => Promise<CommandResult>;

export const execRunner: CommandRunner = (file, args) =>
  new Promise((resolve) => {
    childProcess().execFile(
      file,
      [...args],
      { windowsHide: true, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (!error) return resolve({ code: 0, stdout, stderr });
        const code = (error as { code?: unknown }).code;
        if (typeof code === 'number') return resolve({ code, stdout, stderr });
        resolve({ code: null, stdout, stderr, error: error as NodeJS.ErrnoException });
      },
    );
  });
