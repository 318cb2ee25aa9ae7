import pidtree from 'pidtree';
import treeKill from 'tree-kill';
import { Supervisor } from '../dist/index.js';
import { PsTable } from '../dist/tree/index.js';
import { containmentUnavailable } from './lib/contend.mjs';
import { loadExeca10, requireExeca10 } from './lib/execa10.mjs';
import { waitExtinct } from './lib/procs.mjs';
import { alternate, NotApplicable, withRatios } from './lib/stats.mjs';
import { spawnRawTree, treeArgv, whenBuilt } from './lib/trees.mjs';

const RAW = 'raw kill(-pgid, SIGKILL)';

/** A tree started by plain child_process (own process group), ended by `end(rootPid)`. */
function rawContender(name, end) {
  return {
    name,
    async start(size) {
      const tree = spawnRawTree(size);
      return { root: tree.pid, end: () => end(tree.pid) };
    },
  };
}

/** execa 10 with killDescendants: its own process group, ended by subprocess.kill('SIGKILL'). */
function execa10Contender(loaded) {
  return {
    name: 'execa 10 kill() (killDescendants, SIGKILL)',
    async start(size) {
      const [file, ...args] = treeArgv(size);
      const subprocess = requireExeca10(loaded)(file, args, { killDescendants: true, stdio: 'ignore' });
      const done = subprocess.catch(() => {});
      return {
        root: subprocess.pid,
        async end() {
          subprocess.kill('SIGKILL');
          await done;
        },
      };
    },
  };
}

/** A tree started as a procwarden run, ended by kill() (SIGKILL now) or cancel() (graceful). */
function procwardenContender(name, sup, containment, how, unavailable) {
  return {
    name,
    async start(size) {
      if (unavailable) throw new NotApplicable(unavailable);
      const handle = sup.spawn({ argv: treeArgv(size), containment, graceMs: 5000 });
      return {
        root: handle.pid,
        async end() {
          handle[how]();
          const r = await handle.result;
          if (r.tree.escaped > 0) throw new Error(`procwarden reported ${r.tree.escaped} escaped members`);
        },
      };
    },
  };
}

export default {
  id: 2,
  title: 'tree termination to extinction (every member gone or zombie)',
  unit: 'ms',
  async run({ quick, reps, tracker }) {
    const sizes = quick ? [10, 30] : [10, 30, 100, 500];
    const sup = new Supervisor();
    // The path every macOS and BSD user takes, forced here on Linux: the table read by ps.
    const psSup = new Supervisor({ table: new PsTable() });
    const noCgroup = await containmentUnavailable(sup, 'cgroup');
    const execa10 = await loadExeca10();
    const contenders = [
      rawContender(RAW, (pid) => process.kill(-pid, 'SIGKILL')),
      procwardenContender('procwarden kill() (process-group)', sup, 'process-group', 'kill', null),
      procwardenContender('procwarden kill() (cgroup)', sup, 'cgroup', 'kill', noCgroup),
      procwardenContender(
        'procwarden kill() (process-group, ps table)',
        psSup,
        'process-group',
        'kill',
        null,
      ),
      procwardenContender(
        'procwarden cancel() (process-group, SIGTERM)',
        sup,
        'process-group',
        'cancel',
        null,
      ),
      execa10Contender(execa10),
      rawContender(
        'tree-kill (SIGKILL)',
        (pid) => new Promise((resolve) => treeKill(pid, 'SIGKILL', resolve)),
      ),
      rawContender('pidtree + process.kill', async (pid) => {
        for (const p of await pidtree(pid, { root: true })) {
          try {
            process.kill(p, 'SIGKILL');
          } catch {
            // exited since the listing
          }
        }
      }),
    ];
    const cases = [];
    for (const size of sizes) {
      const rows = await alternate(contenders, reps, async (c) => {
        const tree = await c.start(size);
        const members = await whenBuilt(tree.root, size);
        tracker.add(members);
        const t0 = performance.now();
        await tree.end();
        await waitExtinct(members, 180_000);
        return performance.now() - t0;
      });
      cases.push({ name: `${size} processes`, rows: withRatios(rows, RAW) });
    }
    const goals = [];
    for (const mode of ['process-group', 'cgroup']) {
      const rows = cases.map((c) => ({
        c,
        r: c.rows.find((r) => r.contender === `procwarden kill() (${mode})`),
      }));
      if (rows.some(({ r }) => r.na)) {
        goals.push({ text: `procwarden ${mode} ≤ 1.5× raw`, value: 'not measured (see note)', met: null });
        continue;
      }
      goals.push({
        text: `procwarden ${mode} ≤ 1.5× raw`,
        value: rows.map(({ c, r }) => `${c.name}: ${r.ratio.toFixed(2)}×`).join(', '),
        met: rows.every(({ r }) => r.ratio <= 1.5),
      });
    }
    return {
      cases,
      goals,
      notes: [`trees: interior dash shells (fan-out 8) waiting on their subtrees, leaves sleep`],
    };
  },
};
