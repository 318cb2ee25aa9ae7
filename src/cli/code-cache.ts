import {
  closeSync,
  fsyncSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire, Module } from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { Script, constants as vmConstants } from 'node:vm';
import { untrustedDir } from '../journal/trust.js';
import { makeDirs } from '../make-dirs.js';

/**
 * Where the CLI keeps the compiled code of its own files: $XDG_CACHE_HOME/procwarden/compile-cache,
 * else ~/.cache/procwarden/compile-cache. Not Node's default, os.tmpdir()/node-compile-cache:
 * anyone can create that directory first, and a cache entry is bytecode that V8 runs after checks
 * anyone can forge, so another user of the machine could run code as whoever runs procwarden.
 */
function cacheBase(env: NodeJS.ProcessEnv): string | null {
  const xdg = env.XDG_CACHE_HOME;
  const base = xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.cache');
  // An empty or relative HOME would put it in whatever directory the command runs in.
  return isAbsolute(base) ? join(base, 'procwarden', 'compile-cache') : null;
}

/** The cache directory for this V8, made private if new; null when it is not ours alone. */
function privateDir(env: NodeJS.ProcessEnv): string | null {
  try {
    const base = cacheBase(env);
    if (base === null) return null;
    // One directory per V8: entries of another are rejected anyway, and two Nodes sharing one
    // name would overwrite each other's at every start.
    const wanted = join(base, `v8-${process.versions.v8}-${process.arch}`);
    makeDirs(wanted, 0o700);
    // Entries are opened by this path, again at every start: once every name and link on the way
    // is trusted, no component of it can be replaced by anyone else.
    return untrustedDir(wanted) === null ? realpathSync.native(wanted) : null;
  } catch {
    return null;
  }
}

/** A short name for the directory a chunk is in: two installed copies keep apart entries. */
function dirKey(dir: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < dir.length; i++) h = Math.imul(h ^ dir.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(36);
}

/**
 * Which version of a chunk an entry is for. V8 checks an entry against the source's length only,
 * so a chunk edited in place (a patched node_modules) must get a new name, not the old bytecode.
 */
function entryName(file: string, content?: string): string | null {
  try {
    const st = statSync(file);
    // Node read the file before this stat: one replaced in between is not named for what ran.
    if (content !== undefined && st.size !== Buffer.byteLength(content)) return null;
    // No dot after the chunk's own name: persist() finds the chunk again by the last one.
    return `${dirKey(dirname(file))}.${basename(file)}.${st.size}-${st.ino}-${Math.round(st.mtimeMs * 1e3)}`;
  } catch {
    return null;
  }
}

interface Pending {
  script: Script;
  file: string;
  entry: string;
}

/** How old a temporary file must be to be another writer's leftover, not its work in progress. */
const STALE_TMP_MS = 60_000;

/**
 * Writes the entries this process lacked, and removes those of chunks that are gone or changed.
 * V8 checks an entry's header and length, not its payload: a torn write (power lost before the
 * data reached the disk) would crash every later start. So the data is synced before the rename
 * makes it an entry.
 */
function persist(dir: string, pending: Pending[]): void {
  for (const { script, entry } of pending) {
    const tmp = join(dir, `.${entry}.${process.pid}`);
    try {
      const fd = openSync(tmp, 'w', 0o600);
      try {
        writeFileSync(fd, script.createCachedData());
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, join(dir, entry));
    } catch {
      // A full or read-only disk costs the next start its cache, nothing more.
      quietly(() => rmSync(tmp, { force: true }));
    }
  }
  const chunks = new Map(pending.map(({ file }) => [dirname(file), dirKey(dirname(file))]));
  // Stale entries are only disk space: whatever fails here is left for another start.
  for (const name of quietly(() => readdirSync(dir)) ?? []) {
    for (const [chunkDir, key] of chunks) {
      const path = join(dir, name);
      if (name.startsWith(`.${key}.`)) {
        // A writer killed between its write and its rename.
        quietly(() => Date.now() - statSync(path).mtimeMs > STALE_TMP_MS && rmSync(path, { force: true }));
      } else if (name.startsWith(`${key}.`)) {
        const chunk = name.slice(key.length + 1).replace(/\.[^.]*$/, '');
        if (entryName(join(chunkDir, chunk)) !== name) quietly(() => rmSync(path, { force: true }));
      }
    }
  }
}

/** Runs `fn`; a throw is dropped. At exit there is nobody to tell, and our status must not change. */
function quietly<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}

type Compile = (this: Module, content: string, filename: string, ...rest: unknown[]) => unknown;

/**
 * Keeps V8's compiled code of the CLI's own chunks (dist/cjs/*.cjs) between starts, on every Node.
 * Node's own cache (module.enableCompileCache) is 22.8+ only and stores code as compiled at load,
 * before it runs; an entry written here at exit holds the functions the command ran as well,
 * which V8 would otherwise compile again at every start: twice the saving (about 10 ms of a
 * `procwarden timeout` on Node 20). Only files in the chunks' own directory go this way; anything
 * else loads as Node loads it. Off when NODE_DISABLE_COMPILE_CACHE is set, when NODE_COMPILE_CACHE
 * asks for Node's own cache, when source maps are on (Node maps only what its loader compiled), and
 * when the directory is not private to this user.
 */
export function cacheOwnCode(
  chunksDir: string = ownChunksDir(),
  env: NodeJS.ProcessEnv = process.env,
): string | null {
  if (env.NODE_DISABLE_COMPILE_CACHE || env.NODE_COMPILE_CACHE) return null;
  if ((process as { sourceMapsEnabled?: boolean }).sourceMapsEnabled) return null;
  const dir = privateDir(env);
  if (dir === null) return null;
  const pending: Pending[] = [];
  const proto = Module.prototype as unknown as { _compile: Compile };
  const compile = proto._compile;
  proto._compile = function (this: Module, content: string, filename: string, ...rest: unknown[]) {
    if (dirname(filename) !== chunksDir) return compile.call(this, content, filename, ...rest);
    const entry = entryName(filename, content);
    let cachedData: Buffer | undefined;
    try {
      if (entry !== null) cachedData = readFileSync(join(dir, entry));
    } catch {
      // Not cached yet: compiled from source, and cached at exit.
    }
    const script = new Script(Module.wrap(content), {
      filename,
      cachedData,
      // No chunk calls import() today; one that did would need Node 20.12+ (vm.constants).
      importModuleDynamically: vmConstants?.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    });
    if (entry !== null && (cachedData === undefined || script.cachedDataRejected)) {
      if (pending.length === 0) {
        // At the loop's end, not only at 'exit': timeout, dying of its command's signal, leaves
        // from 'beforeExit' (dieOfAtExit), and no 'exit' listener runs then.
        const save = () => {
          const batch = pending.splice(0);
          if (batch.length > 0) quietly(() => persist(dir, batch));
        };
        process.once('beforeExit', save);
        process.once('exit', save);
      }
      pending.push({ script, file: filename, entry });
    }
    const wrapper = script.runInThisContext({ displayErrors: true });
    return wrapper.call(
      this.exports,
      this.exports,
      createRequire(filename),
      this,
      filename,
      dirname(filename),
    );
  };
  return dir;
}

/**
 * dist/cjs, where the CLI's chunks are: this file is one of them when bundled, dist/cli/code-cache.js
 * when not. import.meta.dirname, not a URL: parsing the first URL of a process costs 1 ms.
 */
const ownChunksDir = (): string => join(import.meta.dirname, '..', 'cjs');
