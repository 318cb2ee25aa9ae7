/**
 * What the host says to its watchdog over the pipe. Only one thing is ever said: "clean" (a normal
 * shutdown, nothing to reap). Everything else the watchdog needs is the pipe's end-of-file.
 */
export const CLEAN = 'clean\n';

/** The watchdog's command line after the script: whose records it reaps and where they are. */
export interface WatchdogArgs {
  supervisorId: string;
  hostPid: number;
  stateDir: string;
}

export function toArgv(args: WatchdogArgs): string[] {
  return [args.supervisorId, String(args.hostPid), args.stateDir];
}

export function fromArgv(argv: readonly string[]): WatchdogArgs | null {
  const [supervisorId, pid, stateDir] = argv;
  const hostPid = Number(pid);
  if (!supervisorId || !stateDir || !Number.isInteger(hostPid) || hostPid <= 1) return null;
  return { supervisorId, hostPid, stateDir };
}
