import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { LeakGuard } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

const version = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

describe('procwarden (no command)', () => {
  it('--help lists every command; --version prints the package version', async () => {
    for (const flag of ['--help', '-h', 'help']) {
      const r = await runCli([flag]);
      expect(r.status).toBe(0);
      for (const c of ['run', 'timeout', 'kill', 'tree', 'proof'])
        expect(r.stdout.toString()).toMatch(new RegExp(`^  ${c} `, 'm'));
    }
    for (const flag of ['--version', '-V']) {
      const r = await runCli([flag]);
      expect(r.stdout.toString()).toBe(`procwarden ${version}\n`);
    }
  });

  it('every command has --help, on stdout, exit 0', async () => {
    for (const c of ['run', 'timeout', 'kill', 'tree', 'proof']) {
      const r = await runCli([c, '--help']);
      expect(r.status).toBe(0);
      expect(r.stdout.toString()).toMatch(new RegExp(`^Usage: procwarden ${c}`));
      // Fits a standard terminal.
      for (const line of r.stdout.toString().split('\n')) expect(line.length).toBeLessThanOrEqual(100);
    }
  });

  it('no command: the help on stderr, exit 2; an unknown command or option: one line, exit 2', async () => {
    const none = await runCli([]);
    expect(none.status).toBe(2);
    expect(none.stderr).toMatch(/^procwarden - run commands/);
    const unknown = await runCli(['frobnicate']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toBe(
      "procwarden: unknown command 'frobnicate'\nTry 'procwarden --help' for more information.\n",
    );
    const option = await runCli(['--frob']);
    expect(option.status).toBe(2);
    expect(option.stderr.split('\n')[0]).toBe("procwarden: unrecognized option '--frob'");
  });
});
