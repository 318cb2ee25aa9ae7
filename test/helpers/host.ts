import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fixture, noteSpawned, waitFor } from './procs.js';

/** A host script (a Node process using the built library) and the lines it printed. */
export interface Host {
  child: ChildProcess;
  lines: string[];
  /** Resolves with the rest of the first line starting with `prefix `. */
  line(prefix: string, timeoutMs?: number): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once its pipes closed too (its last lines read): made at the start, so never missed. */
  closed: Promise<void>;
  /** What it wrote to stderr so far (also passed on to ours). */
  stderr(): string;
}

export function startHost(script: string, args: string[], env: Record<string, string> = {}): Host {
  const child = spawn(process.execPath, [fixture(script), ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  noteSpawned(child.pid);
  const lines: string[] = [];
  let buffer = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    const parts = buffer.split('\n');
    buffer = parts.pop() ?? '';
    lines.push(...parts);
  });
  // Passed on as it comes (a failing host's stderr is what explains it), and kept to be asked.
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    process.stderr.write(chunk);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  return {
    child,
    lines,
    exited,
    closed,
    stderr: () => stderr,
    line: (prefix, timeoutMs = 20_000) =>
      waitFor(() => lines.find((l) => l.startsWith(`${prefix} `))?.slice(prefix.length + 1), {
        timeoutMs,
        what: `host line "${prefix}"`,
      }),
  };
}

/** The journal's files (records, temporaries, anything else). */
export function journalFiles(stateDir: string): string[] {
  try {
    return readdirSync(stateDir);
  } catch {
    return [];
  }
}
