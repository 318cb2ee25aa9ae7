import { stopListening, TERMINATING_SIGNALS } from '../supervisor/index.js';
import type { EarlySignals } from './early-signals.js';
import { ownPipeBroke } from './write-now.js';

/**
 * The signals that ask procwarden itself to stop: every catchable one whose default would kill us
 * silently and leave the tree running. Listening also keeps SIGUSR1 from opening Node's inspector
 * in our process. Windows delivers only these three to a Node process.
 */
const STOP_SIGNALS: readonly NodeJS.Signals[] =
  process.platform === 'win32'
    ? ['SIGINT', 'SIGTERM', 'SIGHUP']
    : TERMINATING_SIGNALS.filter((s) => s !== 'SIGPROF' || !profiled());

/**
 * Under `node --cpu-prof` (or --prof) SIGPROF is V8's sampling clock, ticking every millisecond:
 * a listener would take the profiler's handler and read its first tick as a request to stop.
 */
export function profiled(): boolean {
  return [...process.execArgv, ...(process.env.NODE_OPTIONS?.split(/\s+/) ?? [])].some((a) =>
    /^--(cpu-prof|prof)(=|$|-)/.test(a),
  );
}

/** What a terminal sends to its foreground job: `run` passes these on as they are. */
export const TERMINAL_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGQUIT', 'SIGHUP'];

export interface StopSignals {
  /** Passes on the signals that came while the CLI loaded, as if they came now: once there is a run. */
  replayEarly(): void;
  /** Stops listening; before any replay (no run was started), what came goes back to `early`. */
  uninstall(): void;
}

/**
 * Calls `onSignal` for every stop signal procwarden receives while the run lives (with how many
 * arrived so far, so a second Ctrl-C can mean "now"). Those the entry recorded before we listened
 * are taken from `early` now, with no moment between in which a signal would kill us, and counted
 * first when replayed.
 */
export function onStopSignals(
  onSignal: (signal: NodeJS.Signals, count: number) => void,
  early?: EarlySignals,
): StopSignals {
  let count = 0;
  const handler = (signal: NodeJS.Signals) => {
    // Our own write into a closed stdout or stderr raises SIGPIPE too, after its EPIPE (which
    // every writer notes: noteWriteError): that one is not a request to stop. Whoever owns that
    // output decides what its EPIPE means.
    if (signal === 'SIGPIPE' && ownPipeBroke()) return;
    onSignal(signal, ++count);
  };
  for (const s of STOP_SIGNALS) process.on(s, handler);
  const pending = early?.take() ?? [];
  let replayed = false;
  return {
    replayEarly: () => {
      replayed = true;
      for (const signal of pending.splice(0)) handler(signal);
    },
    uninstall: () => {
      // The spawn refused the run (a missing --cwd): the signals taken, and one that came as the
      // command loaded and is not yet heard, end us as after any usage error (EarlySignals.release),
      // not lost to a 125 as if they had never come. Recording again before we stop listening.
      if (!replayed) early?.giveBack(pending.splice(0));
      for (const s of STOP_SIGNALS) stopListening(s, handler);
    },
  };
}
