// Live sessions: turn round trip through a session vs a raw child_process pipe, and close latencies.
// Run: npm run build && node bench/live-session.mjs [turns]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { LiveSessionPool, Supervisor } from '../dist/index.js';

const AGENT = new URL('../test/fixtures/live-agent.mjs', import.meta.url).pathname;
const TURNS = Number(process.argv[2] ?? 300);
const dir = mkdtempSync(join(tmpdir(), 'pw-bench-live-'));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

async function turns(send, nextLine) {
  const times = [];
  for (let id = 1; id <= TURNS; id++) {
    const t0 = process.hrtime.bigint();
    send(`${JSON.stringify({ cmd: 'turn', id, text: 'x' })}\n`);
    await nextLine();
    times.push(ms(t0));
  }
  return median(times);
}

// Raw: node:child_process with a readline over stdout.
const raw = spawn(process.execPath, [AGENT, dir], { stdio: ['pipe', 'pipe', 'inherit'] });
const rawLines = createInterface({ input: raw.stdout })[Symbol.asyncIterator]();
await rawLines.next(); // ready
const rawMs = await turns(
  (d) => raw.stdin.write(d),
  () => rawLines.next(),
);
raw.kill();

// procwarden: a pooled live session.
const pool = new LiveSessionPool({ supervisor: new Supervisor() });
const session = await pool.acquire('bench', { argv: [process.execPath, AGENT, dir] });
const nextLine = () => new Promise((resolve) => session.once('line', resolve));
await nextLine(); // ready
const liveMs = await turns((d) => session.write(d), nextLine);

// Drained close: from the last release to the tree being gone.
const child = session.attachChild('c');
await session.close('restart');
let t0 = process.hrtime.bigint();
child.release();
await session.closed;
const drainedCloseMs = ms(t0);

// Immediate close with a live background child.
const second = await pool.acquire('bench', { argv: [process.execPath, AGENT, dir] });
await new Promise((resolve) => second.once('line', resolve));
second.write(`${JSON.stringify({ cmd: 'spawn', name: 'w', ms: 60_000 })}\n`);
await new Promise((resolve) => second.once('line', resolve));
second.attachChild('w');
t0 = process.hrtime.bigint();
await second.close('abort');
const abortCloseMs = ms(t0);

rmSync(dir, { recursive: true, force: true });
console.log(
  `turn round trip, median of ${TURNS}: raw pipe ${rawMs.toFixed(3)} ms, live session ${liveMs.toFixed(3)} ms (x${(liveMs / rawMs).toFixed(2)})`,
);
console.log(`close after drain (last release -> tree gone): ${drainedCloseMs.toFixed(1)} ms`);
console.log(`close('abort') with a live child (-> tree gone): ${abortCloseMs.toFixed(1)} ms`);
