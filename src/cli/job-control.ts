import { inForeground } from './foreground.js';

/** What `run --pty` holds of the user's terminal, given back while procwarden is stopped. */
export interface TerminalHold {
  /** Puts the user's terminal mode back, as the shell that gets the terminal expects it. */
  release(): void;
  /** Takes the terminal again: raw mode, and the window's size, which may have changed meanwhile. */
  reclaim(): void;
}

/** The stop signals a shell or a user sends to a job; each stops us the way it was sent. */
const STOPS: readonly NodeJS.Signals[] = ['SIGTSTP', 'SIGTTIN', 'SIGTTOU'];

/**
 * Job control around a raw terminal, as vim or ssh do it: a stop signal gives the terminal back
 * before procwarden stops, and a continue takes it again. Only procwarden stops: the command goes on
 * in its own session (docs/pty.md says why), so no signal is passed to anyone.
 *
 * While our listeners are installed the signals are not at their default, and the kernel then
 * restarts forever a read or a tcsetattr made from the background (it raises SIGTTIN/SIGTTOU and
 * retries: 100% CPU, no JavaScript runs). So the terminal is only ever touched with them removed:
 * should it be from the background, that stops us by default until `fg`, and the call then
 * completes. They are back only once we hold the terminal again, in the foreground.
 */
export function onJobControl(terminal: TerminalHold): () => void {
  if (process.platform === 'win32') return () => {};
  let active = true;
  const listen = () => {
    for (const s of STOPS) process.on(s, stop);
  };
  const unlisten = () => {
    for (const s of STOPS) process.off(s, stop);
  };
  // Continued in the background (`bg`, `kill %1`), procwarden leaves the terminal to the shell: it
  // is stopped by SIGTTIN once it reads it, and `fg` continues it here again.
  const reclaim = () => {
    unlisten();
    if (!active || !inForeground()) return;
    terminal.reclaim();
    listen();
  };
  function stop(signal: NodeJS.Signals) {
    unlisten();
    terminal.release();
    // At its default now, it stops us before kill() returns (a signal a thread sends its own
    // process is delivered to it first); a continue lets it return. Discarded, and so no stop, when
    // our process group is orphaned: no shell is left to continue us.
    process.kill(process.pid, signal);
    reclaim();
  }
  // Also after a SIGSTOP, which cannot be caught: the shell may have reset the terminal meanwhile.
  process.on('SIGCONT', reclaim);
  listen();
  return () => {
    active = false;
    unlisten();
    process.off('SIGCONT', reclaim);
  };
}
