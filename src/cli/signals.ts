/** The signals that ask procwarden itself to stop; each cancels the run, then we exit 128+N. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Calls `onSignal` for every stop signal procwarden receives while the run lives (with how many
 * arrived so far, so a second Ctrl-C can mean "now"). Returns a function that uninstalls it.
 */
export function onStopSignals(onSignal: (signal: NodeJS.Signals, count: number) => void): () => void {
  let count = 0;
  const handler = (signal: NodeJS.Signals) => onSignal(signal, ++count);
  for (const s of STOP_SIGNALS) process.on(s, handler);
  return () => {
    for (const s of STOP_SIGNALS) process.off(s, handler);
  };
}
