import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { NotApplicable } from './stats.mjs';

const PEERS = join(import.meta.dirname, '..', 'peers');

/**
 * execa 10, whose `killDescendants` kills the subprocess's process group. It needs Node ≥ 22, so it
 * is no root devDependency (`npm ci` on Node 20 warned EBADENGINE for it and its which-command):
 * bench/peers/ holds it with a lock of its own, installed here on first use (from npm's cache
 * first), and only on Node ≥ 22. On an older Node, or when the install fails, the contender is n/a
 * with the reason, never a failure, and the module is not even loaded (it would not parse there).
 */
export async function loadExeca10() {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 22) return { unavailable: `execa 10 needs Node ≥ 22 (this is ${process.version})` };
  if (!existsSync(join(PEERS, 'node_modules', 'execa', 'package.json'))) {
    try {
      // npm is a .cmd shim on Windows, which only a shell runs.
      execFileSync(
        'npm',
        ['ci', '--prefix', PEERS, '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'],
        { stdio: ['ignore', 'ignore', 'pipe'], shell: process.platform === 'win32' },
      );
    } catch (error) {
      const said = String(error.stderr ?? error.message)
        .trim()
        .split('\n')
        .at(-1);
      return { unavailable: `execa 10 could not be installed into bench/peers (${said})` };
    }
  }
  const { execa } = await import('../peers/execa10.mjs');
  return { execa };
}

/** Throws NotApplicable when execa 10 could not be loaded. */
export function requireExeca10(loaded) {
  if (loaded.unavailable) throw new NotApplicable(loaded.unavailable);
  return loaded.execa;
}
