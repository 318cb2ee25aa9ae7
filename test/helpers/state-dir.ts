import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * vitest globalSetup: the suite journals into a directory of its own, never the user's
 * ~/.local/state/procwarden. Tests SIGKILL hosts and their watchdogs on purpose, and the records
 * they leave (kept for a later `procwarden reap`, as designed) piled up there run after run. The
 * workers and every CLI or host they start inherit the variable; tests that need a journal of their
 * own still pass one.
 */
export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'pw-suite-state-'));
  process.env.PROCWARDEN_STATE_DIR = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
