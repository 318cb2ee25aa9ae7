// `npm run build`: tsc's emit, then rolldown.config.mjs's builds in order, through rolldown's API.
// Quiet: rolldown's CLI lists every chunk it writes (about 40 lines a build, burying what matters);
// here only what rolldown reports as a warning or an error is printed, and tsc's errors.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
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
