// PTY exit status under stress: `cat` on a terminal, one line typed, then end-of-input (Ctrl-D).
// cat exits 0 every time; any other result is a misreport (issue 14: SIGHUP from a hung-up terminal).
// Usage: npm run build && node bench/pty-exit-status.mjs [N=500] [parallel=1]
// Prints the count of misreports and each distinct wrong result; exits 1 if there was any.
import { Supervisor } from '../dist/index.js';

const N = Number(process.argv[2] ?? 500);
const parallel = Number(process.argv[3] ?? 1);
const sup = new Supervisor();

async function once() {
  let seen = '';
  let echoed;
  const echo = new Promise((resolve) => {
    echoed = resolve;
  });
  const handle = sup.spawn({
    argv: ['cat'],
    mode: 'pty',
    stdin: 'pipe',
    output: {
      onData: (text) => {
        seen += text;
        if (seen.split('hello').length > 2) echoed(); // typed echo + cat's copy
      },
    },
  });
  handle.stdin.write('hello\n');
  await echo;
  handle.stdin.end();
  const r = await handle.result;
  return r.reason === 'exit' && r.exitCode === 0
    ? null
    : `${r.reason} code=${r.exitCode} signal=${r.exitSignal}`;
}

const wrong = new Map();
let misreports = 0;
let next = 0;
const started = Date.now();
await Promise.all(
  Array.from({ length: parallel }, async () => {
    while (next < N) {
      next++;
      const bad = await once();
      if (bad) {
        misreports++;
        wrong.set(bad, (wrong.get(bad) ?? 0) + 1);
      }
    }
  }),
);
console.log(
  `${misreports} misreports in ${N} runs of cat + Ctrl-D (${parallel} at a time, ${Date.now() - started} ms)`,
);
for (const [what, count] of wrong) console.log(`  ${count} x ${what}`);
process.exitCode = misreports === 0 ? 0 : 1;
