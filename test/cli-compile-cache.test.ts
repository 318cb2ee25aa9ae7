import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, runCli } from './helpers/cli.js';

// The CLI keeps V8's compiled code of its chunks (issue 18), on every Node: Node's default
// directory, os.tmpdir()/node-compile-cache, can be made by anyone first, and its entries are
// bytecode V8 runs; the CLI keeps its own, private one.
const isRoot = process.getuid?.() === 0;

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratch(): { root: string; xdg: string; tmp: string } {
  const root = mkdtempSync(join(tmpdir(), 'pw-ccache-'));
  made.push(root);
  const xdg = join(root, 'xdg');
  const tmp = join(root, 'tmp');
  mkdirSync(xdg, { mode: 0o700 });
  mkdirSync(tmp, { mode: 0o700 });
  return { root, xdg, tmp };
}

/** Files below `dir`, recursively. */
function entries(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

const cacheOf = (xdg: string) => join(xdg, 'procwarden', 'compile-cache');
const clean = { NODE_COMPILE_CACHE: undefined, NODE_DISABLE_COMPILE_CACHE: undefined };

// `timeout` with a bad duration loads the timeout command's chunk (and the library under it), fails
// at once with a usage error, and starts nothing.
const loadSomething = (env: Record<string, string | undefined>, script?: string) =>
  runCli(['timeout', '1e', 'true'], { env: { ...clean, ...env }, script });

describe('the CLI compile cache', () => {
  it('lives in $XDG_CACHE_HOME/procwarden/compile-cache, private, and never in the shared tmpdir', async () => {
    const { xdg, tmp } = scratch();
    const r = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp });
    expect(r.status).toBe(125);
    expect(r.stderr).toBe(
      "procwarden timeout: invalid time interval '1e'\nTry 'procwarden timeout --help' for more information.\n",
    );
    const files = entries(cacheOf(xdg));
    // The command's chunk and the library's, at least.
    expect(files.length).toBeGreaterThanOrEqual(2);
    expect(files.some((f) => /\.timeout-[^/]*\.cjs\.\d+-\d+-\d+$/.test(f))).toBe(true);
    expect(files.some((f) => /\.procwarden-[^/]*\.cjs\.\d+-\d+-\d+$/.test(f))).toBe(true);
    for (const f of files) {
      expect(statSync(f).mode & 0o777).toBe(0o600);
      expect(statSync(dirname(f)).mode & 0o777).toBe(0o700);
    }
    expect(statSync(cacheOf(xdg)).mode & 0o777).toBe(0o700);
    expect(existsSync(join(tmp, 'node-compile-cache'))).toBe(false);
  });

  it("is written when timeout dies of its command's signal (it leaves before any exit listener)", async () => {
    const { xdg, tmp } = scratch();
    const r = await runCli(['timeout', '5', 'sh', '-c', 'kill -TERM $$'], {
      env: { ...clean, XDG_CACHE_HOME: xdg, TMPDIR: tmp },
    });
    expect({ status: r.status, signal: r.signal }).toEqual({ status: null, signal: 'SIGTERM' });
    expect(entries(cacheOf(xdg)).some((f) => /\.timeout-[^/]*\.cjs\.\d+-\d+-\d+$/.test(f))).toBe(true);
  });

  it('a second start uses the entries as they are; a corrupt one is replaced and costs nothing else', async () => {
    const { xdg, tmp } = scratch();
    const env = { XDG_CACHE_HOME: xdg, TMPDIR: tmp };
    expect((await loadSomething(env)).status).toBe(125);
    const first = entries(cacheOf(xdg)).sort();
    const stamp = (f: string) => `${statSync(f).ino}:${statSync(f).mtimeMs}`;
    const before = first.map(stamp);
    expect((await loadSomething(env)).status).toBe(125);
    expect(entries(cacheOf(xdg)).sort()).toEqual(first);
    // Not rewritten: an entry V8 accepted is read, never written again.
    expect(first.map(stamp)).toEqual(before);

    const library = first.find((f) => /\.procwarden-/.test(f)) as string;
    writeFileSync(library, Buffer.alloc(4096, 0x5a), { mode: 0o600 });
    const r = await loadSomething(env);
    expect(r.status).toBe(125);
    expect(r.stderr).toContain('invalid time interval');
    // V8 rejected the garbage: the entry was written again, from the code this start compiled.
    expect(readFileSync(library).equals(Buffer.alloc(4096, 0x5a))).toBe(false);
    expect(statSync(library).size).toBeGreaterThan(4096);
  });

  it('a chunk edited in place runs as edited, not as cached, and the stale entry is removed', async () => {
    const { root, xdg, tmp } = scratch();
    // A copy of the built package: the CLI and its chunks, which this test may edit.
    const pkg = join(root, 'pkg');
    cpSync(join(dirname(CLI), '..'), join(pkg, 'dist'), { recursive: true });
    cpSync(join(dirname(CLI), '..', '..', 'package.json'), join(pkg, 'package.json'));
    const script = join(pkg, 'dist', 'cli', 'main.js');
    const env = { XDG_CACHE_HOME: xdg, TMPDIR: tmp };
    expect((await loadSomething(env, script)).stderr).toContain('invalid time interval');
    const cached = entries(cacheOf(xdg)).filter((f) => /\.timeout-/.test(f));
    expect(cached).toHaveLength(1);

    // The same length, so V8's own check (the source's length) cannot tell.
    const chunks = join(pkg, 'dist', 'cjs');
    const chunk = join(chunks, readdirSync(chunks).find((f) => /^timeout-.*\.cjs$/.test(f)) as string);
    const source = readFileSync(chunk, 'utf8');
    expect(source).toContain('invalid time interval');
    writeFileSync(chunk, source.replace('invalid time interval', 'invalid TIME interval'));
    expect(statSync(chunk).size).toBe(Buffer.byteLength(source));

    const r = await loadSomething(env, script);
    expect(r.stderr).toContain('procwarden timeout: invalid TIME interval');
    const now = entries(cacheOf(xdg)).filter((f) => /\.timeout-/.test(f));
    expect(now).toHaveLength(1);
    expect(now).not.toEqual(cached);
  });

  it('is not used below a directory others may write, nor in the shared tmpdir instead', async () => {
    const { xdg, tmp } = scratch();
    chmodSync(xdg, 0o777);
    const r = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp });
    expect(r.status).toBe(125);
    expect(entries(join(xdg, 'procwarden'))).toEqual([]);
    expect(existsSync(join(tmp, 'node-compile-cache'))).toBe(false);
  });

  it.runIf(isRoot)(
    'is not used below a directory another user owns (needs root to chown; skipped otherwise)',
    async () => {
      const { xdg, tmp } = scratch();
      chownSync(xdg, 65534, 65534);
      const r = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp });
      expect(r.status).toBe(125);
      expect(entries(join(xdg, 'procwarden'))).toEqual([]);
      expect(existsSync(join(tmp, 'node-compile-cache'))).toBe(false);
    },
  );

  it('through a symlink, the entries are in the real directory', async () => {
    const { xdg, tmp } = scratch();
    const link = join(tmp, 'cache-link');
    symlinkSync(xdg, link);
    const r = await loadSomething({ XDG_CACHE_HOME: link, TMPDIR: tmp });
    expect(r.status).toBe(125);
    expect(entries(cacheOf(xdg)).length).toBeGreaterThan(0);
  });

  // Node's recursive mkdir loops forever below a procfs directory: these hung until makeDirs.
  it('XDG_CACHE_HOME or XDG_STATE_HOME inside /proc: the command runs (uncached, unjournalled)', () => {
    for (const env of [{ XDG_CACHE_HOME: '/proc/self' }, { XDG_STATE_HOME: '/proc/self' }]) {
      const r = spawnSync(process.execPath, [CLI, 'timeout', '5', 'true'], {
        env: { ...process.env, ...clean, ...env },
        timeout: 20_000,
        killSignal: 'SIGKILL',
      });
      expect(r.signal, JSON.stringify(env)).toBeNull();
      expect(r.status, JSON.stringify(env)).toBe(0);
    }
  });

  it('an empty HOME (and no XDG_CACHE_HOME) puts nothing in the current directory', async () => {
    const { xdg, tmp } = scratch();
    const r = await runCli(['timeout'], {
      cwd: xdg,
      env: { ...clean, HOME: '', XDG_CACHE_HOME: undefined, TMPDIR: tmp },
    });
    expect(r.status).toBe(125);
    expect(readdirSync(xdg)).toEqual([]);
    expect(existsSync(join(tmp, 'node-compile-cache'))).toBe(false);
  });

  it('off with NODE_DISABLE_COMPILE_CACHE, with NODE_COMPILE_CACHE (Node’s own cache instead) and with source maps on', async () => {
    const { xdg, tmp } = scratch();
    const off = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp, NODE_DISABLE_COMPILE_CACHE: '1' });
    expect(off.status).toBe(125);
    expect(existsSync(join(xdg, 'procwarden'))).toBe(false);
    const nodes = join(tmp, 'nodes-own');
    const own = await loadSomething({ XDG_CACHE_HOME: xdg, TMPDIR: tmp, NODE_COMPILE_CACHE: nodes });
    expect(own.status).toBe(125);
    expect(existsSync(join(xdg, 'procwarden'))).toBe(false);
    // Node maps stack traces only of what its own loader compiled.
    const mapped = await loadSomething({
      XDG_CACHE_HOME: xdg,
      TMPDIR: tmp,
      NODE_OPTIONS: '--enable-source-maps',
    });
    expect(mapped.status).toBe(125);
    expect(existsSync(join(xdg, 'procwarden'))).toBe(false);
  });

  it('--version and --help make no cache: they load no command', async () => {
    const { xdg, tmp } = scratch();
    for (const args of [['--version'], ['--help']]) {
      const r = await runCli(args, { env: { ...clean, XDG_CACHE_HOME: xdg, TMPDIR: tmp } });
      expect(r.status).toBe(0);
    }
    expect(existsSync(join(xdg, 'procwarden'))).toBe(false);
  });
});
