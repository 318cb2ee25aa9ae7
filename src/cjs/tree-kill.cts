/**
 * `require('procwarden/tree-kill')`: the function itself, as `require('tree-kill')` is, and its
 * types as `export =` (what @types/tree-kill declares), so that `import kill = require(...)` type
 * checks under every `--module` (commonjs, node16, nodenext, preserve).
 *
 * One copy of procwarden per process wherever Node allows it: where require() loads an ES module
 * (Node 20.19+, 22.12+, 24) this hands out the ES module's own function (its `module.exports`
 * export), so a `ProcwardenError` it reports is the class `import('procwarden')` and
 * `require('procwarden')` give, and every caller shares the same state. Only where Node cannot
 * (older 20 and 22 releases: ERR_REQUIRE_ESM; a loader that runs each .js as CommonJS, as Jest's
 * does: a SyntaxError) does it load tree-kill-commonjs.cjs, the CommonJS
 * build of the same source; that build shares its chunks with the CLI, so the package carries no
 * second copy of the library for it. (There, `require('procwarden')` fails anyway; only a program
 * that also import()s the package holds two copies: check `error.code`, not `instanceof`, there.)
 *
 * tsc emits this file as dist/cjs/tree-kill.cjs and its types as dist/cjs/tree-kill.d.cts.
 * ASCII only (scripts/check-package.mjs).
 */
declare namespace treeKill {
  /** Called once the tree is extinct, with no argument; with an `Error` when it could not be. */
  export type TreeKillCallback = (error?: Error) => void;
}

/** tree-kill's call: `treeKill(pid, signal?, callback?)`, also `treeKill(pid, callback)`. */
interface TreeKill {
  (pid: number, callback?: treeKill.TreeKillCallback): void;
  (pid: number, signal?: string | number, callback?: treeKill.TreeKillCallback): void;
}

/** The ES module, as typed: a signature there that TreeKill lacks fails to type check here. */
type Esm = typeof import('../tree-kill.js', { with: { 'resolution-mode': 'import' }});

function load(): TreeKill {
  try {
    // The ES module's `module.exports` export: its treeKill. Node 20.17-20.18 and 22.0-22.11 with
    // --experimental-require-module hand out the namespace instead, that export ignored.
    const loaded = require('../tree-kill.js') as Esm['treeKill'] | Esm;
    return typeof loaded === 'function' ? loaded : loaded.treeKill;
  } catch (error) {
    // ERR_REQUIRE_ESM from Node; a SyntaxError (Unexpected token 'export') from a loader that runs
    // every .js file as CommonJS, as Jest's does unless told to load ES modules (Jest 29, and Jest
    // 30 where require() cannot load one). tree-kill is CommonJS and loads there.
    const failed = error as NodeJS.ErrnoException | null;
    if (failed?.code !== 'ERR_REQUIRE_ESM' && failed?.name !== 'SyntaxError') throw error;
    return (require('./tree-kill-commonjs.cjs') as Esm).treeKill;
  }
}

const treeKill: TreeKill = load();

export = treeKill;
