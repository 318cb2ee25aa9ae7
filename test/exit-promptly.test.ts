import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, LeakGuard, makeTmp } from './helpers/procs.js';

const leaks = new LeakGuard();
afterEach(() => leaks.check());

// Every spec gets a drain far longer than the bound: a timer left pending after the result (the
// losing side of a race with the drain, say) keeps the host alive for the whole drain, which the
// bound catches however loaded the machine is. The exact figure is bench figure (7).
const DRAIN_MS = 20_000;
const BOUND_MS = 5_000;

/** Runs the fixture; returns the milliseconds between its "resolved" line and its exit. */
function lingerAfterResult(
  spec: object,
): Promise<{ reason: string; lingerMs: number; status: number | null }> {
  const child = spawn(
    process.execPath,
    [fixture('await-one-run.mjs'), JSON.stringify({ drainMs: DRAIN_MS, ...spec })],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  leaks.track(child.pid);
  return new Promise((resolve, reject) => {
    let out = '';
    let resolvedAt = 0;
    let reason = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (!resolvedAt && out.includes('\n')) {
        resolvedAt = performance.now();
        reason = JSON.parse(out.split('\n')[0] ?? '{}').reason;
      }
    });
    child.on('error', reject);
    child.on('exit', (status) => {
      if (!resolvedAt) reject(new Error(`the script ended without a result (status ${status})`));
      else resolve({ reason, lingerMs: performance.now() - resolvedAt, status });
    });
  });
}

describe('nothing holds the host open once the last result resolved', () => {
  it('a command that exits on its own', async () => {
    const r = await lingerAfterResult({ argv: ['true'] });
    expect(r).toMatchObject({ reason: 'exit', status: 0 });
    expect(r.lingerMs).toBeLessThan(BOUND_MS);
  });

  it('a leftover that was killed after the command exited', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await lingerAfterResult({ argv: ['sh', '-c', `sleep 60 & echo $! > ${join(dir, 'bg.pid')}`] });
    expect(r).toMatchObject({ reason: 'exit', status: 0 });
    expect(r.lingerMs).toBeLessThan(BOUND_MS);
  });

  it('an overall timeout whose command ignores the graceful signal (grace, then SIGKILL)', async () => {
    const dir = leaks.trackDir(makeTmp());
    const r = await lingerAfterResult({
      argv: [fixture('ignore-term.sh'), dir],
      timeoutMs: 300,
      graceMs: 200,
    });
    expect(r).toMatchObject({ reason: 'overall-timeout', status: 0 });
    expect(r.lingerMs).toBeLessThan(BOUND_MS);
  });

  it('a command that cannot be started', async () => {
    const r = await lingerAfterResult({ argv: ['/nonexistent/procwarden-test-binary'] });
    expect(r).toMatchObject({ reason: 'spawn-error', status: 0 });
    expect(r.lingerMs).toBeLessThan(BOUND_MS);
  });
});
