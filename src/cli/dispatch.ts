import { UsageError } from './args.js';
import type { EarlySignals } from './early-signals.js';
import { EXIT_FAILED, EXIT_FAILURE, EXIT_USAGE } from './exit-codes.js';
import { MAIN_HELP } from './help.js';
import { closeHungUpTerminalsAtExit } from './hung-up.js';
import type { Invocation } from './invocation.js';
import { packageVersion } from './version.js';
import { writeNow } from './write-now.js';

/** A command; `early` holds the stop signals that came while it loaded, for one that passes them on. */
type CommandFn = (args: string[], prog: string, early: EarlySignals) => Promise<number>;

interface Command {
  /** Loaded only when named: `timeout` needs neither live sessions, the PTY, nor the journal's reaper. */
  load(): Promise<CommandFn>;
  /** The status for a failure of procwarden itself: 125 where the command's statuses own the rest. */
  failStatus: number;
}

// One entry per command: a command is a file in this folder exporting its function.
const COMMANDS: Record<string, Command> = {
  run: { load: async () => (await import('./run.js')).runCommand, failStatus: EXIT_FAILED },
  timeout: { load: async () => (await import('./timeout.js')).timeoutCommand, failStatus: EXIT_FAILED },
  kill: { load: async () => (await import('./kill.js')).killCommand, failStatus: EXIT_FAILURE },
  tree: { load: async () => (await import('./tree.js')).treeCommand, failStatus: EXIT_FAILURE },
  proof: { load: async () => (await import('./proof.js')).proofCommand, failStatus: EXIT_FAILURE },
  reap: { load: async () => (await import('./reap.js')).reapCommand, failStatus: EXIT_FAILURE },
};

interface Resolved {
  prog: string;
  command: Command | null;
  args: string[];
}

function resolve({ name, args, linked }: Invocation): Resolved {
  // Own keys only: `procwarden constructor` is an unknown command, not Object's.
  const command = name !== undefined && Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (linked) return { prog: 'timeout', command: command ?? null, args };
  return command
    ? { prog: `procwarden ${name}`, command, args }
    : { prog: 'procwarden', command: null, args: name === undefined ? [] : [name, ...args] };
}

/** procwarden with no command: help, version, or a usage error. */
function topLevel(args: string[]): number {
  const [name] = args;
  if (name === undefined) {
    writeNow(2, MAIN_HELP);
    return EXIT_USAGE;
  }
  if (name === '-h' || name === '--help' || name === 'help') {
    writeNow(1, MAIN_HELP);
    return 0;
  }
  if (name === '-V' || name === '--version') {
    writeNow(1, `procwarden ${packageVersion()}\n`);
    return 0;
  }
  throw new UsageError(
    name.startsWith('-') ? `unrecognized option '${name}'` : `unknown command '${name}'`,
    EXIT_USAGE,
  );
}

async function main(asked: Invocation, early: EarlySignals): Promise<number> {
  const { prog, command, args } = resolve(asked);
  try {
    if (!command) return topLevel(args);
    closeHungUpTerminalsAtExit();
    // A warning (records that went nowhere, say) in one line of ours, not Node's two.
    process.removeAllListeners('warning');
    process.on('warning', (warning) => writeNow(2, `${prog}: warning: ${warning.message}\n`));
    // Before the command's code loads, so that its compiled code is kept between runs (a chunk of
    // its own: `--version` needs none of it).
    (await import('./code-cache.js')).cacheOwnCode();
    return await (await command.load())(args, prog, early);
  } catch (error) {
    if (error instanceof UsageError) {
      if (error.message) process.stderr.write(`${prog}: ${error.message}\n`);
      if (error.hint) process.stderr.write(`Try '${prog} --help' for more information.\n`);
      return error.status;
    }
    // Never a stack trace for the user; the message is what they can act on.
    process.stderr.write(`${prog}: ${(error as Error)?.message ?? String(error)}\n`);
    // Without a command, only the help or version could fail, to be written (write error: ENOSPC).
    return command?.failStatus ?? EXIT_FAILURE;
  }
}

/** The CLI, once the entry (main.ts) listens for early signals. */
export function dispatch(asked: Invocation, early: EarlySignals): void {
  // Let stdout and stderr drain before leaving: process.exit() could cut piped output short.
  main(asked, early).then(async (status) => {
    await early.release();
    process.exitCode = status;
  });
}
