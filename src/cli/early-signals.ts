/**
 * A stop signal that comes while the CLI is still loading (over a second on a loaded machine) would
 * kill us with the default action before `run` or `timeout` listens, and the command it was meant
 * for would never hear of it. The entry's first statement records them instead; the command takes
 * them once its own handlers are in place, and passes them on as if they had come then.
 *
 * Nothing here may import anything: this runs before the rest of the CLI is loaded.
 */
const EARLY: readonly NodeJS.Signals[] =
  process.platform === 'win32' ? ['SIGINT', 'SIGTERM', 'SIGHUP'] : ['SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM'];

export interface EarlySignals {
  /** Stops recording and returns what came, in order: call it once the command's handlers listen. */
  take(): NodeJS.Signals[];
  /**
   * For a command that took them and then started nothing (the spawn refused it: a missing --cwd):
   * they are recorded again, with any that came since and were not yet heard (a signal is heard a
   * turn of the loop after it came: one that came as the command loaded may still be on its way),
   * until `release` ends us with them. Call it before the command stops listening.
   */
  giveBack(signals: readonly NodeJS.Signals[]): void;
  /**
   * Runs `fn`, which may block for as long as another process likes (opening a FIFO that no one
   * reads yet), with the default actions back, as without the recorder: a signal then ends us, not
   * waits unheard for a loop that cannot turn. One that came before ends us first.
   */
  unguarded<T>(fn: () => T): Promise<T>;
  /**
   * For a run that ends before taking them (a usage error), or that gave them back: stops
   * recording, and a signal that came ends us as it would have without the recorder.
   */
  release(): Promise<void>;
}

/** Starts recording when `wanted` (a command that passes signals on), else records nothing. */
export function recordEarlySignals(wanted: boolean): EarlySignals {
  const came: NodeJS.Signals[] = [];
  const record = (signal: NodeJS.Signals) => {
    came.push(signal);
  };
  let recording = false;
  const start = () => {
    if (recording) return;
    recording = true;
    for (const s of EARLY) process.on(s, record);
  };
  if (wanted) start();
  const stop = () => {
    if (!recording) return false;
    recording = false;
    for (const s of EARLY) process.off(s, record);
    return true;
  };
  // A signal is heard a turn of the loop after it came: one that came as our last code ran is
  // waited for. With our listener gone the default action is back, and the first that came does
  // what it would have done without the recorder (pid 1 of a namespace: nothing, it stays recorded).
  const endWithWhatCame = async () => {
    await new Promise((resolve) => setImmediate(resolve));
    if (stop() && came[0]) process.kill(process.pid, came[0]);
  };
  return {
    take: () => (stop() ? came.splice(0) : []),
    giveBack: (signals) => {
      came.unshift(...signals);
      start();
    },
    unguarded: async (fn) => {
      if (!recording) return fn();
      await endWithWhatCame();
      try {
        return fn();
      } finally {
        start();
      }
    },
    release: async () => {
      if (recording) await endWithWhatCame();
    },
  };
}
