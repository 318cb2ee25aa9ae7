// npm run bench [-- --quick] [-- --only=1,2]: every figure side by side, contenders alternated.
// A full run writes results/latest.{json,md}; --only (without --quick) updates those figures there.
import { execSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tracker } from './lib/cleanup.mjs';
import { reaped, reexecUnderSubreaper } from './lib/reaper.mjs';
import { renderMarkdown, renderText } from './lib/table.mjs';

const exitCode = await reexecUnderSubreaper();
if (exitCode !== null) process.exit(exitCode);

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const only = args
  .find((a) => a.startsWith('--only='))
  ?.slice(7)
  .split(',')
  .map(Number);
const reps = quick ? 3 : 5;

const FIGURES = [
  'spawn',
  'kill-tree',
  'grace',
  'output',
  'scale',
  'sweep',
  'startup',
  'tree-kill-survivors',
  'stalled-reader',
  'survivors',
];

const machine = {
  nproc: Number(execSync('nproc').toString().trim()),
  cpu: cpus()[0]?.model ?? 'unknown',
  node: process.version,
  kernel: release(),
  subreaper: reaped(),
  // The machine is shared: the load says how far to trust the numbers.
  loadavgAtStart: loadavg().map((x) => Number(x.toFixed(1))),
  date: new Date().toISOString(),
};
console.log(
  `procwarden bench${quick ? ' --quick' : ''}: ${machine.nproc} cores (${machine.cpu}), node ${machine.node}, Linux ${machine.kernel}, load ${machine.loadavgAtStart.join(' ')}; median of ${reps}, contenders alternated\n`,
);

const started = performance.now();
const tracker = new Tracker();
const figures = [];
let leaked = 0;
for (const file of FIGURES) {
  const { default: figure } = await import(`./${file}.mjs`);
  if (only && !only.includes(figure.id)) continue;
  const t0 = performance.now();
  const result = await figure.run({ quick, reps, tracker });
  const survivors = await tracker.sweep();
  leaked += survivors;
  const seconds = (performance.now() - t0) / 1000;
  const done = { id: figure.id, title: figure.title, unit: figure.unit, seconds, ...result };
  if (survivors > 0) done.notes = [...(done.notes ?? []), `${survivors} processes survived and were killed`];
  figures.push(done);
  console.log(`${renderText(done)}\n  (${seconds.toFixed(1)} s)\n`);
  // Written after every figure, so that an interrupted full run keeps what it measured.
  if (!quick) save();
}
console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s; leaked processes: ${leaked}`);
if (!quick) console.log('wrote bench/results/latest.json and latest.md');
process.exit(leaked > 0 ? 1 : 0);

/** Full runs write results/; with --only, the figures measured replace theirs in the last results. */
function save() {
  const dir = join(dirname(fileURLToPath(import.meta.url)), 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'latest.json');
  machine.loadavgAtEnd = loadavg().map((x) => Number(x.toFixed(1)));
  machine.seconds = Math.round((performance.now() - started) / 1000);
  let all = figures;
  if (only && existsSync(file)) {
    const ids = new Set(figures.map((f) => f.id));
    const before = JSON.parse(readFileSync(file, 'utf8')).figures.filter((f) => !ids.has(f.id));
    all = [...before, ...figures].sort((a, b) => a.id - b.id);
  }
  writeFileSync(file, `${JSON.stringify({ machine, reps, figures: all }, null, 2)}\n`);
  const md = [
    `Measured ${machine.date.slice(0, 10)} on ${machine.nproc} cores (${machine.cpu}), Node ${machine.node}, Linux ${machine.kernel}; load average ${machine.loadavgAtStart[0]} at start, ${machine.loadavgAtEnd[0]} at end (a shared machine); median of ${reps} repetitions (min, max shown), contenders alternated; ratios against the raw baseline of each case.`,
    ...all.map((f) => `${renderMarkdown(f)}\n\n(${Math.round(f.seconds ?? 0)} s)`),
  ].join('\n\n');
  writeFileSync(join(dir, 'latest.md'), `${md}\n`);
}
