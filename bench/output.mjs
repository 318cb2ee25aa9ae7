import { alternate, summarize, withRatios } from './lib/stats.mjs';
import { runWorker } from './lib/worker.mjs';

const MiB = 1024 * 1024;
const RAW = 'raw spawn, pipe consumed';

export default {
  id: 4,
  title: 'output throughput and memory (each repetition in a fresh process)',
  unit: '',
  async run({ quick, reps }) {
    const size = (quick ? 32 : 512) * MiB;
    const contenders = [
      { name: RAW, worker: 'raw' },
      { name: 'procwarden onData, default capture', worker: 'procwarden' },
      // procwarden's command leads its own session (Node's detached: setsid). Under the kernel's
      // autogroup scheduling a new session is a new scheduling group, which changes pipe
      // ping-pong on a busy machine: this row shows that cost apart from procwarden's own.
      { name: 'raw spawn, detached (own session, as procwarden)', worker: 'raw-detached' },
      // onData hands over text: a raw consumer that wants text decodes too (setEncoding('utf8')).
      { name: 'raw spawn, decoded as onData is', worker: 'raw-decoded' },
      // onBytes hands over the chunks: nothing is decoded, the fair match for the raw row.
      { name: 'procwarden onBytes, default capture', worker: 'procwarden-bytes' },
    ];
    const results = new Map(contenders.map((c) => [c, []]));
    const rows = await alternate(contenders, reps, async (c) => {
      const r = await runWorker('output', [c.worker, size], ['--expose-gc']);
      results.get(c).push(r);
      return r.bytes / MiB / (r.ms / 1000);
    });
    const rssRows = contenders.map((c) => ({
      contender: c.name,
      ...summarize(results.get(c).map((r) => r.rssGrowth / MiB)),
    }));
    const cases = [
      { name: `${size / MiB} MiB: throughput MiB/s`, rows: withRatios(rows, RAW) },
      { name: `${size / MiB} MiB: peak RSS growth MiB`, rows: withRatios(rssRows, RAW) },
    ];
    const pw = cases[0].rows[1];
    const pwRss = cases[1].rows[1];
    const detached = cases[0].rows[2];
    const decoded = cases[0].rows[3];
    const bytes = cases[0].rows[4];
    return {
      cases,
      goals: [
        {
          text: 'throughput ≥ 0.95× raw',
          value: `${pw.ratio.toFixed(2)}× (${(pw.median / detached.median).toFixed(2)}× raw detached)`,
          met: pw.ratio >= 0.95,
        },
        {
          text: 'procwarden RSS growth ≤ 64 MiB',
          value: `median ${pwRss.median.toFixed(1)} MiB, max ${pwRss.max.toFixed(1)} MiB`,
          met: pwRss.max <= 64,
        },
      ],
      notes: [
        'producer: `yes … | head -c N` through sh; RSS growth = peak maxRSS − RSS before the spawn',
        `onData against a raw consumer that decodes as it does: ${(pw.median / decoded.median).toFixed(2)}×; ` +
          `onBytes (no decoding) against raw: ${bytes.ratio.toFixed(2)}×`,
      ],
    };
  },
};
