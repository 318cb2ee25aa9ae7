import { describe, expect, it } from 'vitest';
import { execRunner } from '../src/tree/index.js';

// The helper runner (ps, PowerShell, taskkill) as its callers read it; its PTY sealing is tested in
// pty-masters.test.ts.
describe('execRunner', () => {
  it('gives the exit code with both outputs, whole, multi-byte characters included', async () => {
    const r = await execRunner('sh', ['-c', 'printf "ü%.0s" $(seq 1 40000); echo; echo err >&2; exit 3']);
    expect(r.code).toBe(3);
    expect(r.error).toBeUndefined();
    expect(r.stdout).toBe(`${'ü'.repeat(40000)}\n`);
    expect(r.stderr).toBe('err\n');
  });

  it('a helper that is not there is an error with its code, never a throw', async () => {
    const r = await execRunner('/nonexistent/ps', ['-A']);
    expect(r.code).toBeNull();
    expect(r.error?.code).toBe('ENOENT');
  });

  it('a helper ended by a signal is an error that says which', async () => {
    const r = await execRunner('sh', ['-c', 'echo partial; kill -KILL $$']);
    expect(r.code).toBeNull();
    expect(r.stdout).toBe('partial\n');
    expect(r.error?.message).toMatch(/SIGKILL/);
  });

  it('passes the environment it is given, and only that', async () => {
    const r = await execRunner('/usr/bin/env', [], { ONLY: 'this' });
    expect(r.stdout).toBe('ONLY=this\n');
  });
});
