import { homedir, tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { ProcwardenError, showValue } from '../errors.js';

/**
 * Where run records live: PROCWARDEN_STATE_DIR, else $XDG_STATE_HOME/procwarden, else
 * ~/.local/state/procwarden. A relative XDG_STATE_HOME is ignored, as the XDG spec requires.
 */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.PROCWARDEN_STATE_DIR) return resolve(env.PROCWARDEN_STATE_DIR);
  const xdg = env.XDG_STATE_HOME;
  if (xdg && isAbsolute(xdg)) return join(xdg, 'procwarden');
  return join(homedir(), '.local', 'state', 'procwarden');
}

/**
 * A state directory the caller gave: made absolute once, here, so that a later `process.chdir()`
 * cannot scatter one supervisor's records over two directories, and so that the watchdog (which
 * may start in another directory) reads where the records are. An empty string is refused: it
 * would put records in whatever the current directory is.
 */
export function checkStateDir(value: unknown, what = 'stateDir'): string {
  if (typeof value !== 'string' || value === '' || value.includes('\0')) {
    throw new ProcwardenError(
      'INVALID_OPTION',
      `${what}: ${showValue(value)} is not a directory path; give a non-empty path, or leave it out for the default (${defaultStateDir()}).`,
    );
  }
  return resolve(value);
}

/**
 * Where records go when the state directory takes none (full, read-only, not ours, a HOME that does
 * not exist): private places of this user, tried in order. A record must be somewhere the host's
 * guard reads before its run's process exists; where is secondary.
 */
export function fallbackDirs(env: NodeJS.ProcessEnv = process.env): string[] {
  const uid = process.getuid?.() ?? 'user';
  const runtime = env.XDG_RUNTIME_DIR;
  return [
    ...(runtime && isAbsolute(runtime) ? [join(runtime, 'procwarden')] : []),
    join(tmpdir(), `procwarden-${uid}`),
  ];
}
