import treeKill from 'tree-kill';
import procwardenTreeKill from '../dist/tree-kill.js';
import { killSurvivors, waitExtinct } from './lib/procs.mjs';
import { alternate } from './lib/stats.mjs';
import { spawnRawTree, whenBuilt } from './lib/trees.mjs';

/** What a caller of `treeKill(pid, 'SIGTERM', callback)` finds alive when its callback runs. */
const CONTENDERS = [
  { name: 'tree-kill', kill: treeKill },
  { name: 'procwarden/tree-kill', kill: procwardenTreeKill },
];

export default {
  id: 8,
  title: "treeKill(pid, 'SIGTERM', callback): tree members still alive when the callback runs",
  unit: 'processes',
  async run({ quick, reps, tracker }) {
    const size = quick ? 10 : 30;
    const cases = [];
    for (const ignoreTerm of [false, true]) {
      const rows = await alternate(CONTENDERS, reps, async (c) => {
        const tree = spawnRawTree(size, { ignoreTerm });
        const members = await whenBuilt(tree.pid, size);
        tracker.add(members);
        await new Promise((resolve) => c.kill(tree.pid, 'SIGTERM', resolve));
        // Counted, then ended by pid, so that the next sample starts from a clean machine.
        const survivors = killSurvivors(members);
        await waitExtinct(members);
        return survivors;
      });
      cases.push({
        name: `${size} processes, ${ignoreTerm ? 'every member ignores SIGTERM' : 'plain (SIGTERM ends them)'}`,
        rows,
      });
    }
    const worst = Math.max(
      ...cases.map((c) => c.rows.find((r) => r.contender === 'procwarden/tree-kill').max),
    );
    return {
      cases,
      goals: [
        {
          text: 'procwarden/tree-kill: no survivor when the callback runs',
          value: String(worst),
          met: worst === 0,
        },
      ],
      notes: [
        'tree-kill calls back once its signals are sent, so even members that SIGTERM ends may still be alive then; procwarden/tree-kill calls back once the tree is extinct (SIGKILL after the 5 s grace for what ignores SIGTERM)',
      ],
    };
  },
};
