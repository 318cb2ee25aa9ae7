// The published entry points in as few files as possible: Node's ESM loader pays per file (resolve,
// stat, read, link), and over the ~65 modules of the library that cost `procwarden timeout` more
// than its own work. tsc still emits every module and the .d.ts files into dist/ first (the types,
// and the benches, which measure internals); these bundles then replace the entry files.
import { chmodSync } from 'node:fs';
import { defineConfig } from 'rolldown';

const CLI = 'dist/cli/main.js';

export default defineConfig({
  input: {
    index: 'src/index.ts',
    'tree-kill': 'src/tree-kill.ts',
    'cli/main': 'src/cli/main.ts',
    // Started by every Supervisor as its own process: an entry of its own, found at this path.
    'watchdog/main': 'src/watchdog/main.ts',
  },
  platform: 'node',
  external: [/^node:/, '@lydell/node-pty'],
  tsconfig: 'tsconfig.build.json',
  output: {
    dir: 'dist',
    format: 'esm',
    sourcemap: true,
    entryFileNames: '[name].js',
    // Two levels below the package root, as dist/cli/ is: the CLI's `import.meta.url`-relative
    // paths (../../package.json, ../index.js) resolve the same from a chunk as from its source.
    chunkFileNames: 'chunks/[name]-[hash].js',
    // The library in one shared chunk (one file to load), each CLI command in its own, loaded
    // only when named; option parsing apart, since `--version` and `--help` need it and no more.
    advancedChunks: {
      groups: [
        { name: 'options', test: /[\\/]src[\\/](options[\\/]|errors\.ts)/, priority: 2 },
        // Not the watchdog's entry: its top level is a program, which must run only in its process.
        { name: 'procwarden', test: /[\\/]src[\\/](?!cli[\\/]|watchdog[\\/]main\.ts)/, priority: 1 },
      ],
    },
  },
  plugins: [
    {
      // A clone's build must run as installed packages do: `./dist/cli/main.js`, or a `timeout`
      // link to it, needs the run bit (npm sets it only when it installs a package).
      name: 'cli-run-bit',
      writeBundle() {
        chmodSync(CLI, 0o755);
      },
    },
  ],
});
