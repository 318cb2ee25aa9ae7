import { createHash } from 'node:crypto';
import type { RunSpec } from '../types.js';

/** When the caller gives none: what the process was started with (argv, cwd, env, mode, shell). */
export function specFingerprint(spec: RunSpec): string {
  const env = Object.entries(spec.env ?? {})
    .filter(([, value]) => value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const identity = JSON.stringify([
    spec.argv,
    spec.cwd ?? null,
    env,
    spec.mode ?? 'child',
    spec.shell ?? false,
  ]);
  return createHash('sha256').update(identity).digest('hex').slice(0, 32);
}
