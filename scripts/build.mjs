// `npm run build`: tsc's emit, then rolldown.config.mjs's builds in order, through rolldown's API.
// Quiet: rolldown's CLI lists every chunk it writes (about 40 lines a build, burying what matters);
// here only what rolldown reports as a warning or an error is printed, and tsc's errors.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { rolldown } from 'rolldown';

const root = join(import.meta.dirname, '..');
process.chdir(root);
rmSync('dist', { recursive: true, force: true });

const tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');
try {
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
} catch {
  // tsc printed its errors.
  process.exit(1);
}

const { default: configs } = await import('../rolldown.config.mjs');
for (const { output, ...input } of configs) {
  const build = await rolldown(input);
  try {
    await build.write(output);
  } finally {
    await build.close();
  }
}

// A name the rolled-up declarations export as a value must be one the module exports at run time:
// rolldown-plugin-dts drops the `type` of `export type { LiveSession }`, and a consumer's
// `instanceof LiveSession` then compiled and failed to load. What the JS lacks is re-marked `type`.
for (const entry of ['index', 'tree-kill']) {
  const file = join('dist', `${entry}.d.ts`);
  const runtime = new Set(Object.keys(await import(pathToFileURL(join(root, 'dist', `${entry}.js`)).href)));
  const text = readFileSync(file, 'utf8');
  const fixed = text.replace(/^export \{([^}]*)\};$/m, (_, list) => {
    const names = list
      .split(',')
      .map((n) => n.trim())
      .filter(Boolean);
    const marked = names.map((n) =>
      n.startsWith('type ') || runtime.has(n.split(/\s+as\s+/).pop()) ? n : `type ${n}`,
    );
    return `export { ${marked.join(', ')} };`;
  });
  writeFileSync(file, fixed);
}
