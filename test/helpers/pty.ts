import { createPtyLauncher } from '../../src/spawn/index.js';

/** Why PTY runs cannot be tested here (node-pty missing or unloadable); null when they can. */
export function ptySkipReason(): string | null {
  try {
    createPtyLauncher().preflight?.();
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}
