import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { alive, LeakGuard } from './helpers/procs.js';

/**
 * Documented handle and Supervisor methods that no other test reached, exercised through the
 * public entry as built (dist/index.js, what `import 'procwarden'` loads; npm test builds first).
 */
const DIST = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'index.js');
let lib: typeof import('../src/index.js');
let sup: InstanceType<typeof lib.Supervisor>;

const leaks = new LeakGuard();
afterEach(() => leaks.check());

beforeAll(async () => {
  lib = await import(pathToFileURL(DIST).href);
  sup = new lib.Supervisor({ watchdog: false });
});
afterAll(async () => {
  await sup.shutdown();
});

describe('handle.commandEnded (public entry)', () => {
  it('resolves when the command exits, before the rest of its tree has ended', async () => {
    // The command exits 3 at once; its background job ignores SIGTERM, so the tree needs the grace.
    const h = sup.spawn({
      argv: ['sh', '-c', 'trap "" TERM; sleep 30 >/dev/null 2>&1 & echo $!; exit 3'],
      graceMs: 1000,
    });
    leaks.trackCookie(h.id);
    const end = await h.commandEnded;
    const endedAt = Date.now();
    expect(end).toEqual({ reason: 'exit', exitCode: 3, exitSignal: null });
    const result = await h.result;
    expect(Date.now() - endedAt).toBeGreaterThan(700);
    expect(result).toMatchObject({ reason: 'exit', exitCode: 3, escalated: true });
    expect(alive(Number(result.stdout.text.trim()))).toBe(false);
  });

  it('says how the command ended: kill(), a spawn error, an aborted signal, a cancel before the start', async () => {
    const killed = sup.spawn({ argv: ['sleep', '30'] });
    leaks.track(killed.pid);
    setTimeout(() => killed.kill(), 50);
    expect(await killed.commandEnded).toMatchObject({
      reason: 'cancelled',
      exitCode: null,
      exitSignal: 'SIGKILL',
    });

    const missing = sup.spawn({ argv: ['/no/such/command-pw'] });
    const end = await missing.commandEnded;
    expect(end).toMatchObject({ reason: 'spawn-error', exitCode: null, exitSignal: null });
    expect(end.error?.code).toBe('ENOENT');
    expect((await missing.result).reason).toBe('spawn-error');

    const aborted = sup.spawn({ argv: ['sleep', '30'], signal: AbortSignal.abort() });
    expect(await aborted.commandEnded).toMatchObject({ reason: 'aborted', exitCode: null, exitSignal: null });

    // replaceScope: the new run waits for the old one's tree; cancelled meanwhile, it never starts.
    const old = sup.spawn({ argv: ['sleep', '30'], scope: 'audit', graceMs: 2000 });
    leaks.track(old.pid);
    const next = sup.spawn({ argv: ['sleep', '30'], scope: 'audit', replaceScope: true });
    next.cancel('never mind');
    expect(await next.commandEnded).toEqual({
      reason: 'cancelled',
      detail: 'never mind',
      exitCode: null,
      exitSignal: null,
    });
    expect(next.pid).toBeUndefined();
    await old.result;
  });
});

describe('sup.handle(id) (public entry)', () => {
  it('gives the live handle back, and undefined for an id it never had', async () => {
    const h = sup.spawn({ argv: ['sleep', '30'], stdin: 'pipe' });
    leaks.track(h.pid);
    expect(sup.handle(h.id)).toBe(h);
    expect(sup.handle('pw-no-such-run')).toBeUndefined();
    sup.handle(h.id)?.cancel('through handle()');
    const result = await h.result;
    expect(result.reason).toBe('cancelled');
    expect(alive(h.pid ?? 0)).toBe(false);
  });
});

describe('output.inherit (public entry)', () => {
  it("the command writes to the caller's own stdout and stderr; nothing is captured", async () => {
    const script = [
      `import { run } from ${JSON.stringify(pathToFileURL(DIST).href)};`,
      "const r = await run({ argv: ['sh', '-c', 'echo out; echo err >&2'], output: { inherit: true } }).result;",
      "process.stdout.write('captured ' + JSON.stringify([r.reason, r.stdout.text, r.stderr.text, r.stdout.bytes]) + '\\n');",
    ].join('\n');
    const host = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(host.status).toBe(0);
    expect(host.stdout).toBe('out\ncaptured ["exit","","",0]\n');
    expect(host.stderr).toBe('err\n');
  });

  it('is refused (INVALID_OPTION) with a consumer of the output, noOutputTimeoutMs or mode pty', () => {
    for (const extra of [
      { output: { inherit: true, onData: () => {} } },
      { output: { inherit: true }, noOutputTimeoutMs: 100 },
      { output: { inherit: true }, mode: 'pty' as const },
    ]) {
      expect(() => sup.spawn({ argv: ['true'], ...extra })).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      );
    }
  });
});
