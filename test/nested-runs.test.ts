// A run started inside another run's tree (procwarden under procwarden: an agent's tool that
// supervises commands of its own, a test suite run by `procwarden run`) replaces the cookie with
// its own. The outer run must still find what the inner one starts: the outer cookie moves to
// PROCWARDEN_OUTER_RUNS, which the outer sweeps read too.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor } from '../src/index.js';
import { CLI } from './helpers/cli.js';
import { alive, LeakGuard, makeTmp, waitFor } from './helpers/procs.js';

const sup = new Supervisor();
const leaks = new LeakGuard();
leaks.trackCookie(sup.id);
afterEach(() => leaks.check());

const environOf = (pid: number) =>
  Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
  );

/**
 * A process's environment once it has one: between two execs (the shim's, the shell's `exec`) the
 * kernel shows it empty for a moment.
 */
const settledEnviron = (pid: number) =>
  waitFor(
    () => {
      try {
        const env = environOf(pid);
        return env.PROCWARDEN_RUN ? env : undefined;
      } catch {
        return undefined;
      }
    },
    { what: `the environment of ${pid}` },
  );

/** The pid a command wrote to `file`, once it has. */
const pidIn = (file: string) => () => {
  try {
    return Number(readFileSync(file, 'utf8')) || undefined;
  } catch {
    return undefined;
  }
};

describe.skipIf(process.platform !== 'linux')('a run inside a run', () => {
  it("the inner run's processes carry the outer cookie in PROCWARDEN_OUTER_RUNS, the inner in PROCWARDEN_RUN", async () => {
    const dir = leaks.trackDir(makeTmp());
    const outer = sup.spawn({
      argv: [CLI, 'run', '--', 'sh', '-c', `echo $$ > ${dir}/inner.pid; exec sleep 30`],
      containment: 'process-group',
    });
    const inner = await waitFor(pidIn(join(dir, 'inner.pid')), { what: 'the inner command' });
    const env = await settledEnviron(inner);
    // Innermost last: the suite may itself run inside a run.
    expect(env.PROCWARDEN_OUTER_RUNS?.split(' ').at(-1)).toBe(outer.id);
    expect(env.PROCWARDEN_RUN).not.toBe(outer.id);
    expect(env.PROCWARDEN_RUN).toMatch(/^pw[0-9a-z]+-1$/);
    outer.cancel();
    await outer.result;
    expect(alive(inner)).toBe(false);
  });

  it('an escapee of the inner run (setsid, double fork, ignores SIGTERM) ends with the outer run', async () => {
    // The outer grace is shorter than the inner's: the inner CLI is SIGKILLed mid-grace, before it
    // could end its own tree, and its watchdog (a member of the outer tree) is ended with it.
    const dir = leaks.trackDir(makeTmp());
    const escapee = `echo $$ > ${dir}/escapee.pid; trap "" TERM; exec sleep 40`;
    const outer = sup.spawn({
      argv: [
        CLI,
        'run',
        '--containment',
        'process-group',
        '--',
        'bash',
        '-c',
        `( setsid bash -c '${escapee}' & ); exec sleep 30`,
      ],
      containment: 'process-group',
      graceMs: 300,
    });
    const pid = await waitFor(pidIn(join(dir, 'escapee.pid')), { what: 'the escapee' });
    expect((await settledEnviron(pid)).PROCWARDEN_OUTER_RUNS?.split(' ').at(-1)).toBe(outer.id);
    outer.cancel();
    const result = await outer.result;
    expect(alive(pid)).toBe(false);
    expect(result.tree.escaped).toBe(0);
  });
});
