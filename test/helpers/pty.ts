import { createPtyLauncher } from '../../src/spawn/index.js';
import { waitFor } from './procs.js';

/** Why PTY runs cannot be tested here (node-pty missing or unloadable); null when they can. */
export function ptySkipReason(): string | null {
  try {
    createPtyLauncher().preflight?.();
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * Types `size` (with `type`) until `screen()` shows `text`, once every 500 ms: a size can reach the
 * command's terminal a moment after the keys do (a SIGWINCH heard after them; after a SIGSTOP,
 * whatever procwarden had read before its SIGCONT handler ran), and a `size` typed before that is
 * answered with the old size.
 */
export function typeSizeUntil(screen: () => string, type: () => void, text: string): Promise<true> {
  let typedAt = 0;
  return waitFor(
    () => {
      if (screen().includes(text)) return true;
      if (Date.now() - typedAt > 500) {
        type();
        typedAt = Date.now();
      }
      return undefined;
    },
    { what: `${JSON.stringify(text)} on screen` },
  );
}
