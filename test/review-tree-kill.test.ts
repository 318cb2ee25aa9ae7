import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

// Where procwarden/tree-kill, as built (dist/), behaved differently from tree-kill 1.2.2 for its
// users, without a reason given in docs/migrating.md.
const ROOT = join(import.meta.dirname, '..');
const DIST = join(ROOT, 'dist');

describe.skipIf(process.platform !== 'linux')('procwarden/tree-kill where tree-kill’s users are', () => {
  it('its types parse with a TypeScript before 5.6: no string as an export name', () => {
    // `export { treeKill as 'module.exports' }` (an arbitrary module namespace name, TS 5.6+) in
    // dist/tree-kill.d.ts failed every ES module resolution (bundler, node16, nodenext) on TS 5.5 and
    // older with TS1003, skipLibCheck or not; tree-kill's own types parse on any version.
    for (const file of ['tree-kill.d.ts', join('cjs', 'tree-kill.d.cts')]) {
      const types = readFileSync(join(DIST, file), 'utf8');
      expect({ file, stringNames: types.match(/\bas\s+(['"]).*?\1/g) ?? [] }).toEqual({
        file,
        stringNames: [],
      });
      expect(types).toMatch(/treeKill/);
    }
    // The runtime export stays: require(esm) hands out the function through it.
    expect(readFileSync(join(DIST, 'tree-kill.js'), 'utf8')).toMatch(/as "module\.exports"/);
  });
});
