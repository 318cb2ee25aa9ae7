import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, makeTmp, waitFor } from './helpers/procs.js';

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');
const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

// The package as a user gets it: packed from the built dist/ (npm test builds first), installed
// from the tarball into a fresh prefix without the network (its only dependency is optional), and
// used from there. Its processes are short and awaited; the proof checks its own leftovers.
// npm and the installed bin are .cmd shims on Windows, and the proof's fixtures are POSIX shell.
const skip = process.platform === 'win32' ? 'npm and the bin are .cmd shims, the proof is POSIX' : null;

describe.skipIf(skip !== null)(`the packed tarball, installed${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let prefix = '';
  let bin = '';
  /** The tarball's files, as `npm pack` lists them (paths from the package root). */
  let packedFiles: string[] = [];

  /** Runs an ES module script written into the prefix (so it imports the installed package) with
   * a journal of its own; returns what it printed, parsed as JSON. */
  const runScript = async (
    name: string,
    lines: string[],
    env: Record<string, string | undefined> = {},
    nodeArgs: string[] = [],
  ) => {
    const script = join(prefix, name);
    writeFileSync(script, lines.join('\n'));
    const stateDir = makeTmp('pw-pack-state-');
    const { stdout } = await exec(process.execPath, [...nodeArgs, script], {
      cwd: prefix,
      env: { ...process.env, PROCWARDEN_STATE_DIR: stateDir, ...env },
    }).finally(() => rmSync(stateDir, { recursive: true, force: true }));
    return JSON.parse(stdout);
  };

  beforeAll(async () => {
    prefix = makeTmp('pw-pack-');
    const { stdout } = await exec(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', prefix],
      { cwd: ROOT },
    );
    const [packed] = JSON.parse(stdout);
    packedFiles = packed.files.map((f: { path: string }) => f.path);
    const tarball = join(prefix, packed.filename);
    writeFileSync(join(prefix, 'package.json'), '{ "private": true, "type": "module" }\n');
    await exec(
      'npm',
      ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', tarball],
      { cwd: prefix },
    );
    bin = join(prefix, 'node_modules', '.bin', 'procwarden');
  }, 240_000);

  afterAll(() => {
    if (prefix) rmSync(prefix, { recursive: true, force: true });
  });

  it('ships only what it needs: the bundled entries, their chunks and the types', () => {
    const installed = join(prefix, 'node_modules', 'procwarden');
    // An internal module tsc emits for the benches is not part of the package.
    expect(() => statSync(join(installed, 'dist', 'supervisor', 'supervisor.js'))).toThrow();
    // One declaration file per public entry, each standing alone: no internal module's types ship
    // (a consumer with skipLibCheck: false checked them all, and failed in one).
    const declarations = packedFiles.filter((f) => /\.d\.[cm]?ts$/.test(f)).sort();
    expect(declarations).toEqual(['dist/cjs/tree-kill.d.cts', 'dist/index.d.ts', 'dist/tree-kill.d.ts']);
    for (const file of declarations) {
      // Without comments: the JSDoc names `import('procwarden')` in prose.
      const text = readFileSync(join(installed, file), 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/^\s*\/\/.*$/gm, '');
      const imported = [...text.matchAll(/(?:from|import\()\s*['"]([^'"]+)['"]/g)].map((m) => m[1]);
      expect(
        imported.filter((id) => !id?.startsWith('node:')),
        file,
      ).toEqual([]);
    }
    // The CLI can be run directly, as the README's `timeout` link needs.
    expect(statSync(join(installed, 'dist', 'cli', 'main.js')).mode & 0o111).not.toBe(0);
  });

  it('carries the docs, and every relative link in README.md and docs/ resolves inside it', () => {
    const docs = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md'));
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) expect(packedFiles).toContain(`docs/${doc}`);
    const dead: string[] = [];
    for (const page of packedFiles.filter((f) => f.endsWith('.md'))) {
      const text = readFileSync(join(ROOT, page), 'utf8');
      // Inline links, whose text may wrap onto the next line, and reference definitions.
      const targets = [
        ...[...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1] ?? ''),
        ...[...text.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((m) => m[1] ?? ''),
      ];
      for (const target of targets) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
        const path = decodeURIComponent(target.split('#')[0] ?? '');
        const file = posix.normalize(posix.join(posix.dirname(page), path)).replace(/\/$/, '');
        if (!packedFiles.includes(file)) dead.push(`${page}: ${target}`);
      }
    }
    expect(dead).toEqual([]);
  });

  it('says where it comes from, and runs nothing when installed', () => {
    const manifest = JSON.parse(
      readFileSync(join(prefix, 'node_modules', 'procwarden', 'package.json'), 'utf8'),
    );
    expect(manifest.repository).toMatchObject({
      url: expect.stringContaining('github.com/procwarden/procwarden'),
    });
    expect(manifest.bugs).toMatchObject({ url: expect.stringMatching(/\/issues$/) });
    expect(manifest.homepage).toEqual(expect.stringContaining('github.com/procwarden/procwarden'));
    // npm runs these on a consumer's install (prepare too, for a git dependency); npm 11 warned
    // that procwarden had install scripts. The build is prepack's: it runs where a tarball is made.
    const installTime = ['preinstall', 'install', 'postinstall', 'preprepare', 'prepare', 'postprepare'];
    expect(Object.keys(manifest.scripts ?? {}).filter((name) => installTime.includes(name))).toEqual([]);
    expect(manifest.scripts?.prepack).toBe('npm run build');
  });

  it('procwarden --version', async () => {
    const { stdout } = await exec(bin, ['--version']);
    expect(stdout).toBe(`procwarden ${version}\n`);
  });

  it('procwarden proof: every case holds', async () => {
    const { stdout } = await exec(bin, ['proof']);
    expect(stdout).toMatch(/All \d+ cases hold/);
  }, 120_000);

  it("import { run } from 'procwarden', and procwarden/tree-kill", async () => {
    const printed = await runScript('use.mjs', [
      "import { run } from 'procwarden';",
      "import treeKill from 'procwarden/tree-kill';",
      "const result = await run({ argv: ['echo', 'hello from the tarball'] }).result;",
      'console.log(JSON.stringify({ reason: result.reason, out: result.stdout.text, treeKill: typeof treeKill }));',
    ]);
    expect(printed).toEqual({ reason: 'exit', out: 'hello from the tarball\n', treeKill: 'function' });
  });

  it('every name its declarations export as a value, the module exports at run time', async () => {
    const declared = (entry: string) => {
      const text = readFileSync(join(prefix, 'node_modules', 'procwarden', 'dist', `${entry}.d.ts`), 'utf8');
      const list = /^export \{([^}]*)\};$/m.exec(text)?.[1] ?? '';
      return list
        .split(',')
        .map((n) => n.trim())
        .filter((n) => n !== '' && !n.startsWith('type '))
        .map((n) => n.split(/\s+as\s+/).pop() as string)
        .sort();
    };
    const printed = await runScript('exports.mjs', [
      "const main = Object.keys(await import('procwarden'));",
      "const treeKill = Object.keys(await import('procwarden/tree-kill'));",
      'console.log(JSON.stringify({ main, treeKill }));',
    ]);
    for (const name of declared('index')) expect(printed.main).toContain(name);
    for (const name of declared('tree-kill')) expect(printed.treeKill).toContain(name);
    expect(declared('index')).not.toContain('LiveSession');
  });

  it("require('procwarden/tree-kill') is the function, as require('tree-kill') is; require('procwarden') has the API", async () => {
    const printed = await runScript('use.cjs', [
      "const kill = require('procwarden/tree-kill');",
      "const { Supervisor, run } = require('procwarden');",
      "const child = require('node:child_process').spawn('sh', ['-c', 'sleep 30 & wait'], { stdio: 'ignore' });",
      'kill(child.pid, (error) => {',
      '  console.log(JSON.stringify({ kill: typeof kill, error: error ?? null, Supervisor: typeof Supervisor, run: typeof run }));',
      '});',
    ]);
    expect(printed).toEqual({ kill: 'function', error: null, Supervisor: 'function', run: 'function' });
  });

  // What tree-kill's users write, checked by the installed tsc against the installed package:
  // `import kill = require(...)` wherever the file is CommonJS (tree-kill's own types are
  // `export = treeKill`), a default import where it is an ES module. Before the CommonJS types,
  // commonjs and preserve saw the module namespace (TS2349, not callable) and node16 refused the
  // require of an ES module (TS1471).
  const TSC = join(ROOT, 'node_modules', '.bin', 'tsc');
  const CALL = [
    "kill(pid, 'SIGTERM', (err) => {",
    '  const seen: Error | undefined = err;',
    '  void seen;',
    '});',
  ];
  const viaRequire = [
    "import kill = require('procwarden/tree-kill');",
    'declare const pid: number;',
    '// The callback type, under the export = namespace.',
    'const callback: kill.TreeKillCallback = () => {};',
    'kill(pid, callback);',
    ...CALL,
  ];
  const viaImport = ["import kill from 'procwarden/tree-kill';", 'declare const pid: number;', ...CALL];
  const typeChecks: [string, Record<string, string>, Record<string, string[]>][] = [
    ['commonjs', { module: 'commonjs' }, { 'require.ts': viaRequire }],
    ['node16', { module: 'node16' }, { 'require.ts': viaRequire, 'import.mts': viaImport }],
    ['nodenext', { module: 'nodenext' }, { 'require.cts': viaRequire, 'import.mts': viaImport }],
    [
      'preserve + bundler',
      { module: 'preserve', moduleResolution: 'bundler' },
      { 'require.ts': viaRequire, 'import.ts': viaImport },
    ],
  ];
  it.each(typeChecks)(
    'tsc --module %s: procwarden/tree-kill is callable, as tree-kill is',
    async (label, options, files) => {
      const dir = join(prefix, `tsc-${label.replace(/\W+/g, '-')}`);
      mkdirSync(dir, { recursive: true });
      // CommonJS .ts files (the prefix is type module), no @types: the package's types stand alone.
      writeFileSync(join(dir, 'package.json'), '{ "type": "commonjs" }\n');
      writeFileSync(
        join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: { ...options, strict: true, noEmit: true, types: [], skipLibCheck: false },
          files: Object.keys(files),
        }),
      );
      for (const [name, lines] of Object.entries(files)) writeFileSync(join(dir, name), lines.join('\n'));
      const checked = await exec(TSC, ['-p', dir], { cwd: dir }).then(
        () => 'no errors',
        (error: { stdout?: string }) => error.stdout ?? String(error),
      );
      expect(checked).toBe('no errors');
    },
  );

  // A consumer as strict as they come, type checking its libraries: before the rolled-up
  // declarations, exactOptionalPropertyTypes with skipLibCheck: false failed in an internal
  // module's .d.ts (TS2420 in tree/coalescing.d.ts). The main API is used as documented, and what
  // the types refuse is checked too: each @ts-expect-error fails the compile if nothing is wrong.
  it('tsc --strict --exactOptionalPropertyTypes, skipLibCheck false: a consumer of the main API compiles', async () => {
    const dir = join(prefix, 'tsc-consumer');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          skipLibCheck: false,
          noEmit: true,
          // The package's types name NodeJS.Signals: a consumer has @types/node (ours, here).
          typeRoots: [join(ROOT, 'node_modules', '@types')],
          types: ['node'],
        },
        files: ['consumer.ts', 'require.cts'],
      }),
    );
    writeFileSync(
      join(dir, 'consumer.ts'),
      [
        'import {',
        '  isProcwardenError, LiveSessionPool, type ProcwardenErrorCode, ProcwardenError, type RunResult,',
        '  type RunSpec, run, Supervisor, terminateTree,',
        "} from 'procwarden';",
        "import treeKill, { type TreeKillCallback } from 'procwarden/tree-kill';",
        '',
        'const spec: RunSpec = {',
        "  argv: ['sh', '-c', 'echo hi'],",
        '  timeoutMs: 1000,',
        '  graceMs: 500,',
        "  killSignal: 'SIGINT',",
        '  output: {',
        '    maxBytes: 1024,',
        '    onData: (text, stream) => {',
        '      console.log(stream, text);',
        '    },',
        '    // A promise returned holds the stream until it settles.',
        '    onBytes: async (chunk) => {',
        '      await new Promise((resolve) => setTimeout(resolve, chunk.length));',
        '    },',
        '  },',
        '};',
        'const handle = run(spec);',
        "handle.cancel('user asked', { signal: 'SIGTERM', ifIgnored: 'nothing' });",
        'const result: RunResult = await handle.result;',
        'const summary: [string, number | null, string | null, string, boolean, number] = [',
        '  result.reason, result.exitCode, result.exitSignal, result.stdout.text, result.timedOut, result.tree.escaped,',
        '];',
        '',
        'const sup = new Supervisor({ defaults: { graceMs: 1000, killSignal: 15 }, journal: false });',
        "const other = sup.spawn({ argv: ['sleep', '1'], scope: 'jobs', containment: 'process-group' });",
        'const pid: number | undefined = other.pid;',
        "await sup.cancelScope('jobs');",
        'await sup.shutdown({ graceMs: 100 });',
        '',
        'try {',
        "  run({ argv: ['true'], timeoutMs: -1 });",
        '} catch (error) {',
        '  if (isProcwardenError(error)) {',
        '    const code: ProcwardenErrorCode = error.code;',
        '    console.log(code);',
        '  }',
        '  if (error instanceof ProcwardenError) console.log(error.message);',
        '}',
        'const report = await terminateTree(12345, { signal: 15, graceMs: 100, includeRoot: false });',
        'const pool = new LiveSessionPool({ maxSessions: 2 });',
        "const session = await pool.acquire('key', { argv: ['cat'], stdin: 'pipe' });",
        'await pool.shutdown();',
        'const done: TreeKillCallback = (error) => console.log(error?.message);',
        "treeKill(12345, 'SIGTERM', done);",
        'console.log(summary, pid, report.killed, session);',
        '',
        '// @ts-expect-error: argv names at least the command',
        'run({ argv: [] });',
        '// @ts-expect-error: a signal is a name Node knows, or a number',
        "run({ argv: ['true'], killSignal: 'SIGNOPE' });",
        '// @ts-expect-error: the test seams (process tables, launchers) are not public',
        'new Supervisor({ table: {} });',
        '// @ts-expect-error: LiveSession is a type only; the module exports no such value',
        "console.log(session instanceof (await import('procwarden')).LiveSession);",
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'require.cts'),
      [
        "import kill = require('procwarden/tree-kill');",
        "kill(12345, 'SIGKILL', (error) => console.log(error));",
        '',
      ].join('\n'),
    );
    const checked = await exec(TSC, ['-p', dir], { cwd: dir }).then(
      () => 'no errors',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    expect(checked).toBe('no errors');
  });

  // require() from CommonJS as Node runs it by default, and as the Node 20 and 22 releases without
  // require(esm) do (--no-experimental-require-module stands in for them): the function itself,
  // which ends a `sleep` this script started; the files loaded say which path was taken.
  const requireAndKill = (report: string[]) => [
    "const kill = require('procwarden/tree-kill');",
    "const sleep = require('node:child_process').spawn('sleep', ['30'], { stdio: 'ignore' });",
    "const exited = new Promise((resolve) => sleep.on('exit', (code, signal) => resolve(signal)));",
    "process.on('exit', () => sleep.kill('SIGKILL'));",
    "const files = Object.keys(require.cache).map((f) => f.split(/[\\\\/]/).slice(-2).join('/'));",
    "kill(sleep.pid, 'SIGTERM', async (error) => {",
    // The callback comes once the tree is extinct; Node's exit event once it reaped its child.
    "  const signal = await Promise.race([exited, new Promise((r) => setTimeout(r, 5000, 'running').unref())]);",
    '  const seen = { kill: typeof kill, error: error ?? null, pid: sleep.pid, signal, files };',
    ...report,
    '});',
  ];
  const requireModuleOn = process.features.require_module === true;
  // Node 20.19+, 22.10+ and 24 know the flag; before, require(esm) is off already.
  const withoutRequireModule = requireModuleOn ? ['--no-experimental-require-module'] : [];

  it.skipIf(!requireModuleOn)(
    "require('procwarden/tree-kill') from a .cjs file: the ES module's own function where require() loads one",
    async () => {
      const printed = await runScript(
        'require-kill.cjs',
        requireAndKill([
          "  const { ProcwardenError } = require('procwarden');",
          '  kill(1, (refused) => {',
          '    console.log(JSON.stringify({ ...seen, sameClass: refused instanceof ProcwardenError }));',
          '  });',
        ]),
      );
      expect(printed).toMatchObject({ kill: 'function', error: null, signal: 'SIGTERM' });
      expect(alive(printed.pid)).toBe(false);
      expect(printed.files).toContain('cjs/tree-kill.cjs');
      // One copy of procwarden: the error it reports is require('procwarden')'s class.
      expect(printed.files).not.toContain('cjs/tree-kill-commonjs.cjs');
      expect(printed.sameClass).toBe(true);
    },
  );

  it("require('procwarden/tree-kill') where require() cannot load an ES module: its CommonJS build", async () => {
    const printed = await runScript(
      'require-kill-commonjs.cjs',
      requireAndKill(['  console.log(JSON.stringify(seen));']),
      {},
      withoutRequireModule,
    );
    expect(printed).toMatchObject({ kill: 'function', error: null, signal: 'SIGTERM' });
    expect(alive(printed.pid)).toBe(false);
    expect(printed.files).toEqual(
      expect.arrayContaining(['cjs/tree-kill.cjs', 'cjs/tree-kill-commonjs.cjs']),
    );
  });

  it('importing it loads no child_process, net or tty; the first run does', async () => {
    // process.moduleLoadList names the builtins loaded so far: 6-8 ms of start-up left to the
    // first spawn, which needs them (src/lazy-builtins.ts).
    const { atImport, afterRun } = await runScript('lazy-builtins.mjs', [
      'const heavy = () => process.moduleLoadList.filter((m) => /^NativeModule (child_process|net|tty)$/.test(m)).sort();',
      "const { run } = await import('procwarden');",
      'const atImport = heavy();',
      "await run({ argv: ['true'] }).result;",
      'console.log(JSON.stringify({ atImport, afterRun: heavy() }));',
    ]);
    expect(atImport).toEqual([]);
    expect(afterRun).toEqual(expect.arrayContaining(['NativeModule child_process', 'NativeModule net']));
  });

  it("a Supervisor from the package starts its watchdog (the bundle's own entry), which exits with it", async () => {
    const { pid, problems } = await runScript(
      'watchdog.mjs',
      [
        "import { Supervisor } from 'procwarden';",
        'const sup = new Supervisor();',
        // Alive past the watchdog's start delay (a run that ends sooner starts none).
        "await sup.spawn({ argv: ['sleep', '0.3'] }).result;",
        'const pid = sup.watchdogPid;',
        'await sup.shutdown();',
        'console.log(JSON.stringify({ pid, problems: sup.journalProblems.map((p) => p.problem ?? String(p)) }));',
      ],
      { PROCWARDEN_WATCHDOG: undefined },
    );
    expect(problems).toEqual([]);
    expect(pid).toBeGreaterThan(1);
    // It exits once told the host shut down cleanly; the host did not wait for it.
    await waitFor(() => !alive(pid), { what: `watchdog ${pid} to exit` });
  });
});
