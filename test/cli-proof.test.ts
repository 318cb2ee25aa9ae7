import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, startCli } from './helpers/cli.js';
import { LeakGuard } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

interface CaseProof {
  case: string;
  holds: boolean;
  failed: string[];
  reason: string;
  exitCode: number | null;
  exitSignal: string | null;
  timedOut: boolean;
  escalated: boolean;
  stdout: string[];
  markers: Record<string, boolean>;
  descendantAliveAfterWait: boolean | null;
  survivors: number[];
  facts: Record<string, unknown>;
}

describe('procwarden proof', () => {
  it('holds on this machine: five cases, JSON per case, summary on stderr, exit 0', async () => {
    const cli = startCli(['proof', '--json']);
    leaks.track(cli.child.pid);
    const r = await cli.done;
    const proofs = JSON.parse(r.stdout.toString()) as CaseProof[];
    expect(proofs.map((p) => p.case)).toEqual(['cleanup', 'fallback', 'descendant', 'escaped', 'no-detach']);
    for (const p of proofs)
      expect({ case: p.case, failed: p.failed, survivors: p.survivors }).toEqual({
        case: p.case,
        failed: [],
        survivors: [],
      });
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/All 5 cases hold/);

    const by = Object.fromEntries(proofs.map((p) => [p.case, p]));
    expect(by.cleanup).toMatchObject({
      reason: 'overall-timeout',
      timedOut: true,
      exitCode: 0,
      escalated: false,
      markers: { 'cleanup.done': true },
    });
    expect(by.cleanup?.stdout).toContain('cleanup done');
    expect(by.fallback).toMatchObject({
      reason: 'overall-timeout',
      exitSignal: 'SIGKILL',
      escalated: true,
      markers: { 'ignore.done': false },
    });
    expect(by.descendant).toMatchObject({
      reason: 'cancelled',
      markers: { 'child.done': true },
      descendantAliveAfterWait: false,
    });
    expect(by.escaped).toMatchObject({ markers: { 'escapee.done': true }, descendantAliveAfterWait: false });
    expect(by['no-detach']?.facts).toMatchObject({
      callerAliveAfterRun: true,
      callerGroupAliveAfterRun: true,
    });

    // Every pid a case recorded is gone now too.
    for (const p of proofs) {
      for (const value of Object.values(p.facts)) {
        const pid = (value as { pid?: number } | null)?.pid;
        if (typeof pid === 'number') leaks.track(pid);
      }
    }
  });

  it('without --json: the human summary on stdout', async () => {
    const cli = startCli(['proof']);
    leaks.track(cli.child.pid);
    const r = await cli.done;
    const out = r.stdout.toString();
    expect(r.status).toBe(0);
    expect(out).toMatch(/^procwarden proof: 5 live cases/);
    for (const name of ['cleanup', 'fallback', 'descendant', 'escaped', 'no-detach']) {
      expect(out).toMatch(new RegExp(`^  holds  ${name}`, 'm'));
    }
    expect(out).not.toContain('\x1b[');
  });

  it('bad input', async () => {
    const cli = startCli(['proof', 'now']);
    const r = await cli.done;
    expect(r.status).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe("procwarden proof: unexpected argument 'now'");
  });
});

describe('procwarden proof into a full disk', () => {
  it('says "write error" and exits 1 (it used to exit 0 with nothing said)', () => {
    const r = spawnSync('sh', ['-c', 'exec "$0" "$1" proof > /dev/full', process.execPath, CLI], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('procwarden proof: write error: ENOSPC: no space left on device, write\n');
  });
});
