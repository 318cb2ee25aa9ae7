import { alternate, summarize, withRatios } from './lib/stats.mjs';
import { runWorker } from './lib/worker.mjs';

const MiB = 1024 * 1024;
const RAW = 'raw kill(-pgid, SIGTERM) each';

export default {
  id: 5,
  title: 'scale: concurrent runs of a 3-process tree, all ended at once (each repetition in a fresh process)',
  unit: '',
  async run({ quick, reps }) {
    // 1000 runs are 3000 processes: the full run only (a shared machine cannot take them in --quick).
    const sizes = quick ? [30] : [30, 1000];
    const contenders = [
      { name: RAW, worker: 'raw' },
      { name: 'procwarden Supervisor.cancelAll()', worker: 'procwarden' },
    ];
    const cases = [];
    const goals = [];
    let survivors = 0;
    for (const runs of sizes) {
      const results = new Map(contenders.map((c) => [c, []]));
      const rows = await alternate(contenders, reps, async (c) => {
        const r = await runWorker('scale', [c.worker, runs], ['--expose-gc']);
        results.get(c).push(r);
        return r.ms;
      });
      const summary = (f) =>
        contenders.map((c) => ({ contender: c.name, ...summarize(results.get(c).map(f)) }));
      const timed = { name: `${runs} runs: ms to all extinct`, rows: withRatios(rows, RAW) };
      cases.push(
        timed,
        {
          name: `${runs} runs: peak RSS growth MiB`,
          rows: withRatios(
            summary((r) => r.rssGrowth / MiB),
            RAW,
          ),
        },
        { name: `${runs} runs: survivors`, rows: summary((r) => r.survivors) },
      );
      survivors += [...results.values()].flat().reduce((n, r) => n + r.survivors, 0);
      const pw = timed.rows[1];
      goals.push({
        text: `cancelAll of ${runs} runs ≤ 1.5× raw group kills`,
        value: `${pw.ratio.toFixed(2)}×`,
        met: pw.ratio <= 1.5,
      });
    }
    if (quick) {
      goals.push({
        text: 'cancelAll of 1000 runs ≤ 1.5× raw group kills',
        value: 'full run only',
        met: null,
      });
    }
    goals.unshift({ text: 'zero survivors', value: `${survivors}`, met: survivors === 0 });
    return {
      cases,
      goals,
      notes: ['each run is a 3-process tree; survivors are counted then killed by pid'],
    };
  },
};
