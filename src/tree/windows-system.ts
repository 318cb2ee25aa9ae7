import { win32 } from 'node:path';

const FALLBACK_ROOT = 'C:\\Windows';

/**
 * %SystemRoot%, trusted only when it is an absolute drive path: a relative or odd value in the
 * environment must not decide which binary we run with the power to end processes.
 */
export function systemRoot(env: NodeJS.ProcessEnv = process.env): string {
  const value = env.SystemRoot ?? env.SYSTEMROOT ?? env.windir ?? env.WINDIR;
  if (typeof value !== 'string' || !/^[A-Za-z]:\\[^"<>|?*\0\r\n]*$/.test(value)) return FALLBACK_ROOT;
  return win32.normalize(value).replace(/\\+$/, '');
}

/** An absolute path under %SystemRoot%: never resolved through PATH, whose entries anyone may prepend. */
export function systemExecutable(env: NodeJS.ProcessEnv, ...parts: string[]): string {
  return win32.join(systemRoot(env), ...parts);
}
