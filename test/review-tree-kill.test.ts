import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { LeakGuard, makeTmp } from './helpers/procs.js';

// Where procwarden/tree-kill, as built (dist/), behaved differently from tree-kill 1.2.2 for its
// users, without a reason given in docs/migrating.md.
const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');
const DIST = join(ROOT, 'dist');

const leaks = new LeakGuard();
afterEach(() => leaks.check());

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

  it('require() where every .js is run as CommonJS (Jest 29, its default mode): the function, which ends the tree', async () => {
    // Jest's module registry wraps each file as a CommonJS script, and an ES module then fails as a
    // SyntaxError (Unexpected token 'export'), not as ERR_REQUIRE_ESM; tree-kill, CommonJS, loads.
    const dir = leaks.trackDir(makeTmp('pw-tk-jestlike-'));
    const script = `
      const Module = require('node:module');
      const vm = require('node:vm');
      const fs = require('node:fs');
      const path = require('node:path');
      Module._extensions['.js'] = function (module, filename) {
        const wrapped = vm.runInThisContext(Module.wrap(fs.readFileSync(filename, 'utf8')), { filename });
        wrapped.call(module.exports, module.exports, (id) => module.require(id), module, filename, path.dirname(filename));
      };
      let kill;
      try {
        kill = require(${JSON.stringify(join(DIST, 'cjs', 'tree-kill.cjs'))});
      } catch (error) {
        console.log(JSON.stringify({ loaded: String(error) }));
        process.exit(0);
      }
      const sleep = require('node:child_process').spawn('sleep', ['300'], { stdio: 'ignore' });
      const ended = new Promise((resolve) => sleep.on('exit', (code, signal) => resolve(signal)));
      sleep.on('spawn', () => kill(sleep.pid, 'SIGTERM', async (error) => {
        console.log(JSON.stringify({ loaded: typeof kill, error: error ? String(error) : null, signal: await ended }));
      }));`;
    const { stdout } = await exec(process.execPath, ['-e', script], {
      env: { ...process.env, TK_REVIEW_MARK: dir },
      timeout: 30_000,
    });
    expect(JSON.parse(stdout)).toEqual({ loaded: 'function', error: null, signal: 'SIGTERM' });
  });
});
