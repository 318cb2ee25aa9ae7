import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformWithOxc } from 'vite';
import { afterAll, describe, expect, it } from 'vitest';
import { alive, killEach, makeTmp } from './helpers/procs.js';

/**
 * Every code example in README.md and docs/*.md is run as it is written, so that none can drift.
 *
 * - ```ts blocks: types stripped, `procwarden` resolved to this package's build (a package may
 *   import itself by name), each in its own Node process from the repository's root; exit 0.
 * - ```sh, ```bash, ```shell and ```console blocks (in `console`, the `$ ` lines): one `bash -e -o
 *   pipefail` script each, in a fresh temporary directory, with the built CLI first on PATH as
 *   `procwarden` and a private state directory. Exit 0, or the status a `<!-- exit: N -->` line
 *   right above the fence names.
 * - ```text and ```diff blocks are listings, never run. A ```text block right after an example
 *   with `<!-- output -->` above its fence is that example's output: the example must print
 *   exactly that (trailing spaces ignored).
 * - A block that cannot run here says so with `<!-- not run: why -->` right above its fence; the
 *   test lists every such block with its reason. A fence without a language fails the test.
 *
 * Every block that started processes ends by checking that none of them is alive.
 */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, '.docs-examples');
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const SHELLS = new Set(['sh', 'bash', 'shell', 'console']);
const LISTINGS = new Set(['text', 'diff']);
/** A shell example's loose bound: a block that runs longer is killed and fails. */
const SHELL_BOUND_MS = 45_000;

interface Block {
  page: string;
  line: number;
  lang: string;
  code: string;
  notRun?: string;
  exit: number;
  /** The documented output: the ```text block marked `<!-- output -->` that follows. */
  output?: string;
}

const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];

function blocks(): Block[] {
  const out: Block[] = [];
  for (const page of PAGES) {
    const lines = readFileSync(join(ROOT, page), 'utf8').split('\n');
    let open: { line: number; lang: string; marks: string[] } | undefined;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] ?? '';
      if (!open) {
        const m = /^```(\S*)\s*$/.exec(line);
        if (!m) continue;
        // The HTML comments right above the fence (blank lines between are allowed).
        const marks: string[] = [];
        for (let j = i - 1; j >= 0; j--) {
          const above = (lines[j] ?? '').trim();
          if (above === '') continue;
          if (!/^<!--.*-->$/.test(above)) break;
          marks.push(above.slice(4, -3).trim());
        }
        open = { line: i + 1, lang: m[1] ?? '', marks };
      } else if (/^```\s*$/.test(line)) {
        const code = lines.slice(open.line, i).join('\n');
        const notRun = open.marks.find((m) => m.startsWith('not run:'));
        const exit = open.marks.find((m) => /^exit: \d+$/.test(m));
        const block: Block = {
          page,
          line: open.line,
          lang: open.lang,
          code,
          exit: exit ? Number(exit.slice(6)) : 0,
        };
        if (notRun) block.notRun = notRun.slice('not run:'.length).trim();
        const previous = out.at(-1);
        if (open.marks.includes('output')) {
          if (open.lang !== 'text' || !previous || previous.page !== page) {
            throw new Error(
              `${page}:${open.line}: <!-- output --> marks a \`\`\`text block after an example`,
            );
          }
          previous.output = code;
        }
        out.push(block);
        open = undefined;
      }
    }
    if (open) throw new Error(`${page}:${open.line}: fence never closed`);
  }
  return out;
}

