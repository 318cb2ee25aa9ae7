import { statSync } from 'node:fs';
import { util } from '../lazy-builtins.js';
import { cwdProblem, type NormalSpec } from '../options/index.js';
import { lookUp } from '../spawn/index.js';

/** What a user reads when the command could not be started: what was wrong, not Node's `spawn X E`. */
export function spawnMessage(spec: NormalSpec, error: NodeJS.ErrnoException): string {
  const command = spec.argv[0];
  // Node says `spawn pwd EACCES` whether the exec or the chdir before it failed: the cwd, when it
  // is what cannot be entered, is what the message names.
  const cwd = spec.cwd === undefined ? null : cwdProblem(spec.cwd);
  if (cwd) return cwd.message;
  switch (error.code) {
    case 'ENOENT': {
      // The file is there: what the exec did not find is the interpreter its #! line names.
      const found = process.platform === 'win32' ? null : lookUp(command, spec.cwd, spec.env.PATH, isFile);
      return found !== null && found !== 'unknown'
        ? `${command}: its interpreter (the #! line) was not found.`
        : `${command}: command not found (no such file in PATH or at that path).`;
    }
    case 'EACCES':
      return isDirectory(command)
        ? `${command}: is a directory, not a program.`
        : `${command}: permission denied; is the file executable?`;
    default: {
      // Node's message is `spawn ENOTDIR`; libuv's text for the code says what it means.
      const text = error.errno === undefined ? undefined : util().getSystemErrorMap().get(error.errno)?.[1];
      // node-pty's own messages end with a full stop ("forkpty(3) failed.").
      const why = text ? `${text} (${error.code})` : error.message.replace(/\.$/, '');
      return `${command}: could not be started: ${why}.`;
    }
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
