import { constants } from 'node:os';
import type { ShutdownOptions } from '../types.js';

export interface Stoppable {
  shutdown(options?: ShutdownOptions): Promise<unknown>;
  /** Ends every grace now (SIGKILL). */
  killAll(): void;
}

export interface SignalHandlerOptions extends ShutdownOptions {
  /** Called once the shutdown is over; default process.exit. */
  exit?: (code: number) => void;
}

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/**
 * SIGINT / SIGTERM to the host: a graceful shutdown of every run, then exit with 128 + N, as a
 * shell reports death by signal N. A second signal during the shutdown ends the grace at once.
 * Returns a function that removes the handlers.
 */
export function installSignalHandlers(target: Stoppable, options: SignalHandlerOptions = {}): () => void {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let stopping = false;
  const handlers = SIGNALS.map((signal) => {
    const handler = () => {
      if (stopping) {
        target.killAll();
        return;
      }
      stopping = true;
      const code = 128 + (constants.signals[signal] ?? 0);
      const done = () => exit(code);
      target.shutdown(options.graceMs === undefined ? {} : { graceMs: options.graceMs }).then(done, done);
    };
    process.on(signal, handler);
    return [signal, handler] as const;
  });
  return () => {
    for (const [signal, handler] of handlers) process.off(signal, handler);
  };
}
