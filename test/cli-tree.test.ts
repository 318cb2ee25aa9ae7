import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startCli } from './helpers/cli.js';
import { alive, fixture, LeakGuard, makeTmp, readPids, waitFor } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

async function tree(args: string[]) {
  const cli = startCli(['tree', ...args]);
  leaks.track(cli.child.pid);
  return cli.done;
}

/** The row of `pid` in tree output, split into columns. */
function row(out: string, pid: number): string[] | undefined {
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .find((cols) => cols[0] === String(pid));
}

/** `procwarden run` of `command` (a --json result in DIR), once it printed "ready"; `end` stops it. */
async function heldRun(command: string[]) {
  const dir = leaks.trackDir(makeTmp());
  const json = join(dir, 'result.json');
  const run = startCli([
    'run',
    '--json',
    json,
    '--timeout',
    '60s',
    '--',
    ...command.map((a) => a.replace('$DIR', dir)),
  ]);
  leaks.track(run.child.pid);
  await waitFor(() => run.stdout().includes('ready'), { what: 'fixture ready', timeoutMs: 30_000 });
  const end = async () => {
    run.child.kill('SIGTERM');
    expect((await run.done).status).toBe(143);
    leaks.trackCookie(JSON.parse(readFileSync(json, 'utf8')).id);
  };
  return { dir, end };
}

describe('procwarden tree', () => {
  it('shows a run: pid, pgid, sid, state, age, leaders and the run cookie; escaped members after it', async () => {
    // A procwarden run holds a tree with a double-forked daemon (setsid, re-parented away).
    const { dir, end } = await heldRun([fixture('double-fork.sh'), '$DIR', 'wait']);
    const pids = readPids(dir);
    const parent = pids.get('parent') ?? 0;
    const escapee = pids.get('daemon') ?? 0;

    const whole = (await tree([])).stdout.toString();
    expect(whole.split('\n')[0]).toMatch(/^\s+PID\s+PGID\s+SID\s+S\s+AGE\s+LD\s+COMMAND$/);
    expect(row(whole, parent)).toBeDefined();

    const r = await tree([String(parent)]);
    expect(r.status).toBe(0);
    const out = r.stdout.toString();
    const cols = row(out, parent) ?? [];
    // The command leads its own session and group (process-group containment).
    expect(cols.slice(0, 3)).toEqual([String(parent), String(parent), String(parent)]);
    expect(cols[3]).toMatch(/^[RS]$/);
    expect(cols[4]).toMatch(/^\d+[smhd]/);
    expect(cols[5]).toBe('SG');
    expect(out).toMatch(/run=pw\w+-1/);
    // The daemon left by parent link and session: listed after the tree, as a member of the same run.
    const [treePart, escapedPart] = out.split('escaped from this tree, same procwarden run:');
    expect(row(treePart ?? '', escapee)).toBeUndefined();
    expect(row(escapedPart ?? '', escapee)).toBeDefined();
    expect(escapedPart).toMatch(/run=pw\w+-1/);

    await end();
  });

  it("a member's own tree lists no escapees for the run's processes above it", async () => {
    const { dir, end } = await heldRun([
      'sh',
      '-c',
      'sleep 60 & echo $! > "$0/child.pid"; echo ready; wait',
      '$DIR',
    ]);
    const child = Number(readFileSync(join(dir, 'child.pid'), 'utf8'));
    leaks.track(child);
    const out = (await tree([String(child)])).stdout.toString();
    expect(row(out, child)?.join(' ')).toMatch(/run=pw\w+-1/);
    // The shell that started it is the run's root, with the same cookie: above it, not escaped.
    expect(out).not.toContain('escaped from this tree');
    await end();
  });

  it('marks a group leader that is not a session leader', async () => {
    // `set -m` gives the background job its own process group inside the shell's session.
    const shell = spawn('bash', ['-c', 'set -m; sleep 60 & echo $!; wait'], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    leaks.track(shell.pid);
    let out = '';
    shell.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const sleeper = Number(await waitFor(() => /^\d+\n/.exec(out)?.[0], { what: 'sleep pid' }));
    leaks.track(sleeper);
    const r = (await tree([String(shell.pid)])).stdout.toString();
    expect(row(r, shell.pid ?? 0)?.[5]).toBe('SG');
    const cols = row(r, sleeper) ?? [];
    expect(cols.slice(0, 3)).toEqual([String(sleeper), String(sleeper), String(shell.pid)]);
    expect(cols[5]).toBe('G');
    process.kill(sleeper, 'SIGKILL');
    process.kill(shell.pid ?? 0, 'SIGKILL');
    await waitFor(() => !alive(sleeper) && !alive(shell.pid ?? 0), { what: 'shell and sleep gone' });
  });

  it("a thread's id shows its process's tree, as kill ends it", async () => {
    const main = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    leaks.track(main.pid);
    const pid = main.pid ?? 0;
    try {
      const thread = await waitFor(
        () =>
          readdirSync(`/proc/${pid}/task`)
            .map(Number)
            .find((t) => t !== pid),
        { what: 'a thread of node' },
      );
      const r = await tree([String(thread)]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.toString().split('\n')[1]?.trim().split(/\s+/)[0]).toBe(String(pid));
    } finally {
      main.kill('SIGKILL');
      await waitFor(() => !alive(pid), { what: 'node gone' });
    }
  });

  it('bad input', async () => {
    const missing = await tree(['4194304']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toBe('procwarden tree: no process has pid 4194304\n');
    const word = await tree(['abc']);
    expect(word.status).toBe(2);
    expect(word.stderr.split('\n')[0]).toBe(
      "procwarden tree: 'abc' is not a process id; give a whole number from 1 to 4294967295",
    );
    expect((await tree(['9007199254740993'])).status).toBe(2);
    const two = await tree(['1', '2']);
    expect(two.status).toBe(2);
  });
});
