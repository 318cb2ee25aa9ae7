// The published entry points in as few files as possible: Node's ESM loader pays per file (resolve,
// stat, read, link), and over the ~65 modules of the library that cost `procwarden timeout` more
// than its own work. tsc still emits every module into dist/ first (the benches and some tests
// measure internals), and its .d.ts files into dist/.types/; these bundles then replace the entry
// files, and the last builds roll the declarations up into one file per public entry.
//
// `npm run build` runs this through scripts/build.mjs, which prints warnings only (the CLI,
// `rolldown -c`, lists every chunk).
//
// The library is ESM. The CLI is CommonJS: a program that imports nothing by ES module never starts
// Node's ESM loader, 8-12 ms of every `procwarden timeout` on Node 20 (an empty .mjs file costs
// that), and `require` of a builtin builds no facade. It keeps its path, dist/cli/main.js: a
// package.json of type commonjs in dist/cli/ says what it is, so links users made keep working.
import { chmodSync, copyFileSync, rmSync, writeFileSync } from 'node:fs';
import MagicString from 'magic-string';
import { defineConfig } from 'rolldown';
import { dts } from 'rolldown-plugin-dts';

const CLI = 'dist/cli/main.js';
/** Where tsc's declarations wait to be rolled up (tsconfig.build.json's declarationDir). */
const STAGED = 'dist/.types';

const shared = {
  platform: 'node',
  external: [/^node:/, '@lydell/node-pty'],
  tsconfig: 'tsconfig.build.json',
};

// Every output is ASCII: one non-ASCII character (a '→' in a message) makes Node hold the whole
// file as a two-byte string, and decoding the library chunk took 3.4 ms of `import('procwarden')`
// instead of 1.7. Strings get \u escapes; the JSDoc goes (the .d.ts files carry it, and the
// bundles keep no other comment). scripts/check-package.mjs fails the build that is not ASCII.
const ascii = { charset: 'ascii', comments: { legal: true, annotation: true, jsdoc: false } };

// Chunks sit two levels below the package root, as dist/cli/ is: the `import.meta.url`-relative
// paths (../../package.json, ../index.js, ../watchdog/main.cjs) resolve the same from a chunk as from
// its source. The library is one shared chunk (one file for the ESM loader).
const library = { name: 'procwarden', test: /[\\/]src[\\/](?!cli[\\/])/, priority: 1 };

// The CLI: each command in its own chunk, loaded only when named; option parsing apart, for the
// commands; and what the code cache needs before it can cache anything (the directory trust check,
// mkdir -p), which must not pull the library in: what loads before the cache is on is not cached.
// tree-kill.ts stays out of the library chunk here: the CLI never runs it, and its CommonJS entry
// (below) holds it.
const cliGroups = [
  { name: 'trust', test: /[\\/]src[\\/](journal[\\/]trust|make-dirs)\.ts/, priority: 3 },
  { name: 'options', test: /[\\/]src[\\/](options[\\/]|errors\.ts)/, priority: 2 },
  { ...library, test: /[\\/]src[\\/](?!cli[\\/]|tree-kill\.ts)/ },
];

