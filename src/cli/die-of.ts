import { profiled } from './signals.js';

/**
 * Signals whose default action ends a process without a core dump, and that Node leaves at that
 * default once nothing listens (libuv sets SIG_DFL when its last handler for a signal stops: so
 * also SIGPIPE, which Node otherwise ignores). Not SIGUSR1 (Node's inspector handler); SIGPROF only
 * when no profiler has it as its clock (below); not the core-dumping ones either: timeout(1) raises those only
 * where it can turn core dumps off first, which Node cannot.
 */
const DIES_QUIETLY: readonly string[] = [
  'SIGHUP',
  'SIGINT',
  'SIGTERM',
  'SIGKILL',
  'SIGPIPE',
  'SIGALRM',
  'SIGUSR2',
  'SIGVTALRM',
  'SIGSTKFLT',
  'SIGIO',
  'SIGPWR',
];

/**
 * Once everything else is done (the event loop empty: every write out, the watchdog told), this
 * process kills itself with `signal`, so its parent sees it die of the signal its command died of,
 * as under timeout(1). Where that cannot be done, or does not end it, the process exits with the
 * status already set (128+N).
 */
export function dieOfAtExit(signal: string): void {
  if (process.platform === 'win32') return;
  // SIGPROF is the profiler's clock only under a profiler; otherwise its default ends us quietly.
  if (!DIES_QUIETLY.includes(signal) && (signal !== 'SIGPROF' || profiled())) return;
  process.once('beforeExit', () => {
    // Nothing may catch it now, and a signal Node ignores is at its default once a listener of
    // its own has come and gone.
    const name = signal as NodeJS.Signals;
    try {
      // SIGKILL cannot have a listener (EINVAL), nor be caught or ignored.
      if (name !== 'SIGKILL') process.on(name, () => {});
      process.removeAllListeners(name);
      process.kill(process.pid, name);
    } catch {
      // exits with the status set
    }
  });
}
