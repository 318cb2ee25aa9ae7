import { constants } from 'node:os';
import { describeThrown, ProcwardenError } from '../errors.js';
import { checkDuration, elements, normalizeSignal, realtimeNumber } from '../options/index.js';
import type { ShutdownOptions } from '../types.js';

export interface Stoppable {
  shutdown(options?: ShutdownOptions): Promise<unknown>;
  /** Ends every grace now (SIGKILL). */
  killAll(): void;
}

export interface SignalHandlerOptions extends ShutdownOptions {
  /** Called once the shutdown is over; default process.exit. */
  exit?: (code: number) => void;
  /** The signals that shut down (default SIGINT and SIGTERM); see TERMINATING_SIGNALS. */
  signals?: readonly NodeJS.Signals[];
}

/**
 * Every catchable signal whose default action ends a process: what `procwarden run` and `timeout`
 * answer by ending the tree and exiting 128 + N.
 */
export const TERMINATING_SIGNALS: readonly NodeJS.Signals[] = [
  'SIGHUP',
  'SIGINT',
  'SIGQUIT',
  'SIGTERM',
  'SIGALRM',
  'SIGUSR1',
  'SIGUSR2',
  'SIGPIPE',
  'SIGXCPU',
  'SIGXFSZ',
  'SIGVTALRM',
  'SIGPROF',
];

/**
 * A library host keeps its other signals: SIGHUP may mean "reload", SIGUSR1 opens Node's inspector,
 * and a SIGPIPE listener would turn every write to a closed socket into a shutdown.
 */
const DEFAULT_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

const defaultExit = (code: number) => process.exit(code);

/** Node ignores these in its own process; removing the last listener would make them kill it. */
const IGNORED_BY_NODE: readonly string[] = ['SIGPIPE', 'SIGXFSZ'];
const stayIgnored = () => {};

/** process.off for a signal listener, leaving the signal as harmless as Node had made it. */
export function stopListening(signal: NodeJS.Signals, handler: (signal: NodeJS.Signals) => void): void {
  if (IGNORED_BY_NODE.includes(signal) && !process.listeners(signal).includes(stayIgnored)) {
    process.on(signal, stayIgnored);
  }
  process.off(signal, handler);
}

interface Installed {
  target: Stoppable;
  options: SignalHandlerOptions;
}

/**
 * The handlers of every supervisor in this process. Signals belong to the process, so one shutdown
 * must wait for every supervisor before anything exits; the state hangs off `process` under a
 * registered symbol so that two copies of procwarden loaded in one process share it too.
 */
class ProcessSignals {
  private readonly installed = new Set<Installed>();
  private readonly listening = new Map<NodeJS.Signals, () => void>();
  private stopping = false;

  add(entry: Installed): () => void {
    this.installed.add(entry);
    try {
      this.listen();
    } catch (error) {
      // A signal Node cannot listen to here: this entry is not installed, and no other is disturbed.
      this.installed.delete(entry);
      this.listen();
      throw new ProcwardenError(
        'INVALID_SIGNAL',
        `installSignalHandlers: cannot listen to ${(entry.options.signals ?? DEFAULT_SIGNALS).join(', ')} in this process (${(error as Error).message}).`,
        { cause: error },
      );
    }
    return () => {
      this.installed.delete(entry);
      this.listen();
    };
  }

  /** Listens to exactly the signals some installed entry asked for. */
  private listen(): void {
    const wanted = new Set<NodeJS.Signals>();
    for (const { options } of this.installed)
      for (const s of options.signals ?? DEFAULT_SIGNALS) wanted.add(s);
    for (const [signal, handler] of this.listening) {
      if (wanted.has(signal)) continue;
      stopListening(signal, handler);
      this.listening.delete(signal);
    }
    for (const signal of wanted) {
      if (this.listening.has(signal)) continue;
      const handler = () => this.received(signal);
      process.on(signal, handler);
      this.listening.set(signal, handler);
    }
  }

