/**
 * The reaper of a dead host (started by its guard, see ./script.ts and ./guard.ts): ends what is
 * left of that host's runs, from their records in the state directories the host named, each with
 * its own signal and grace (a grace the host had begun goes on), and exits. Only that host's
 * records are read (by name, then pid and start time): another supervisor's are not its business.
 *
 * The signals its guard ignores are ignored here from the first statement, before anything else
 * loads: Node reset them to their defaults at start-up. On Windows there is no shell to wait in:
 * with --wait this process is the guard, and reads the host's lines itself.
 */
for (const signal of ['SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGUSR1', 'SIGUSR2', 'SIGALRM', 'SIGPIPE'])
  try {
    process.on(signal as NodeJS.Signals, () => {});
  } catch {
    // not a signal on this platform
  }

const argv = process.argv.slice(2);
const waits = argv[0] === '--wait';
if (waits) argv.shift();

async function main(): Promise<number> {
  const { parseReaperArgs } = await import('./script.js');
  const lines = waits ? await hostLines() : null;
  if (lines && !lines.busy) return 0;
  const args = parseReaperArgs(lines ? [...argv, ...lines.dirs] : argv);
  if (!args) return 2;
  process.title = `procwarden-reaper ${args.hostPid}`;
  const { reap } = await import('../journal/index.js');
  const { CoalescingTable, platformTable } = await import('../tree/index.js');
  // One table for every directory: their runs' sweeps are shared, not made once per directory.
  const table = new CoalescingTable(platformTable());
  const reports = await Promise.all(
    args.stateDirs.map((stateDir) =>
      reap({ stateDir, table, deadHost: { pid: args.hostPid, start: args.hostStart } }).catch(() => null),
    ),
  );
  return reports.every((r) => r !== null && r.survivors === 0) ? 0 : 1;
}

/** The guard's protocol read here (Windows): until end-of-file, the last busy state and the directories. */
function hostLines(): Promise<{ busy: boolean; dirs: string[] }> {
  return new Promise((resolve) => {
    let busy = false;
    let rest = '';
    const dirs: string[] = [];
    const take = (line: string) => {
      if (line === 'b') busy = true;
      else if (line === 'i') busy = false;
      else if (line.startsWith('d')) dirs.push(line.slice(1));
    };
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (text: string) => {
      const parts = (rest + text).split('\n');
      rest = parts.pop() ?? '';
      for (const line of parts) take(line.replace(/\r$/, ''));
    });
    const done = () => resolve({ busy, dirs });
    process.stdin.on('end', done);
    process.stdin.on('error', done);
  });
}

main().then(
  (code) => process.exit(code),
  () => process.exit(1),
);
