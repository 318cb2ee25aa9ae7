import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * vitest globalSetup: many tests load the package as built (dist/), and a clone no longer builds
 * on `npm ci` (no `prepare`: it would run on a consumer's install too). `npm test` builds in its
 * lint step; a test file run on its own in a fresh clone builds here, once, when dist/ has no
 * entry. A dist/ older than src/ is not detected: `npm run build` after changing src/.
 */
export default function setup(): void {
  const root = join(import.meta.dirname, '..', '..');
  if (existsSync(join(root, 'dist', 'index.js'))) return;
  execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { stdio: 'inherit' });
}
