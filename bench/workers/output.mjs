// One contender, one repetition, in a fresh process so that peak RSS is its own:
// node --expose-gc workers/output.mjs <raw|raw-detached|raw-decoded|procwarden|procwarden-bytes> <bytes>
//   ->  JSON on stdout.
import { spawn } from 'node:child_process';
import { run } from '../../dist/index.js';

const [contender, bytesArg] = process.argv.slice(2);
const bytes = Number(bytesArg);
const argv = ['sh', '-c', `yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c ${bytes}`];

function raw(detached, decoded) {
  return new Promise((resolve, reject) => {
    let seen = 0;
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], detached });
    // What a consumer that wants text does: one UTF-8 decoder, as onData's.
    if (decoded) child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      seen += chunk.length;
    });
    child.stderr.resume();
    child.once('error', reject);
    child.once('close', () => resolve(seen));
  });
}

async function procwarden(bytesOnly) {
  let seen = 0;
  const count = (piece) => {
    seen += piece.length; // ASCII output: one char per byte
  };
  const r = await run({ argv, output: bytesOnly ? { onBytes: count } : { onData: count } }).result;
  if (r.stdout.bytes !== bytes) throw new Error(`procwarden saw ${r.stdout.bytes} bytes`);
  return seen;
}

globalThis.gc?.();
const rssBefore = process.memoryUsage().rss;
const t0 = performance.now();
const seen = await (contender.startsWith('procwarden')
  ? procwarden(contender === 'procwarden-bytes')
  : raw(contender === 'raw-detached', contender === 'raw-decoded'));
const ms = performance.now() - t0;
if (seen !== bytes) throw new Error(`${contender}: ${seen} of ${bytes} bytes arrived`);
const peak = process.resourceUsage().maxRSS * 1024;
process.stdout.write(JSON.stringify({ ms, bytes, rssGrowth: Math.max(0, peak - rssBefore) }));