export default defineConfig([
  {
    ...shared,
    input: {
      index: 'src/index.ts',
      'tree-kill': 'src/tree-kill.ts',
    },
    output: {
      dir: 'dist',
      format: 'esm',
      sourcemap: true,
      entryFileNames: '[name].js',
      chunkFileNames: 'chunks/[name]-[hash].js',
      ...ascii,
      codeSplitting: { groups: [library] },
    },
    plugins: [builtinsWithoutFacades()],
  },
  {
    ...shared,
    // dist/cjs/tree-kill-commonjs.cjs: procwarden/tree-kill for the Node releases whose require()
    // cannot load an ES module; dist/cjs/tree-kill.cjs (tsc's, from src/cjs/tree-kill.cts) loads
    // it only there. Built here, it shares the CLI's chunks: no second copy of the library ships.
    input: { 'cli/main': 'src/cli/main.ts', 'cjs/tree-kill-commonjs': 'src/tree-kill.ts' },
    output: {
      dir: 'dist',
      format: 'cjs',
      // The ES module build is strict by definition; a CommonJS one only if it says so.
      strict: true,
      sourcemap: true,
      entryFileNames: (chunk) => (chunk.name === 'cli/main' ? '[name].js' : '[name].cjs'),
      // exports.treeKill, exports.default: what the entry above takes is named.
      exports: 'named',
      chunkFileNames: 'cjs/[name]-[hash].cjs',
      ...ascii,
      codeSplitting: { groups: cliGroups },
    },
    plugins: [
      {
        // A clone's build must run as installed packages do: `./dist/cli/main.js`, or a `timeout`
        // link to it, needs the run bit (npm sets it only when it installs a package).
        name: 'cli-commonjs-bin',
        writeBundle() {
          writeFileSync('dist/cli/package.json', '{ "type": "commonjs" }\n');
          chmodSync(CLI, 0o755);
        },
      },
    ],
  },
  {
    // Started by a host's guard once the host has died, found at this path: one CommonJS file of what
    // reap needs (not the library's 200 KB), its lazy parts inlined so that its first statement (the
    // signals it ignores) runs before anything else loads.
    ...shared,
    input: { 'watchdog/main': 'src/watchdog/main.ts' },
    output: {
      dir: 'dist',
      format: 'cjs',
      strict: true,
      sourcemap: true,
      entryFileNames: '[name].cjs',
      codeSplitting: false,
      ...ascii,
    },
  },
  // The types a consumer sees: tsc's declarations of every module (dist/.types/) rolled up into
  // one self-contained file per public entry, so that only the public API ships. A consumer that
  // type checks its libraries (skipLibCheck: false, exactOptionalPropertyTypes) used to check every
  // internal module's declarations, and failed in one of them. Each entry is its own build: a
  // shared chunk would be one more file, and not one per entry.
  types('index'),
  {
    ...types('tree-kill'),
    plugins: [
      ...types('tree-kill').plugins,
      {
        // require('procwarden/tree-kill')'s types are tsc's, already one file (`export =`, no
        // import); then the staging folder goes, so that dist/ holds only the shipped types.
        name: 'types-staging-done',
        writeBundle() {
          copyFileSync(`${STAGED}/cjs/tree-kill.d.cts`, 'dist/cjs/tree-kill.d.cts');
          rmSync(STAGED, { recursive: true, force: true });
        },
      },
    ],
  },
]);

/** One public entry's declarations, bundled from tsc's (rolldown-plugin-dts reads them as they are:
 * no TypeScript compiler API, which TypeScript 7 no longer ships). */
function types(entry) {
  return {
    input: { [entry]: `${STAGED}/${entry}.d.ts` },
    external: [/^node:/],
    plugins: [dts({ dtsInput: true, tsconfig: false })],
    output: { dir: 'dist', codeSplitting: false },
  };
}

/**
 * `import { x } from 'node:fs'` builds an ES module facade of the whole builtin, reading every
 * export, lazy getters included (fs.ReadStream loads the streams): ~9 ms for node:fs alone on
 * Node 22, more than our own code costs. process.getBuiltinModule (Node 20.16+, 22.3+) hands out
 * the module without a facade; createRequire stands in before that. Each import line becomes one
 * line, so the source maps stay true line for line.
 */
function builtinsWithoutFacades() {
  const HELPER =
    'import { createRequire as __pwRequire } from "node:module"; ' +
    'const __pwBuiltin = process.getBuiltinModule ?? __pwRequire(import.meta.url);';
  const IMPORT = /^import (?:\{([^}]*)\}|\* as ([\w$]+)|([\w$]+)) from "(node:[^"]+)";$/gm;
  return {
    name: 'builtins-without-facades',
    renderChunk(code) {
      const out = new MagicString(code);
      let helped = false;
      for (const m of code.matchAll(IMPORT)) {
        const [line, named, namespace, fallback, id] = m;
        const binding =
          named === undefined ? (namespace ?? fallback) : `{${named.replace(/\s+as\s+/g, ': ')}}`;
        const text = `const ${binding} = __pwBuiltin("${id}");`;
        out.overwrite(m.index, m.index + line.length, helped ? text : `${HELPER} ${text}`);
        helped = true;
      }
      return helped ? { code: out.toString(), map: out.generateMap({ hires: true }) } : null;
    },
  };
}
