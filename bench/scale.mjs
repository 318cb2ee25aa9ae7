import { alternate, summarize, withRatios } from './lib/stats.mjs';
import { runWorker } from './lib/worker.mjs';

const MiB = 1024 * 1024;
const RAW = 'raw kill(-pgid, SIGTERM) each';

export default {
  id: 5,
  title: 'scale: concurrent runs of a 3-process tree, all ended at once (each repetition in a fresh process)',
  unit: '',
  async run({ quick, reps }) {
    const runs = quick ? 30 : 1000;
    const contenders = [
      { name: RAW, worker: 'raw' },
      { name: 'procwarden Supervisor.cancelAll()', worker: 'procwarden' },
    ];
    const results = new Map(contenders.map((c) => [c, []]));
    const rows = await alternate(contenders, reps, async (c) => {
      const r = await runWorker('scale', [c.worker, runs], ['--expose-gc']);
      results.get(c).push(r);
      return r.ms;
    });
    const summary = (f) =>
      contenders.map((c) => ({ contender: c.name, ...summarize(results.get(c).map(f)) }));
    const cases = [
      { name: `${runs} runs: ms to all extinct`, rows: withRatios(rows, RAW) },
      {
        name: `${runs} runs: peak RSS growth MiB`,
        rows: withRatios(
          summary((r) => r.rssGrowth / MiB),
          RAW,
        ),
      },
      { name: `${runs} runs: survivors`, rows: summary((r) => r.survivors) },
    ];
    const survivors = [...results.values()].flat().reduce((n, r) => n + r.survivors, 0);
    const pw = cases[0].rows[1];
    return {
      cases,
      goals: [
        { text: 'zero survivors', value: `${survivors}`, met: survivors === 0 },
        {
          text: 'procwarden time to all extinct (no goal set; ratio)',
          value: `${pw.ratio.toFixed(2)}× raw`,
          met: null,
        },
      ],
      notes: [`${runs * 3} processes alive before the end; survivors are counted then killed by pid`],
    };
  },
};