  private received(signal: NodeJS.Signals): void {
    const entries = [...this.installed];
    if (this.stopping) {
      for (const { target } of entries) target.killAll();
      return;
    }
    this.stopping = true;
    const code = 128 + (constants.signals[signal] ?? 0);
    // Inside a promise: whatever a shutdown throws is its failure, never an exception out of a
    // signal handler (which would leave `stopping` set for good).
    const shutdowns = entries.map(({ target, options }) =>
      Promise.resolve().then(() =>
        target.shutdown(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
      ),
    );
    // Each distinct exit callback once, after every supervisor's trees are gone.
    const exits = new Set(entries.map(({ options }) => options.exit ?? defaultExit));
    void Promise.allSettled(shutdowns).then(() => {
      // A custom callback may leave the process running: the next signal is a new shutdown.
      this.stopping = false;
      // The default, process.exit, last: it never returns. One that throws keeps none of the
      // others from running; its error is thrown after them, as a listener's would be.
      const failures: unknown[] = [];
      for (const exit of exits) {
        if (exit === defaultExit) continue;
        try {
          exit(code);
        } catch (error) {
          failures.push(error);
        }
      }
      if (exits.has(defaultExit)) {
        for (const error of failures)
          process.stderr.write(
            `procwarden: an exit callback of installSignalHandlers threw: ${describeThrown(error)}\n`,
          );
        defaultExit(code);
      }
      if (failures.length === 1) throw failures[0];
      if (failures.length > 1)
        throw new AggregateError(
          failures,
          `${failures.length} exit callbacks of installSignalHandlers threw`,
        );
    });
  }
}

const KEY = Symbol.for('procwarden.processSignals');

function processSignals(): ProcessSignals {
  const holder = process as unknown as Record<symbol, ProcessSignals | undefined>;
  holder[KEY] ??= new ProcessSignals();
  return holder[KEY];
}

/**
 * SIGINT / SIGTERM (or `options.signals`) to the host: a graceful shutdown of every supervisor that
 * installed handlers, then exit with 128 + N, as a shell reports death by signal N. A second signal
 * during the shutdown ends every grace at once. Returns a function that removes the handlers.
 */
export function installSignalHandlers(target: Stoppable, options: SignalHandlerOptions = {}): () => void {
  return processSignals().add({ target, options: checkHandlerOptions(options) });
}

/** SIGKILL and SIGSTOP cannot be caught: asking for them is a mistake to report, not to ignore. */
const UNCATCHABLE: readonly string[] = ['SIGKILL', 'SIGSTOP'];

/** Checked before anything is installed: one bad call must not leave the process's handlers half set. */
function checkHandlerOptions(options: SignalHandlerOptions): SignalHandlerOptions {
  if (typeof options !== 'object' || options === null) {
    throw new ProcwardenError('INVALID_OPTION', 'installSignalHandlers takes an options object, or nothing.');
  }
  // Read once, kept as read: a later change to the caller's object changes nothing here.
  const { signals, graceMs, exit } = options;
  if (graceMs !== undefined) checkDuration(graceMs, 'installSignalHandlers graceMs');
  if (exit !== undefined && typeof exit !== 'function') {
    throw new ProcwardenError(
      'INVALID_OPTION',
      'installSignalHandlers exit must be a function (code) => void.',
    );
  }
  const checked: SignalHandlerOptions = {
    ...(graceMs !== undefined && { graceMs }),
    ...(exit !== undefined && { exit }),
  };
  if (signals === undefined) return checked;
  if (!Array.isArray(signals)) {
    throw new ProcwardenError(
      'INVALID_SIGNAL',
      "installSignalHandlers signals must be an array of signal names, e.g. ['SIGINT', 'SIGTERM'].",
    );
  }
  // By index, holes too: [, 'SIGINT'] is refused, not read as ['SIGINT'].
  const names = elements(signals).map((s) => normalizeSignal(s, 'installSignalHandlers signals'));
  for (const name of names) {
    if (UNCATCHABLE.includes(name)) {
      throw new ProcwardenError(
        'INVALID_SIGNAL',
        `installSignalHandlers: ${name} cannot be caught by any process.`,
      );
    }
    // Node has no listener for a real-time signal: process.on would take it and never fire.
    if (realtimeNumber(name) !== undefined) {
      throw new ProcwardenError(
        'INVALID_SIGNAL',
        `installSignalHandlers: Node cannot listen to ${name} (a real-time signal); pass signals Node names, e.g. 'SIGTERM'.`,
      );
    }
  }
  return { ...checked, signals: [...new Set(names)] };
}
