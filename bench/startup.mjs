import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { alternate, NotApplicable, withRatios } from './lib/stats.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const LIBRARY = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;
const GNU_TIMEOUT = ['/usr/bin/timeout', '/bin/timeout'].find((p) => existsSync(p));
const NODE = 'node -e 0';

/**
 * Every contender starts without NODE_EXTRA_CA_CERTS: Node 20 reads and parses those certificates
 * at start-up (a 220 KB bundle costs 75 ms on the project's machine, whose environment sets it),
 * which would inflate `node -e 0` and flatter every ratio. Node 22+ reads them when TLS first needs them.
 */
const { NODE_EXTRA_CA_CERTS: extraCerts, ...ENV } = process.env;

/** Whole processes, start to exit as the parent sees it (the `exit` event). */
function wall(argv) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(argv[0], argv.slice(1), { stdio: 'ignore', env: ENV });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`${argv.join(' ')} exited ${code}`));
      else resolve(performance.now() - t0);
    });
  });
}

const node = process.execPath;
const FIXTURES = join(ROOT, 'bench', 'fixtures');
const CONTENDERS = [
  { name: NODE, argv: [node, '-e', '0'] },
  // The floors under the goals, measured in the same run: what Node's ESM loader costs with nothing
  // to load, and the least a Node program can do to run `true` and pass its status on.
  {
    name: 'node -e "import()" of an empty module',
    argv: [node, '-e', `import(${JSON.stringify(pathToFileURL(join(FIXTURES, 'empty.mjs')).href)})`],
  },
  { name: 'node: spawn true, wait (5 lines)', argv: [node, join(FIXTURES, 'spawn-true.cjs')] },
  {
    name: 'node -e "import(\'procwarden\')"',
    argv: [node, '-e', `import(${JSON.stringify(LIBRARY)})`],
    goal: 1.25,
  },
  {
    // What a program that uses the library pays in all, the first run included.
    name: "import + run({ argv: ['true'] })",
    argv: [node, '-e', `import(${JSON.stringify(LIBRARY)}).then((m) => m.run({ argv: ['true'] }).result)`],
  },
  { name: 'procwarden --version', argv: [node, CLI, '--version'], goal: 1.15 },
  { name: 'procwarden timeout 10 true', argv: [node, CLI, 'timeout', '10', 'true'], goal: 1.5 },
  { name: 'procwarden run -- true', argv: [node, CLI, 'run', '--', 'true'], goal: 1.5 },
  { name: 'GNU timeout 10 true', argv: GNU_TIMEOUT ? [GNU_TIMEOUT, '10', 'true'] : null },
];

export default {
  id: 7,
  title: 'CLI start-up and exit (whole processes)',
  unit: 'ms',
  async run({ quick }) {
    // Start-up is short and noisy: at least the 10 samples the goals are stated for.
    const reps = quick ? 10 : 20;
    // One unmeasured start each: fills the OS page cache and the CLI's code cache.
    for (const c of CONTENDERS) if (c.argv) await wall(c.argv);
    const rows = withRatios(
      await alternate(CONTENDERS, reps, (c) => {
        if (!c.argv) throw new NotApplicable('ENOENT: no GNU timeout installed here');
        return wall(c.argv);
      }),
      NODE,
    );
    const goals = CONTENDERS.filter((c) => c.goal).map((c) => {
      const row = rows.find((r) => r.contender === c.name);
      return {
        text: `${c.name} ≤ ${c.goal}× ${NODE}`,
        value: `${row.ratio.toFixed(2)}× (${row.median.toFixed(0)} ms)`,
        met: row.ratio <= c.goal,
      };
    });
    return {
      cases: [{ name: `node ${process.version}`, rows }],
      goals,
      notes: [
        'ratios against node -e 0, medians, contenders alternated; the CLI’s code cache warmed by one unmeasured start',
        ...(extraCerts === undefined
          ? []
          : [
              'NODE_EXTRA_CA_CERTS is set here and was unset for every contender (Node 20 loads it at start-up)',
            ]),
      ],
    };
  },
};
