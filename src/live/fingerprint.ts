import type * as Crypto from 'node:crypto';
import { createRequire } from 'node:module';
import type { RunSpec } from '../types.js';

/**
 * When the caller gives none: what the process was started with (argv, cwd, env, extendEnv, mode,
 * shell, inherited descriptors, OOM score).
 */
export function specFingerprint(spec: RunSpec): string {
  // A variable set to undefined is removed from what the process inherits: a spec that scrubs a
  // secret must not be handed the session of one that kept it.
  const given = spec.env ?? {};
  const env = Object.keys(given)
    .sort()
    .map((name) => [name, given[name] ?? null]);
  const identity = JSON.stringify([
    spec.argv,
    spec.cwd ?? null,
    env,
    spec.extendEnv ?? true,
    spec.mode ?? 'child',
    spec.shell ?? false,
    // Descriptors can only be given at the start: a session started without them never has them.
    [...(spec.inheritFds ?? [])].sort((a, b) => a - b),
    // So is the OOM score: the process and all it forks keep the one it started with.
    spec.oomScoreAdj ?? null,
  ]);
  return crypto().createHash('sha256').update(identity).digest('hex').slice(0, 32);
}

/** node:crypto on first use: it costs every `procwarden timeout` ~5 ms, and only live sessions need it. */
let loaded: typeof Crypto | undefined;
function crypto(): typeof Crypto {
  loaded ??= (process.getBuiltinModule?.('node:crypto') ??
    createRequire(import.meta.url)('node:crypto')) as typeof Crypto;
  return loaded;
}
