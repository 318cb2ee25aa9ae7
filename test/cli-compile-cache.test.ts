import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import module from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';

// The CLI's compile cache (issue 18): Node's default directory, os.tmpdir()/node-compile-cache, can
// be made by anyone first, and its entries are bytecode Node runs; the CLI keeps its own, private.
const hasCache = typeof (module as { enableCompileCache?: unknown }).enableCompileCache === 'function';
const isRoot = process.getuid?.() === 0;

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratch(): { xdg: string; tmp: string } {
  const root = mkdtempSync(join(tmpdir(), 'pw-ccache-'));
  made.push(root);
  const xdg = join(root, 'xdg');
  const tmp = join(root, 'tmp');
  mkdirSync(xdg, { mode: 0o700 });
  mkdirSync(tmp, { mode: 0o700 });
  return { xdg, tmp };
}

/** Cache entries Node wrote below `dir` (files in its per-version subdirectories). */
function entries(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

// `run --help` loads the run command's chunk after the cache is on, so a cache gets an entry.
const loadSomething = (env: Record<string, string>) =>
  runCli(['run', '--help'], {
    env: { NODE_COMPILE_CACHE: undefined, NODE_DISABLE_COMPILE_CACHE: undefined, ...env },
  });

describe('the CLI compile cache', () => {
  it.runIf(hasCache)(
    'lives in $XDG_CACHE_HOME/procwarden/compile-cache, mode 0700, and never in the shared tmpdir',
    async () => {
      const { xdg, tmp } = scratch();
      const r = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp });
      expect(r.status).toBe(0);
      const dir = join(xdg, 'procwarden', 'compile-cache');
      expect(entries(dir).length).toBeGreaterThan(0);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect(existsSync(join(tmp, 'node-compile-cache'))).toBe(false);
    },
  );

  it.runIf(hasCache)(
    'is not used below a directory others may write, nor in the shared tmpdir instead',
    async () => {
      const { xdg, tmp } = scratch();
      chmodSync(xdg, 0o777);
      const r = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp });
      expect(r.status).toBe(0);
      expect(entries(join(xdg, 'procwarden'))).toEqual([]);
      expect(existsSync(join(tmp, 'node-compile-cache'))).toBe(false);
    },
  );

  it.runIf(hasCache && isRoot)(
    'is not used below a directory another user owns (needs root to chown; skipped otherwise)',
    async () => {
      const { xdg, tmp } = scratch();
      chownSync(xdg, 65534, 65534);
      const r = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp });
      expect(r.status).toBe(0);
      expect(entries(join(xdg, 'procwarden'))).toEqual([]);
      expect(existsSync(join(tmp, 'node-compile-cache'))).toBe(false);
    },
  );

  it.runIf(hasCache)(
    'through a symlink, Node is given the real path, which a swap of the link cannot redirect',
    async () => {
      const { xdg, tmp } = scratch();
      const link = join(tmp, 'cache-link');
      symlinkSync(xdg, link);
      const r = await loadSomething({
        XDG_CACHE_HOME: link,
        TMPDIR: tmp,
        NODE_DEBUG_NATIVE: 'COMPILE_CACHE',
      });
      expect(r.status).toBe(0);
      expect(entries(join(xdg, 'procwarden', 'compile-cache')).length).toBeGreaterThan(0);
      // Node names every file it reads or writes: all below the real directory, none by the link.
      expect(r.stderr).toContain(join(realpathSync(xdg), 'procwarden', 'compile-cache'));
      expect(r.stderr).not.toContain(link);
    },
  );

  it.runIf(hasCache)(
    'an empty HOME (and no XDG_CACHE_HOME) puts nothing in the current directory',
    async () => {
      const { xdg, tmp } = scratch();
      const r = await runCli(['run', '--help'], {
        cwd: xdg,
        env: { HOME: '', XDG_CACHE_HOME: undefined, TMPDIR: tmp, NODE_COMPILE_CACHE: undefined },
      });
      expect(r.status).toBe(0);
      expect(readdirSync(xdg)).toEqual([]);
      expect(existsSync(join(tmp, 'node-compile-cache'))).toBe(false);
    },
  );

  it.runIf(hasCache)('NODE_DISABLE_COMPILE_CACHE turns it off', async () => {
    const { xdg, tmp } = scratch();
    const r = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp, NODE_DISABLE_COMPILE_CACHE: '1' });
    expect(r.status).toBe(0);
    expect(existsSync(join(xdg, 'procwarden'))).toBe(false);
  });

  it.runIf(!hasCache)('on a Node without a compile cache (20), nothing is made', async () => {
    const { xdg, tmp } = scratch();
    const r = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp });
    expect(r.status).toBe(0);
    expect(existsSync(join(xdg, 'procwarden'))).toBe(false);
    expect(existsSync(join(tmp, 'node-compile-cache'))).toBe(false);
  });
});
