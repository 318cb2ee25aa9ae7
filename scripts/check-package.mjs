// The package as npm would publish it, checked by the ecosystem's tools: publint (package.json
// against the files) and arethetypeswrong (the types each resolution mode finds). The tarball is
// packed without lifecycle scripts: the caller has just built, and a rebuild inside `npm pack`
// would rewrite dist/ under whatever else is reading it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// npm and the tools' bins are .cmd files on Windows, which only a shell runs.
const shell = process.platform === 'win32';
const run = (cmd, args, options = {}) => execFileSync(cmd, args, { stdio: 'inherit', shell, ...options });

const dir = mkdtempSync(join(tmpdir(), 'procwarden-pack-'));
try {
  const [packed] = JSON.parse(
    execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], {
      shell,
      encoding: 'utf8',
    }),
  );
  // The bundles are ASCII (rolldown.config.mjs says why): a non-ASCII character the build did not
  // escape (in a tagged template's raw text) would cost every start-up the two-byte decode.
  const wide = packed.files
    .map((f) => f.path)
    .filter((f) => /\.c?js$/.test(f) && readFileSync(f).some((byte) => byte > 0x7f));
  if (wide.length > 0) throw new Error(`not ASCII: ${wide.join(', ')} (see rolldown.config.mjs)`);
  run('npx', ['publint', '--strict']);
  const tarball = join(dir, packed.filename);
  // procwarden/tree-kill is tree-kill's drop-in, so CommonJS gets it whole: its own entry and
  // `export =` types (src/cjs/tree-kill.cts). Checked with no rule ignored.
  run('npx', ['attw', tarball, '--entrypoints', 'tree-kill']);
  // The rest is an ES module by design: CommonJS callers require() it (Node 20.19+, 22.12+, 24) or
  // await import() it. The one rule that reports exactly that is the only one ignored, there only.
  run('npx', [
    'attw',
    tarball,
    '--exclude-entrypoints',
    'tree-kill',
    '--ignore-rules',
    'cjs-resolves-to-esm',
  ]);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
