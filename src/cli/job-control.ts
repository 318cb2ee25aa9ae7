import { inForeground } from './foreground.js';

/** What `run --pty` holds of the user's terminal, given back while procwarden is stopped. */
export interface TerminalHold {
  /** Puts the user's terminal mode back, as the shell that gets the terminal expects it. */
  release(): void;
  /** Takes the terminal again: raw mode, and the window's size, which may have changed meanwhile. */
  reclaim(): void;
}

/** How often a procwarden continued in the background looks whether it is in the foreground again. */
const FOREGROUND_LOOK_MS = process.platform === 'linux' ? 200 : 1000;

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
 * completes. They are back only once we hold the terminal again, in the foreground. `held`: whether
 * the terminal is ours already (started in the foreground), else it is taken on the first look that
 * finds us there.
 */
export function onJobControl(held: boolean, terminal: TerminalHold): () => void {
  if (process.platform === 'win32') return () => {};
  let active = true;
  let watching: ReturnType<typeof setInterval> | undefined;
  const listen = () => {
    for (const s of STOPS) process.on(s, stop);
  };
  const unlisten = () => {
    for (const s of STOPS) process.off(s, stop);
    clearInterval(watching);
    watching = undefined;
  };
  // Continued in the background (`bg`, `kill %1`), procwarden leaves the terminal to the shell, and
  // takes it again once its group is the terminal's foreground one: on the SIGCONT of a `fg` that
  // continues it stopped, or seen by a look now and then, since bash's `fg` of a job running in the
  // background sends none.
  const reclaim = () => {
    unlisten();
    if (!active) return;
    if (!inForeground()) {
      watching = setInterval(() => inForeground() && reclaim(), FOREGROUND_LOOK_MS);
      // The run, not this look, is what keeps procwarden alive.
      watching.unref();
      return;
    }
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
  // Not held (started in the background): taken once we are in the foreground.
  if (held) listen();
  else reclaim();
  return () => {
    active = false;
    unlisten();
    process.off('SIGCONT', reclaim);
  };
}

/**
 * With the command in our process group (on our controlling terminal, see onControllingTerminal),
 * its read from the terminal while the job is in the background sends SIGTTIN to the whole group,
 * us included: the command stops, and procwarden must not, to go on timing and supervising it
 * (GNU timeout ignores SIGTTIN for the same reason). A listener stands for the SIG_IGN Node cannot
 * set. Only SIGTTIN: procwarden never reads that terminal itself (a caught SIGTTIN would make the
 * kernel retry such a read forever), while it does write to it, where a caught SIGTTOU would do the
 * same under `stty tostop`; SIGTTOU stops us with the command.
 *
 * A shell's `fg` sends no SIGCONT to a job it sees running (we are): once our group is the
 * terminal's foreground one again, `continueJob` continues what the read stopped, so the command
 * reads its terminal again (GNU timeout leaves it stopped until its time runs out).
 */
export function keepRunningWhileTheJobReads(continueJob: () => void): () => void {
  if (process.platform === 'win32') return () => {};
  let watching: ReturnType<typeof setInterval> | undefined;
  const stopWatching = () => {
    clearInterval(watching);
    watching = undefined;
  };
  const look = () => {
    if (!inForeground()) return;
    stopWatching();
    continueJob();
  };
  const stoppedReading = () => {
    if (watching) return;
    watching = setInterval(look, FOREGROUND_LOOK_MS);
    // The run, not this look, is what keeps procwarden alive.
    watching.unref();
  };
  process.on('SIGTTIN', stoppedReading);
  return () => {
    process.off('SIGTTIN', stoppedReading);
    stopWatching();
  };
}
