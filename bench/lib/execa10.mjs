import { NotApplicable } from './stats.mjs';

/**
 * execa 10 (devDependency alias `execa10`), whose `killDescendants` kills the subprocess's process
 * group. It needs Node ≥ 22: on an older Node the contender is n/a with the reason, never a failure,
 * and the module is not even loaded (it would not parse there).
 */
export async function loadExeca10() {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 22) return { unavailable: `execa 10 needs Node ≥ 22 (this is ${process.version})` };
  const { execa } = await import('execa10');
  return { execa };
}

/** Throws NotApplicable when execa 10 could not be loaded. */
export function requireExeca10(loaded) {
  if (loaded.unavailable) throw new NotApplicable(loaded.unavailable);
  return loaded.execa;
}
