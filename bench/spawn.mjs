import { spawn } from 'node:child_process';
import { execa } from 'execa';
import nanoSpawn from 'nano-spawn';
import { x } from 'tinyexec';
import { Supervisor } from '../dist/index.js';
import { PsTable } from '../dist/tree/index.js';
import { containmentUnavailable } from './lib/contend.mjs';
import { loadExeca10, requireExeca10 } from './lib/execa10.mjs';
import { alternate, NotApplicable, withRatios } from './lib/stats.mjs';

const TRUE = '/bin/true';
const RAW = 'raw child_process.spawn';
const PS = 'procwarden (process-group, ps table)';
const MODES = ['process-group', 'cgroup'];

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

function procwardenOnce(sup, containment, unavailable = null) {
  return async () => {
    if (unavailable) throw new NotApplicable(unavailable);
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
    // The path every macOS and BSD user takes, forced here on Linux: the table read by ps.
    const psSup = new Supervisor({ table: new PsTable() });
    const noCgroup = await containmentUnavailable(sup, 'cgroup');
    const execa10 = await loadExeca10();
    const contenders = [
      { name: RAW, once: rawOnce },
      { name: 'procwarden (process-group)', once: procwardenOnce(sup, 'process-group') },
      { name: 'procwarden (cgroup)', once: procwardenOnce(sup, 'cgroup', noCgroup) },
      { name: PS, once: procwardenOnce(psSup, 'process-group') },
      { name: 'execa', once: () => execa(TRUE) },
      {
        name: 'execa 10 (killDescendants)',
        once: async () => requireExeca10(execa10)(TRUE, { killDescendants: true }),
      },
      { name: 'nano-spawn', once: () => nanoSpawn(TRUE) },
      { name: 'tinyexec', once: () => x(TRUE, [], { throwOnError: true }) },
    ];
    // Warm up: module loading, first-spawn costs (n/a contenders say so in their row).
    for (const c of contenders) {
      try {
        await c.once();
      } catch (error) {
        if (!(error instanceof NotApplicable)) throw error;
      }
    }
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
    const goals = [];
    for (const mode of MODES) {
      for (const c of cases) {
        const pw = c.rows.find((r) => r.contender === `procwarden (${mode})`);
        goals.push(
          pw.na
            ? {
                text: `procwarden ${mode} ≤ 1.10× raw (${c.name})`,
                value: 'not measured (see row)',
                met: null,
              }
            : {
                text: `procwarden ${mode} ≤ 1.10× raw (${c.name})`,
                value: `${pw.ratio.toFixed(2)}×`,
                met: pw.ratio <= 1.1,
              },
        );
      }
    }
    for (const c of cases) {
      const procfs = c.rows.find((r) => r.contender === 'procwarden (process-group)');
      const ps = c.rows.find((r) => r.contender === PS);
      const ratio = ps.median / procfs.median;
      goals.push({
        text: `ps path ≤ 3× the procfs path (${c.name})`,
        value: `${ratio.toFixed(2)}× (${(ps.median / count).toFixed(1)} against ${(procfs.median / count).toFixed(1)} ms per run)`,
        met: ratio <= 3,
      });
    }
    return { cases, goals, notes: [`per spawn: divide by ${count}`] };
  },
};
