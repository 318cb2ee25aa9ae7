import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';

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