/** Live processes whose environment holds NAME=value: what an example left behind. */
function holders(entry: string): number[] {
  const needle = Buffer.from(entry);
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`);
      const at = env.indexOf(needle);
      if (at >= 0 && (at === 0 || env[at - 1] === 0) && alive(Number(name))) found.push(Number(name));
    } catch {
      // gone or unreadable
    }
  }
  return found;
}

function runProcess(argv: [string, ...string[]], cwd: string, env: NodeJS.ProcessEnv, boundMs: number) {
  return new Promise<{ code: number | null; stdout: string; out: string }>((resolve) => {
    // Its own group, so that a block that overruns its bound is ended with all it started.
    const child = spawn(argv[0], argv.slice(1), {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c;
      out += c;
    });
    child.stderr.on('data', (c: Buffer) => {
      out += c;
    });
    const timer = setTimeout(() => {
      out += `\n[killed: still running after ${boundMs} ms]`;
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, boundMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, out });
    });
  });
}

/** Output as documented: trailing spaces and trailing blank lines do not count. */
const normalise = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
    .trimEnd();

/** Runs a block with a private state dir and a cookie of its own; asserts nothing it started lives on. */
async function runBlock(
  ex: Block,
  start: (env: NodeJS.ProcessEnv) => Promise<{ code: number | null; stdout: string; out: string }>,
) {
  const token = `PW_DOCS_EXAMPLE=${process.pid}-${ex.line}-${Date.now()}`;
  const stateDir = makeTmp('pw-docs-state-');
  try {
    const [name, value] = token.split('=') as [string, string];
    const r = await start({ ...process.env, [name]: value, PROCWARDEN_STATE_DIR: stateDir });
    expect(r.code, r.out).toBe(ex.exit);
    if (ex.output !== undefined)
      expect(normalise(r.stdout), 'the documented output').toBe(normalise(ex.output));
  } finally {
    // A supervisor's watchdog outlives its host by design, for as long as its reap takes.
    const until = Date.now() + 15_000;
    while (holders(token).length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    const left = holders(token);
    killEach(left);
    rmSync(stateDir, { recursive: true, force: true });
    expect(left, 'processes the example left alive').toEqual([]);
  }
}

/** A console block's commands are its `$ ` lines; the others are output. */
const shellScript = (ex: Block) =>
  ex.lang === 'console'
    ? ex.code
        .split('\n')
        .filter((l) => l.startsWith('$ '))
        .map((l) => l.slice(2))
        .join('\n')
    : ex.code;

const all = blocks();
const runnable = all.filter((b) => !b.notRun && !LISTINGS.has(b.lang));
const notRun = all.filter((b) => b.notRun);
mkdirSync(OUT, { recursive: true });
const BIN = join(OUT, 'bin');
mkdirSync(BIN, { recursive: true });
if (!existsSync(join(BIN, 'procwarden'))) symlinkSync(CLI, join(BIN, 'procwarden'));
afterAll(() => rmSync(OUT, { recursive: true, force: true }));

describe('documentation examples', () => {
  it('every block is an example of a known kind, a listing, or marked as not run with a reason', () => {
    const unknown = all.filter((b) => b.lang !== 'ts' && !SHELLS.has(b.lang) && !LISTINGS.has(b.lang));
    expect(
      unknown.map((b) => `${b.page}:${b.line} \`\`\`${b.lang}`),
      'fence each block as ts, sh, bash, console, text or diff',
    ).toEqual([]);
    expect(notRun.filter((b) => !b.notRun?.length).map((b) => `${b.page}:${b.line}`)).toEqual([]);
    expect(runnable.filter((b) => b.lang === 'ts').length).toBeGreaterThan(5);
    expect(runnable.filter((b) => SHELLS.has(b.lang)).length).toBeGreaterThan(2);
    // Deliberately not run, each with its reason: printed so that a skip is never silent.
    console.log(
      `docs examples: ${runnable.filter((b) => b.lang === 'ts').length} ts and ${
        runnable.filter((b) => SHELLS.has(b.lang)).length
      } shell run; ${notRun.length} not run:\n${notRun.map((b) => `  ${b.page}:${b.line} (${b.lang}): ${b.notRun}`).join('\n')}`,
    );
  });

  it('the outputs that docs document are checked (the terminateTree example among them)', () => {
    expect(all.filter((b) => b.output !== undefined && !b.notRun).map((b) => b.page)).toContain(
      'docs/containment.md',
    );
  });

  // Run, an example proves its code; compiled against the published declarations as a strict
  // consumer compiles it, it proves its types too (an `argv` built as a string[] ran and did not
  // compile).
  it('every ts example type-checks against the published declarations, strict', () => {
    const dir = join(OUT, 'types');
    mkdirSync(dir, { recursive: true });
    const examples = all.filter((b) => b.lang === 'ts');
    for (const ex of examples)
      writeFileSync(join(dir, `${ex.page.replace(/[/.]/g, '_')}-${ex.line}.mts`), ex.code);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          skipLibCheck: false,
          module: 'nodenext',
          target: 'es2022',
          types: ['node'],
          typeRoots: [join(ROOT, 'node_modules', '@types')],
          noEmit: true,
        },
        include: ['*.mts'],
      }),
    );
    const tsc = spawnSync(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir],
      {
        encoding: 'utf8',
      },
    );
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(examples.length).toBeGreaterThan(5);
  }, 60_000);

  for (const ex of runnable.filter((b) => b.lang === 'ts')) {
    it(`${ex.page}:${ex.line} runs`, async () => {
      const { code } = await transformWithOxc(ex.code, 'example.ts', { lang: 'ts' });
      const file = join(OUT, `${ex.page.replace(/[/.]/g, '_')}-${ex.line}.mjs`);
      writeFileSync(file, code);
      await runBlock(ex, (env) => runProcess([process.execPath, file], ROOT, env, SHELL_BOUND_MS));
    }, 60_000);
  }

  for (const ex of runnable.filter((b) => SHELLS.has(b.lang))) {
    it(`${ex.page}:${ex.line} (${ex.lang}) runs and exits ${ex.exit}`, async () => {
      const dir = makeTmp('pw-docs-sh-');
      const file = join(dir, '.example.sh');
      writeFileSync(file, `${shellScript(ex)}\n`);
      try {
        await runBlock(ex, (env) =>
          runProcess(
            ['bash', '-e', '-o', 'pipefail', file],
            dir,
            { ...env, PATH: `${BIN}:${env.PATH ?? ''}` },
            SHELL_BOUND_MS,
          ),
        );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 60_000);
  }
});

