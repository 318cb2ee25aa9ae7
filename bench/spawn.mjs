import { spawn } from 'node:child_process';
import { execa } from 'execa';
import nanoSpawn from 'nano-spawn';
import { x } from 'tinyexec';
import { Supervisor } from '../dist/index.js';
import { alternate, withRatios } from './lib/stats.mjs';

const TRUE = '/bin/true';
const RAW = 'raw child_process.spawn';

/** Raw baseline: what every contender does at least (piped stdout/stderr, wait for 'close'). */
function rawOnce() {
  return new Promise((resolve, reject) => {
    const child = spawn(TRUE, [], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
}

function procwardenOnce(sup, containment) {
  return async () => {
    const r = await sup.spawn({ argv: [TRUE], ...(containment ? { containment } : {}) }).result;
    if (r.reason !== 'exit' || r.exitCode !== 0)
      throw new Error(`procwarden: ${r.reason} ${r.error?.message}`);
  };
}

async function pool(count, concurrency, once) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      await once();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

export default {
  id: 1,
  title: 'spawn + wait of /bin/true',
  unit: 'ms',
  async run({ quick, reps }) {
    const count = quick ? 25 : 500;
    const sup = new Supervisor();
    const probe = await sup.spawn({ argv: [TRUE] }).result;
    const contenders = [
      { name: RAW, once: rawOnce },
      { name: 'procwarden (process-group)', once: procwardenOnce(sup, 'process-group') },
      { name: 'execa', once: () => execa(TRUE) },
      { name: 'nano-spawn', once: () => nanoSpawn(TRUE) },
      { name: 'tinyexec', once: () => x(TRUE, [], { throwOnError: true }) },
    ];
    // Once cgroup containment lands, 'auto' may pick it: measure what users get by default too.
    if (probe.containment !== 'process-group') {
      contenders.splice(2, 0, {
        name: `procwarden (auto = ${probe.containment})`,
        once: procwardenOnce(sup),
      });
    }
    for (const c of contenders) await c.once(); // warm up: module loading, first-spawn costs
    const cases = [];
    for (const [name, concurrency] of [
      [`${count} sequential`, 1],
      [`${count} at concurrency 16`, 16],
    ]) {
      const rows = await alternate(contenders, reps, async (c) => {
        const t0 = performance.now();
        await pool(count, concurrency, c.once);
        return performance.now() - t0;
      });
      cases.push({ name, rows: withRatios(rows, RAW) });
    }
    const goals = cases.map((c) => {
      const pw = c.rows.find((r) => r.contender.startsWith('procwarden (process-group)'));
      return {
        text: `procwarden ≤ 1.10× raw (${c.name})`,
        value: `${pw.ratio.toFixed(2)}×`,
        met: pw.ratio <= 1.1,
      };
    });
    return { cases, goals, notes: [`per spawn: divide by ${count}`] };
  },
};
