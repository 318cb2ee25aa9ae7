import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { noteSpawned } from './procs.js';

/** The built CLI (npm test builds before vitest runs). */
export const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'cli', 'main.js');

export interface CliResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
  pid: number;
}

export interface CliOptions {
  input?: string | Buffer;
  env?: Record<string, string | undefined>;
  /** Run this file instead of dist/cli/main.js (a `timeout` link to it, say). */
  script?: string;
  cwd?: string;
  /** A program the CLI runs under, with its arguments (strace): it starts `node CLI ARGS`. */
  under?: string[];
}

/** Starts the CLI as a child process; stdout is collected as bytes, stderr as text. */
export function startCli(args: string[], options: CliOptions = {}) {
  const node = [process.execPath, options.script ?? CLI, ...args];
  const [file, ...rest] = [...(options.under ?? []), ...node] as [string, ...string[]];
  const child: ChildProcess = spawn(file, rest, {
    env: { ...process.env, NO_COLOR: undefined, ...options.env },
    cwd: options.cwd,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  noteSpawned(child.pid);
  const out: Buffer[] = [];
  let err = '';
  child.stdout?.on('data', (c: Buffer) => out.push(c));
  child.stderr?.on('data', (c: Buffer) => {
    err += c.toString('utf8');
  });
  child.stdin?.on('error', () => {});
  if (options.input !== undefined) child.stdin?.end(options.input);
  else child.stdin?.end();
  // Settles on exit; output is awaited only briefly after it, since a process deliberately left
  // alive (timeout --foreground, --keep-leftovers) may hold the pipes for as long as it lives.
  const done = new Promise<CliResult>((resolve) => {
    child.once('exit', async (status, signal) => {
      await Promise.race([
        new Promise((r) => child.once('close', r)),
        new Promise((r) => setTimeout(r, 500)),
      ]);
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve({ status, signal, stdout: Buffer.concat(out), stderr: err, pid: child.pid ?? 0 });
    });
  });
  return { child, done, stderr: () => err, stdout: () => Buffer.concat(out).toString('utf8') };
}

export function runCli(args: string[], options: CliOptions = {}): Promise<CliResult> {
  return startCli(args, options).done;
}

/** Every catchable signal whose default action ends a process (issue 12: each must end the tree). */
export const TERMINATING = [
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
] as const;

/** What fixtures/record-signals.sh wrote: the signals its parent and its child got, in order. */
export function recorded(dir: string): { parent: string[]; child: string[] } {
  const read = (who: string) => {
    try {
      return readFileSync(join(dir, `${who}.sig`), 'utf8')
        .split('\n')
        .filter(Boolean);
    } catch {
      return [];
    }
  };
  return { parent: read('parent'), child: read('child') };
}
