import { afterEach, describe, expect, it } from 'vitest';
import { realClock } from '../src/clock.js';
import { ProcessGroupContainment } from '../src/containment/index.js';
import { Supervisor } from '../src/index.js';
import { Deliverer, Guard, type KillTarget, terminate } from '../src/kill/index.js';
import { type EnvQuery, type ProcessInfo, type ProcessTable, ProcfsTable } from '../src/tree/index.js';
import { alive, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

/** A real process table that writes down, in order, every scan it answers. */
function recordingTable(events: string[]): ProcessTable {
  const inner = new ProcfsTable();
  return {
    name: inner.name,
    get: (pid) => inner.get(pid),
    list: () => {
      events.push('scan');
      return inner.list();
    },
    findByEnv: (name, value) => inner.findByEnv(name, value),
    sweep: (query: EnvQuery) => {
      events.push('scan');
      return inner.sweep(query);
    },
  };
}

/**
 * A process-group run of a bash that starts a setsid escapee, with every scan and signal written
 * down in order (the signals are really sent). Resolves once the tree is built.
 */
async function setsidTree() {
  const dir = leaks.trackDir(makeTmp());
  const events: string[] = [];
  const sup = new Supervisor({
    journal: false,
    table: recordingTable(events),
    send: (pid, signal) => {
      events.push(`${signal} ${pid}`);
      process.kill(pid, signal);
    },
  });
  let out = '';
  const handle = sup.spawn({
    argv: ['bash', fixture('setsid-child.sh'), dir],
    containment: 'process-group',
    graceMs: 3000,
    output: { onData: (t) => (out += t) },
  });
  leaks.track(handle.pid);
  await waitFor(() => out.includes('ready'), { what: 'tree ready' });
  events.length = 0;
  return { handle, events, root: handle.pid as number, escapee: readPids(dir).get('escapee') as number };
}

describe('kill(): the SIGKILL goes to the verified group before the scan', () => {
  it('the group is killed before any scan; the escapee outside it is killed by pid; the report lists both', async () => {
    const { handle, events, root, escapee } = await setsidTree();
    handle.kill();
    const r = await handle.result;
    expect(events[0]).toBe(`SIGKILL -${root}`);
    expect(events.indexOf(`SIGKILL ${escapee}`)).toBeGreaterThan(events.indexOf('scan'));
    expect(r.reason).toBe('cancelled');
    expect(r.escalated).toBe(true);
    expect(r.tree.escaped).toBe(0);
    const killed = (r.tree.report?.members ?? []).filter((m) => m.outcome === 'killed').map((m) => m.pid);
    expect(killed).toContain(root);
    expect(killed).toContain(escapee);
    expect(alive(root)).toBe(false);
    expect(alive(escapee)).toBe(false);
  });

  it('cancel() still scans before its graceful signal, and needs no SIGKILL', async () => {
    const { handle, events, root, escapee } = await setsidTree();
    handle.cancel();
    const r = await handle.result;
    expect(events[0]).toBe('scan');
    expect(events.indexOf(`SIGTERM -${root}`)).toBeGreaterThan(0);
    expect(events).toContain(`SIGTERM ${escapee}`);
    expect(events.filter((e) => e.startsWith('SIGKILL'))).toEqual([]);
    expect(r.tree.escaped).toBe(0);
    expect(alive(root)).toBe(false);
    expect(alive(escapee)).toBe(false);
  });
});

describe('ProcessGroupContainment.signalAhead: a group only while its root vouches for it', () => {
  const real = new ProcfsTable();

  /** The table as the containment sees it: the real one, except for what `root` answers. */
  function tableWith(pid: number, answers: Array<ProcessInfo | null>): ProcessTable {
    let reads = 0;
    return {
      name: 'procfs',
      list: () => real.list(),
      get: async (p) => {
        if (p !== pid) return real.get(p);
        const answer = answers[Math.min(reads, answers.length - 1)] ?? null;
        reads++;
        return answer;
      },
    };
  }

  async function ahead(pid: number, answers: Array<ProcessInfo | null>) {
    const sent: string[] = [];
    const table = tableWith(pid, answers);
    const guard = new Guard();
    const deliverer = new Deliverer(table, guard, (p, s) => sent.push(`${s} ${p}`));
    const containment = new ProcessGroupContainment(table, guard, deliverer, null);
    await containment.attach(pid);
    return { result: await containment.signalAhead('SIGKILL'), sent };
  }

  const root: ProcessInfo = {
    pid: 4_000_000,
    ppid: process.pid,
    pgid: 4_000_000,
    sid: 4_000_000,
    startTime: '777',
    state: 'S',
    command: 'sleep',
  };

  it('a root re-read alive and leading its group: kill(-pgid), and the group is named', async () => {
    const { result, sent } = await ahead(root.pid, [root, root]);
    expect(result).toEqual({ group: root.pid, root });
    expect(sent).toEqual([`SIGKILL -${root.pid}`]);
  });

  it('a root whose pid now belongs to another process: nothing sent', async () => {
    const { result, sent } = await ahead(root.pid, [root, { ...root, startTime: '778' }]);
    expect(result).toBeNull();
    expect(sent).toEqual([]);
  });

  it('a root that is a zombie, or gone: nothing sent', async () => {
    for (const now of [{ ...root, state: 'Z' }, null]) {
      const { result, sent } = await ahead(root.pid, [root, now]);
      expect(result).toBeNull();
      expect(sent).toEqual([]);
    }
  });

  it('a root read before its setsid, or one that moved to another group: nothing sent', async () => {
    const early = await ahead(root.pid, [{ ...root, pgid: 12345 }]);
    expect(early.result).toBeNull();
    const moved = await ahead(root.pid, [root, { ...root, pgid: 12345 }]);
    expect(moved.result).toBeNull();
    expect([...early.sent, ...moved.sent]).toEqual([]);
  });

  it('a root claiming our own process group: refused, nothing sent', async () => {
    const self = (await real.get(process.pid)) as ProcessInfo;
    const impostor: ProcessInfo = { ...root, pid: self.pgid, pgid: self.pgid };
    const { result, sent } = await ahead(self.pgid, [impostor, impostor]);
    expect(result).toBeNull();
    expect(sent).toEqual([]);
  });
});

describe('terminate() with a target that can signal ahead', () => {
  function fakeTarget(calls: string[], members: ProcessInfo[]): KillTarget {
    return {
      async members(scan) {
        calls.push(scan?.dead ? 'scan(dead)' : 'scan');
        return scan?.dead ? members : members.filter((m) => m.state !== 'Z');
      },
      async signal(signal, ms) {
        calls.push(`${signal} ${ms.map((m) => m.pid).join(',')}`);
        return ms;
      },
      async signalAhead(signal) {
        calls.push(`ahead ${signal}`);
        return { group: 50, root: { ...member(50), pgid: 50 } };
      },
    };
  }
  const member = (pid: number, pgid = 50, state = 'Z'): ProcessInfo => ({
    pid,
    ppid: 1,
    pgid,
    sid: 50,
    startTime: String(pid),
    state,
    command: 'x',
  });

  it('SIGKILL: ahead first; members the scan found dead in the group are reported killed, not signalled again', async () => {
    const calls: string[] = [];
    const report = await terminate(fakeTarget(calls, [member(51), member(52)]), {
      signal: 'SIGKILL',
      graceMs: 0,
      clock: realClock,
      table: new ProcfsTable(),
    });
    expect(calls).toEqual(['ahead SIGKILL', 'scan(dead)']);
    expect(report.members.map((m) => [m.pid, m.outcome])).toEqual([
      [50, 'killed'],
      [51, 'killed'],
      [52, 'killed'],
    ]);
    expect(report.escalated).toBe(true);
    expect(report.escaped).toBe(0);
  });

  it('SIGKILL: a live member outside the group gets its own SIGKILL', async () => {
    const calls: string[] = [];
    // Gone by the time it is polled: the fake table (real procfs) does not know pid 4000001.
    const outside = { ...member(4_000_001, 99, 'S'), startTime: '1' };
    await terminate(fakeTarget(calls, [member(51), outside]), {
      signal: 'SIGKILL',
      graceMs: 0,
      clock: realClock,
      table: new ProcfsTable(),
      killTimeoutMs: 50,
    });
    expect(calls.slice(0, 3)).toEqual(['ahead SIGKILL', 'scan(dead)', 'SIGKILL 4000001']);
  });

  it('SIGTERM: never ahead of the scan', async () => {
    const calls: string[] = [];
    await terminate(fakeTarget(calls, []), {
      signal: 'SIGTERM',
      graceMs: 0,
      clock: realClock,
      table: new ProcfsTable(),
    });
    expect(calls).toEqual(['scan']);
  });
});