describe('documentation links', () => {
  /** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
  const slug = (heading: string) =>
    heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
  const anchors = new Map<string, Set<string>>();
  const anchorsOf = (page: string) => {
    let set = anchors.get(page);
    if (!set) {
      set = new Set();
      const seen = new Map<string, number>();
      let fenced = false;
      for (const line of readFileSync(join(ROOT, page), 'utf8').split('\n')) {
        if (line.startsWith('```')) fenced = !fenced;
        const m = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
        if (!m) continue;
        const base = slug(m[1] ?? '');
        const n = seen.get(base) ?? 0;
        seen.set(base, n + 1);
        set.add(n === 0 ? base : `${base}-${n}`);
      }
      anchors.set(page, set);
    }
    return set;
  };

  it('every relative link in README.md and docs/*.md names a file that exists, and a heading in it', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      let fenced = false;
      const lines = readFileSync(join(ROOT, page), 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (line.startsWith('```')) fenced = !fenced;
        if (fenced) return;
        for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
          const target = m[1] ?? '';
          if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
          const [path = '', anchor] = target.split('#');
          const file = path === '' ? page : join(dirname(page), path);
          if (!existsSync(join(ROOT, file))) broken.push(`${page}:${i + 1}: ${target} (no such file)`);
          else if (anchor !== undefined && file.endsWith('.md') && !anchorsOf(file).has(anchor)) {
            broken.push(`${page}:${i + 1}: ${target} (no such heading)`);
          }
        }
      });
    }
    expect(broken).toEqual([]);
  });
});
