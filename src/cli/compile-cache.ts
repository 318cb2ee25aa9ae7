import { mkdirSync, realpathSync } from 'node:fs';
import module from 'node:module';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { untrustedDir } from '../journal/trust.js';

type EnableCompileCache = (directory: string) => unknown;

/**
 * Where the CLI keeps Node's compiled code: $XDG_CACHE_HOME/procwarden/compile-cache, else
 * ~/.cache/procwarden/compile-cache. Not Node's default, os.tmpdir()/node-compile-cache: anyone can
 * create that directory first, and a cache entry is bytecode that Node runs after checks anyone can
 * forge (CRC32 sums), so another user of the machine could run code as whoever runs procwarden.
 */
function compileCacheDir(env: NodeJS.ProcessEnv = process.env): string | null {
  const xdg = env.XDG_CACHE_HOME;
  const base = xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.cache');
  // An empty or relative HOME would put it in whatever directory the command runs in.
  return isAbsolute(base) ? join(base, 'procwarden', 'compile-cache') : null;
}

/**
 * Turns on Node's module compile cache (module.enableCompileCache, Node 22.8+; older Nodes have
 * none and nothing is done) in compileCacheDir(), when that directory and every one above it could
 * only have been written by this user or root (the journal's rule). Otherwise, or when the
 * directory cannot be made, the CLI runs uncached: slower by a few milliseconds, never by someone
 * else's code. NODE_COMPILE_CACHE and NODE_DISABLE_COMPILE_CACHE are Node's, read before this
 * runs; they win.
 */
export function enablePrivateCompileCache(env: NodeJS.ProcessEnv = process.env): string | null {
  const enable = (module as { enableCompileCache?: EnableCompileCache }).enableCompileCache;
  if (enable === undefined || env.NODE_DISABLE_COMPILE_CACHE || env.NODE_COMPILE_CACHE) return null;
  let dir: string;
  try {
    const wanted = compileCacheDir(env);
    if (wanted === null) return null;
    mkdirSync(wanted, { recursive: true, mode: 0o700 });
    // Node opens its entries by the path it is given, again at every load: given a path through a
    // symlink, it would follow whatever the link says by then. The real path, once trusted, has no
    // component anyone else could replace.
    dir = realpathSync(wanted);
    if (untrustedDir(dir) !== null) return null;
  } catch {
    return null;
  }
  enable(dir);
  return dir;
}
