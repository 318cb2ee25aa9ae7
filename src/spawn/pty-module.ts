import { ProcwardenError } from '../errors.js';

export const PTY_PACKAGE = '@lydell/node-pty';

export interface PtyDisposable {
  dispose(): void;
}

/** The part of node-pty procwarden uses; a fake of this shape stands in for it in tests. */
export interface PtyProcess {
  readonly pid: number;
  readonly onData: (listener: (data: Buffer | string) => void) => PtyDisposable;
  readonly onExit: (listener: (e: { exitCode: number; signal?: number }) => void) => PtyDisposable;
  write(data: string | Buffer): void;
  resize(cols: number, rows: number): void;
  /** Stop and restart reading the terminal (node-pty's socket): how a slow consumer holds the command. */
  pause?(): void;
  resume?(): void;
  /** The master's file descriptor (Unix; not in node-pty's typings). */
  readonly fd?: number;
  /**
   * node-pty's socket-level events (not in its typings): taking 'error' is how it expects errors to
   * be handled; 'end' is where a Unix terminal's unread tail is recovered.
   */
  on?(event: 'error' | 'end', listener: (error?: Error) => void): void;
}

export interface PtyForkOptions {
  name: string;
  cols: number;
  rows: number;
  cwd: string | undefined;
  env: Record<string, string>;
  /** null: output arrives as bytes, decoded once by the run's collector. */
  encoding: null;
}

export interface PtyModule {
  spawn(file: string, args: string[], options: PtyForkOptions): PtyProcess;
}

/**
 * Loads node-pty synchronously on first use. It is an optional dependency: the core installs and
 * works without it, and only mode 'pty' needs it.
 */
export function loadPtyModule(requireModule: (id: string) => unknown): PtyModule {
  let loaded: unknown;
  try {
    loaded = requireModule(PTY_PACKAGE);
  } catch (error) {
    throw ptyUnavailable(error);
  }
  if (typeof (loaded as Partial<PtyModule> | null)?.spawn !== 'function') {
    throw ptyUnavailable(new Error(`${PTY_PACKAGE} loaded but has no spawn() function`));
  }
  return loaded as PtyModule;
}

function ptyUnavailable(cause: unknown): ProcwardenError {
  const error = cause as NodeJS.ErrnoException | undefined;
  const firstLine = String(error?.message ?? cause).split('\n')[0] ?? '';
  const notInstalled = error?.code === 'MODULE_NOT_FOUND' && firstLine.includes(`'${PTY_PACKAGE}'`);
  const message = notInstalled
    ? `mode 'pty' needs the optional dependency ${PTY_PACKAGE}, which is not installed. ` +
      `Install it with \`npm install ${PTY_PACKAGE}\` (optional dependencies are skipped by ` +
      "--omit=optional and --no-optional), or use mode 'child'."
    : `mode 'pty' needs ${PTY_PACKAGE}, which is installed but could not be loaded (${firstLine}). ` +
      `Reinstall it on this machine with \`npm install ${PTY_PACKAGE}\` (its prebuilt binary is ` +
      "per platform; a node_modules copied from another OS will not work), or use mode 'child'.";
  return new ProcwardenError('PTY_UNAVAILABLE', message, { cause });
}
