import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import pidtree from 'pidtree';
import treeKill from 'tree-kill';
import { Supervisor } from '../dist/index.js';
import { containmentUnavailable } from './lib/contend.mjs';
import { delay, isGone, killSurvivors, stat } from './lib/procs.mjs';
import { alternate, NotApplicable } from './lib/stats.mjs';

const TREE = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'escapee-tree.sh');
const NAMES = ['root', 'child', 'orphan', 'daemon'];
/** How long a contender that returns before the tree is gone gets before survivors are counted. */
const SETTLE_MS = 1500;

/** The four members, once each has written its pid (pid + start time, for the survivor count). */
async function members(dir) {
  const until = performance.now() + 30_000;
  for (;;) {
    const found = [];
    for (const name of NAMES) {
      try {
        const s = stat(Number(readFileSync(join(dir, `${name}.pid`), 'utf8')));
        if (s) found.push({ pid: s.pid, start: s.start, name });
      } catch {
        // not written yet
      }
    }
    if (found.length === NAMES.length && settled(found)) return found;
    if (performance.now() > until) throw new Error(`escapee tree in ${dir}: ${found.length} of 4 members`);
    await delay(5);
  }
}

/**
 * The tree is ready once the orphan and the daemon have left their parents (re-parented away from
 * the root) and the daemon leads its own group: before that a group kill would still reach them.
 */
function settled(found) {
  const root = found.find((m) => m.name === 'root');
  const away = (m) => {
    const s = stat(m.pid);
    return s && s.ppid !== root.pid && stat(s.ppid)?.ppid !== root.pid;
  };
  const daemon = found.find((m) => m.name === 'daemon');
  return (
    away(found.find((m) => m.name === 'orphan')) && away(daemon) && stat(daemon.pid)?.pgid === daemon.pid
  );
}

/** A tree started by plain child_process in its own group, ended by `end(rootPid)`. */
const rawContender = (name, end) => ({
  name,
  start(dir) {
    const child = spawn('sh', [TREE, dir], { detached: true, stdio: 'ignore' });
    return { end: () => end(child.pid) };
  },
});

const procwardenContender = (name, sup, containment, unavailable) => ({
  name,
  start(dir) {
    if (unavailable) throw new NotApplicable(unavailable);
    const h = sup.spawn({ argv: ['sh', TREE, dir], containment, graceMs: 500 });
    return {
      async end() {
        h.cancel();
        await h.result;
      },
    };
  },
});

export default {
  id: 10,
  title: 'survivors: a tree with a SIGTERM-ignoring orphan and a setsid daemon, after each tool ended it',
  unit: 'processes',
  async run({ reps, tracker }) {
    const sup = new Supervisor();
    const noCgroup = await containmentUnavailable(sup, 'cgroup');
    const contenders = [
      rawContender('raw kill(-pgid, SIGKILL)', (pid) => process.kill(-pid, 'SIGKILL')),
      rawContender('tree-kill (SIGTERM)', (pid) => new Promise((r) => treeKill(pid, 'SIGTERM', r))),
      rawContender('tree-kill (SIGKILL)', (pid) => new Promise((r) => treeKill(pid, 'SIGKILL', r))),
      rawContender('pidtree + process.kill(SIGKILL)', async (pid) => {
        for (const p of await pidtree(pid, { root: true })) {
          try {
            process.kill(p, 'SIGKILL');
          } catch {
            // exited since the listing
          }
        }
      }),
      {
        name: 'execa 9 kill() (forceKillAfterDelay 500)',
        start(dir) {
          const sub = execa('sh', [TREE, dir], { forceKillAfterDelay: 500, stdio: 'ignore', reject: false });
          return {
            async end() {
              sub.kill();
              await sub;
            },
          };
        },
      },
      {
        // Its timer ends the tree (2 s leaves the tree time to be built on a loaded machine).
        name: 'coreutils timeout -k 0.5 2',
        start(dir) {
          if (spawnSync('timeout', ['--version']).error)
            throw new NotApplicable('no timeout(1) on this machine');
          const child = spawn('timeout', ['-k', '0.5', '2', 'sh', TREE, dir], { stdio: 'ignore' });
          const exited = new Promise((resolve) => child.once('close', resolve));
          child.once('error', () => {});
          return { end: () => exited };
        },
      },
      procwardenContender('procwarden cancel() (process-group, grace 500 ms)', sup, 'process-group', null),
      procwardenContender('procwarden cancel() (cgroup, grace 500 ms)', sup, 'cgroup', noCgroup),
    ];
    const rows = await alternate(contenders, reps, async (c) => {
      const dir = mkdtempSync(join(tmpdir(), 'pw-bench-escapee-'));
      try {
        const tree = c.start(dir);
        const list = await members(dir);
        tracker.add(list);
        await tree.end();
        await delay(SETTLE_MS);
        const survivors = list.filter((m) => !isGone(m)).length;
        // Survivors are this figure's result, not the harness's leak: end them here.
        killSurvivors(list);
        return survivors;
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
    await sup.shutdown();
    const pw = rows.filter((r) => r.contender.startsWith('procwarden') && !r.na);
    return {
      cases: [{ name: '4-process tree', rows }],
      goals: [
        {
          text: 'procwarden leaves 0 survivors',
          value: pw.map((r) => `${r.contender}: ${r.max}`).join(', '),
          met: pw.every((r) => r.max === 0),
        },
      ],
      notes: [
        `survivors counted ${SETTLE_MS} ms after each tool said it was done (median of the repetitions; max shown); the bench's own cleanup then kills them`,
        'execa 10 killDescendants needs Node ≥ 22 and is not installed here: not measured',
      ],
    };
  },
};
