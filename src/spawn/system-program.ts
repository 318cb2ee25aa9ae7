import { accessSync, constants, statSync } from 'node:fs';

/** Whether `path` is a file this process may execute. */
export function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

const found = new Map<string, string | null>();

/**
 * A system program (env, nice) by its absolute path, found once: the shells that exec it may have
 * no PATH of their own, or the run's, which is not ours to trust for it.
 */
export function systemProgram(name: string): string | null {
  let path = found.get(name);
  if (path === undefined) {
    path = [`/usr/bin/${name}`, `/bin/${name}`].find(executable) ?? null;
    found.set(name, path);
  }
  return path;
}
