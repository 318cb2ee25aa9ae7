import { ProcwardenError } from '../errors.js';

export const PTY_PACKAGE = '@lydell/node-pty';

export interface PtyDisposable {
  dispose(): void;
}

/** The part of node-pty's public API procwarden uses (Windows ConPTY); a fake of it stands in for tests. */
export interface PtyProcess {
  readonly pid: number;
  readonly onData: (listener: (data: Buffer | string) => void) => PtyDisposable;
  readonly onExit: (listener: (e: { exitCode: number; signal?: number }) => void) => PtyDisposable;
  write(data: string | Buffer): void;
  resize(cols: number, rows: number): void;
  /** Stop and restart reading the terminal: how a slow consumer holds the command. */
  pause?(): void;
  resume?(): void;
  /** node-pty's socket-level events (not in its typings): taking 'error' is how it expects errors to be handled. */
  on?(event: 'error', listener: (error?: Error) => void): void;
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
 * node-pty's native Unix binding, which procwarden drives itself (see pty-unix.ts for why): forkpty
 * + exec, and a thread that waitpid()s the child and calls `onExit` with its status.
 */
export interface UnixPtyBinding {
  fork(
    file: string,
    args: string[],
    env: string[],
    cwd: string,
    cols: number,
    rows: number,
    uid: number,
    gid: number,
    utf8: boolean,
    helperPath: string,
    onExit: (code: number, signal: number) => void,
  ): { fd: number; pid: number; pty: string };
  resize(fd: number, cols: number, rows: number): void;
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

/**
 * Loads node-pty's native binding the way node-pty itself does (its requireBinary picks the
 * platform package and explains a missing one), after the package proper, so that a missing
 * install reads the same on every platform.
 */
export function loadUnixPtyBinding(requireModule: (id: string) => unknown): UnixPtyBinding {
  loadPtyModule(requireModule);
  let binding: Partial<UnixPtyBinding> | null;
  try {
    const { requireBinary } = requireModule(`${PTY_PACKAGE}/requireBinary.js`) as {
      requireBinary(file: string): unknown;
    };
    binding = requireBinary('pty.node') as Partial<UnixPtyBinding> | null;
  } catch (error) {
    throw ptyUnavailable(error);
  }
  if (typeof binding?.fork !== 'function' || typeof binding.resize !== 'function') {
    throw ptyUnavailable(new Error(`${PTY_PACKAGE}'s binary has no fork()/resize()`));
  }
  return binding as UnixPtyBinding;
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
