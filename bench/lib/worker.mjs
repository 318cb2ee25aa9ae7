import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const WORKERS = join(dirname(fileURLToPath(import.meta.url)), '..', 'workers');

/** Runs bench/workers/<name>.mjs in a fresh node process and parses the JSON it prints. */
export function runWorker(name, args, nodeFlags = []) {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...nodeFlags, join(WORKERS, `${name}.mjs`), ...args.map(String)],
      { maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`worker ${name} ${args.join(' ')} failed: ${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout));
      },
    );
  });
}
