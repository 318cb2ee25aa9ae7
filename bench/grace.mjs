import { Supervisor } from '../dist/index.js';
import { delay, isGone } from './lib/procs.mjs';
import { summarize } from './lib/stats.mjs';
import { spawnRawTree, treeArgv, whenBuilt } from './lib/trees.mjs';

const GRACE = 1000;
const SIZE = 10;

/** Resolves with the time at which every member is gone, polling every millisecond. */
async function extinction(members) {
  let i = 0;
  for (;;) {
    while (i < members.length && isGone(members[i])) i++;
    if (i === members.length) return performance.now();
    await delay(1);
  }
}

/** procwarden: cancel() a SIGTERM-ignoring tree; the report says when SIGTERM and SIGKILL went out. */
async function procwardenOnce(sup, tracker) {
  const handle = sup.spawn({
    argv: treeArgv(SIZE, { ignoreTerm: true }),
    graceMs: GRACE,
    containment: 'process-group',
  });
  const members = await whenBuilt(handle.pid, SIZE);
  tracker.add(members);
  handle.cancel();
  const extinct = extinction(members);
  const r = await handle.result;
  const resolvedAt = performance.now();
  const report = r.tree.report;
  const at = (signal) =>
    Math.min(
      ...report.members.flatMap((m) => m.signals.filter((s) => s.signal === signal).map((s) => s.atMs)),
    );
  if (!r.escalated || report.escaped > 0)
    throw new Error(`grace: unexpected result ${JSON.stringify(r.tree)}`);
  return {
    kill: at('SIGKILL') - at('SIGTERM') - GRACE,
    graceUsed: report.graceUsedMs - GRACE,
    settle: resolvedAt - (await extinct),
  };
}

/** Baseline: a raw setTimeout between kill(-pgid, SIGTERM) and kill(-pgid, SIGKILL). */
async function rawOnce(tracker) {
  const tree = spawnRawTree(SIZE, { ignoreTerm: true });
  const members = await whenBuilt(tree.pid, SIZE);
  tracker.add(members);
  process.kill(-tree.pid, 'SIGTERM');
  const term = performance.now();
  await delay(GRACE);
  const kill = performance.now();
  process.kill(-tree.pid, 'SIGKILL');
  await extinction(members);
  return { kill: kill - term - GRACE };
}

export default {
  id: 3,
  title: `grace precision: graceMs ${GRACE}, a ${SIZE}-process tree that ignores SIGTERM`,
  unit: 'ms',
  async run({ reps, tracker }) {
    const sup = new Supervisor();
    const pw = [];
    const raw = [];
    for (let rep = 0; rep < reps; rep++) {
      // Alternate which goes first.
      if (rep % 2) raw.push(await rawOnce(tracker));
      pw.push(await procwardenOnce(sup, tracker));
      if (!(rep % 2)) raw.push(await rawOnce(tracker));
    }
    const row = (contender, samples) => ({ contender, ...summarize(samples) });
    const kill = row(
      'procwarden',
      pw.map((s) => s.kill),
    );
    const settle = row(
      'procwarden',
      pw.map((s) => s.settle),
    );
    const cases = [
      {
        name: 'SIGKILL − (SIGTERM + grace)',
        rows: [
          row(
            'raw setTimeout between group kills',
            raw.map((s) => s.kill),
          ),
          kill,
        ],
      },
      {
        name: 'report graceUsedMs − grace',
        rows: [
          row(
            'procwarden',
            pw.map((s) => s.graceUsed),
          ),
        ],
      },
      { name: 'result resolves after extinction', rows: [settle] },
    ];
    const worst = (r) => Math.max(Math.abs(r.min), Math.abs(r.max));
    return {
      cases,
      goals: [
        {
          text: 'SIGKILL within 20 ms of the grace end',
          value: `median ${kill.median.toFixed(1)} ms, worst ${worst(kill).toFixed(1)} ms`,
          met: Math.abs(kill.median) <= 20,
        },
        {
          text: 'result within 50 ms of extinction',
          value: `median ${settle.median.toFixed(1)} ms, worst ${settle.max.toFixed(1)} ms`,
          met: settle.median <= 50,
        },
      ],
      notes: [
        'signal times from result.tree.report (per-member signal atMs); extinction seen by polling /proc every 1 ms',
      ],
    };
  },
};
