import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformWithOxc } from 'vite';
import { afterAll, describe, expect, it } from 'vitest';
import { alive, killEach, makeTmp } from './helpers/procs.js';

/**
 * Every TypeScript example in README.md and docs/*.md is run as it is written: types stripped,
 * `procwarden` resolved to this package's build (a package may import itself by name), each in its
 * own Node process. An example that needs a setup says so in its own text; none is skipped here.
 */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, '.docs-examples');

interface Example {
  page: string;
  line: number;
  code: string;
}

function examples(): Example[] {
  const pages = [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  const out: Example[] = [];
  for (const page of pages) {
    const lines = readFileSync(join(ROOT, page), 'utf8').split('\n');
    let start = -1;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] ?? '';
      if (start < 0 && /^```ts\s*$/.test(line)) start = i;
      else if (start >= 0 && /^```\s*$/.test(line)) {
        out.push({ page, line: start + 1, code: lines.slice(start + 1, i).join('\n') });
        start = -1;
      }
    }
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

function runNode(file: string, env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, [file], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c;
    });
    child.stderr.on('data', (c: Buffer) => {
      out += c;
    });
    child.on('close', (code) => resolve({ code, out }));
  });
}

const all = examples();
mkdirSync(OUT, { recursive: true });
afterAll(() => rmSync(OUT, { recursive: true, force: true }));

describe('documentation examples', () => {
  it('there are examples to run', () => {
    expect(all.length).toBeGreaterThan(5);
  });

  for (const ex of all) {
    it(`${ex.page}:${ex.line} runs`, async () => {
      const { code } = await transformWithOxc(ex.code, 'example.ts', { lang: 'ts' });
      const file = join(OUT, `${ex.page.replace(/[/.]/g, '_')}-${ex.line}.mjs`);
      writeFileSync(file, code);
      const token = `PW_DOCS_EXAMPLE=${process.pid}-${ex.line}-${Date.now()}`;
      const stateDir = makeTmp('pw-docs-state-');
      try {
        const [name, value] = token.split('=') as [string, string];
        const r = await runNode(file, { ...process.env, [name]: value, PROCWARDEN_STATE_DIR: stateDir });
        expect(r.code, r.out).toBe(0);
      } finally {
        // A supervisor's watchdog outlives its host by design, for as long as its reap takes.
        const until = Date.now() + 15_000;
        while (holders(token).length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
        const left = holders(token);
        killEach(left);
        rmSync(stateDir, { recursive: true, force: true });
        expect(left, 'processes the example left alive').toEqual([]);
      }
    }, 60_000);
  }
});
