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
 * Types `size` (with `type`) until `screen()` shows `text`, once every 500 ms: tmux gives a pane's
 * terminal its new size a moment after resize-window, and a `size` typed before that is answered
 * with the old size.
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
