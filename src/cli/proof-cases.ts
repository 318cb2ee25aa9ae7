import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { COOKIE_NAME, OUTER_COOKIES_NAME } from '../options/index.js';
import type { Supervisor } from '../supervisor/index.js';
import { isGone, type ProcessTable } from '../tree/index.js';
import type { RunHandle, RunResult, RunSpec } from '../types.js';

/** The evidence one case leaves: what the run reported and what was true on the machine after. */
export interface CaseProof {
  case: string;
  claim: string;
  holds: boolean;
  /** The checks that did not hold (empty when the case holds). */
  failed: string[];
  reason: RunResult['reason'] | null;
  exitCode: number | null;
  exitSignal: string | null;
  timedOut: boolean;
  escalated: boolean;
  durationMs: number;
  signalled: number;
  killed: number;
  stdout: string[];
  /** Marker files the processes write when they act on a signal (true: written). */
  markers: Record<string, boolean>;
  /** The descendant the case is about, after the run settled (null: the case has none). */
  descendantAliveAfterWait: boolean | null;
  /** Every process of the case still alive after it ended: must be empty. */
  survivors: number[];
  /** Facts specific to the case (the escapee's session, the caller's group...). */
  facts: Record<string, unknown>;
}

export interface CaseContext {
  sup: Supervisor;
  table: ProcessTable;
  script: (name: string) => string;
  dir: string;
  /** The absolute file URL of the procwarden library this proof runs (for the sacrificial parent). */
  library: string;
}

interface Outcome {
  result: RunResult;
  stdout: string;
  checks: Array<[string, boolean]>;
  /** The descendant the case is about, and whether it was alive once the run had settled. */
  descendant?: { name: string; alive: boolean };
  facts?: Record<string, unknown>;
  /** Run ids whose cookie holders must all be gone. */
  runs?: string[];
}

export interface ProofCase {
  name: string;
  claim: string;
  markers: string[];
  run(ctx: CaseContext): Promise<Outcome>;
}

const sh = (ctx: CaseContext, name: string): RunSpec['argv'] => ['/bin/sh', ctx.script(name), ctx.dir];

function start(ctx: CaseContext, spec: Omit<RunSpec, 'output'>): { handle: RunHandle; output: () => string } {
  let out = '';
  const handle = ctx.sup.spawn({
    ...spec,
    output: {
      onData: (text) => {
        out += text;
      },
    },
  });
  return { handle, output: () => out };
}

async function until(probe: () => boolean, timeoutMs = 15_000): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

export function pidsIn(dir: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.pid')) continue;
    const pid = Number(readFileSync(join(dir, f), 'utf8').trim());
    if (pid > 0) out.set(f.slice(0, -4), pid);
  }
  return out;
}

async function alive(table: ProcessTable, pid: number | undefined): Promise<boolean> {
  return pid !== undefined && !isGone(await table.get(pid));
}

export const CASES: ProofCase[] = [
  {
    name: 'cleanup',
    claim: 'a command that traps SIGTERM finishes its cleanup on timeout; no SIGKILL',
    markers: ['cleanup.done'],
    async run(ctx) {
      const { handle, output } = start(ctx, { argv: sh(ctx, 'cleanup.sh'), timeoutMs: 1000, graceMs: 5000 });
      const result = await handle.result;
      return {
        result,
        stdout: output(),
        checks: [
          ['the run timed out', result.reason === 'overall-timeout' && result.timedOut],
          ['the command exited 0 after its cleanup', result.exitCode === 0],
          ['no SIGKILL was needed', !result.escalated],
          ['the cleanup wrote its marker', existsSync(join(ctx.dir, 'cleanup.done'))],
          ["the cleanup's output was captured", output().includes('cleanup done')],
        ],
      };
    },
  },
  {
    name: 'fallback',
    claim: 'a command that ignores SIGTERM gets SIGKILL when the grace ends',
    markers: ['ignore.done'],
    async run(ctx) {
      const graceMs = 1000;
      const { handle, output } = start(ctx, { argv: sh(ctx, 'ignore.sh'), timeoutMs: 800, graceMs });
      const result = await handle.result;
      const graceUsed = result.tree.report?.graceUsedMs ?? 0;
      return {
        result,
        stdout: output(),
        checks: [
          ['the run timed out', result.reason === 'overall-timeout' && result.timedOut],
          ['SIGKILL was needed and ended it', result.escalated && result.exitSignal === 'SIGKILL'],
          ['SIGKILL came only when the grace ended', graceUsed >= graceMs - 20],
          ['the command never got past its loop', !existsSync(join(ctx.dir, 'ignore.done'))],
        ],
        facts: { graceMs, graceUsedMs: graceUsed },
      };
    },
  },
  {
    name: 'descendant',
    claim: 'a parent exits on SIGTERM; its child gets SIGTERM too and is gone',
    markers: ['child.done'],
    async run(ctx) {
      const { handle, output } = start(ctx, { argv: sh(ctx, 'descendant.sh'), graceMs: 5000 });
      const ready = await until(() => output().includes('ready'));
      handle.cancel('proof');
      const result = await handle.result;
      return {
        result,
        stdout: output(),
        descendant: { name: 'child', alive: await alive(ctx.table, pidsIn(ctx.dir).get('child')) },
        checks: [
          ['the command started and got ready', ready],
          ['the run was cancelled', result.reason === 'cancelled'],
          ['the parent exited 0 on SIGTERM', result.exitCode === 0],
          ['the child got SIGTERM (wrote its marker)', existsSync(join(ctx.dir, 'child.done'))],
          ['no SIGKILL was needed', !result.escalated],
        ],
      };
    },
  },
  {
    name: 'escaped',
    claim: 'a descendant that left with setsid and a double fork still gets SIGTERM and is gone',
    markers: ['escapee.done'],
    async run(ctx) {
      const { handle, output } = start(ctx, {
        argv: sh(ctx, 'escaped.sh'),
        env: { PROOF_NODE: process.execPath },
        graceMs: 5000,
      });
      const ready = await until(() => output().includes('ready'));
      const pids = pidsIn(ctx.dir);
      const escapee = await ctx.table.get(pids.get('escapee') ?? -1);
      const parent = await ctx.table.get(pids.get('parent') ?? -1);
      const escaped = !!escapee && !!parent && escapee.sid !== parent.sid && escapee.ppid !== parent.pid;
      handle.cancel('proof');
      const result = await handle.result;
      return {
        result,
        stdout: output(),
        descendant: { name: 'escapee', alive: await alive(ctx.table, escapee?.pid) },
        facts: {
          escapee: escapee && { pid: escapee.pid, ppid: escapee.ppid, sid: escapee.sid, pgid: escapee.pgid },
          command: parent && { pid: parent.pid, sid: parent.sid, pgid: parent.pgid },
        },
        checks: [
          ['the command started and got ready', ready],
          ['the escapee had left: other session, other parent', escaped],
          ['the run was cancelled', result.reason === 'cancelled'],
          ['the escapee got SIGTERM (wrote its marker)', existsSync(join(ctx.dir, 'escapee.done'))],
          ['no SIGKILL was needed', !result.escalated],
        ],
      };
    },
  },
  {
    name: 'no-detach',
    claim: "a run in its caller's own process group ends; the caller and its group live on",
    markers: ['child.done'],
    async run(ctx) {
      // The caller is sacrificial: it leads a process group of its own (our process-group run).
      const inner = join(ctx.dir, 'inner');
      mkdirSync(inner);
      const { handle, output } = start(ctx, {
        argv: [
          process.execPath,
          ctx.script('sacrificial.mjs'),
          ctx.library,
          ctx.script('descendant.sh'),
          inner,
        ],
        timeoutMs: 30_000,
        graceMs: 2000,
      });
      const reported = await until(() => output().includes('\n') || handle.state === 'exited');
      let report: { result: RunResult; bystander: number } | null = null;
      try {
        report = JSON.parse(output().split('\n')[0] ?? '');
      } catch {
        report = null;
      }
      const caller = handle.pid === undefined ? null : await ctx.table.get(handle.pid);
      const bystander = report ? await ctx.table.get(report.bystander) : null;
      const victims = pidsIn(inner);
      const callerAlive = !isGone(caller) && handle.state === 'running';
      const groupAlive = !isGone(bystander) && bystander?.pgid === caller?.pid;
      // Checked before the caller is ended: ending it would end whatever the run left in its group.
      const childAlive = await alive(ctx.table, victims.get('child'));
      const parentAlive = await alive(ctx.table, victims.get('parent'));
      handle.cancel('proof done');
      const outer = await handle.result;
      const r = report?.result;
      return {
        result: r ?? outer,
        stdout: r?.stdout.text ?? '',
        descendant: { name: 'child', alive: childAlive },
        runs: r ? [outer.id, r.id] : [outer.id],
        facts: {
          callerPid: caller?.pid ?? null,
          callerGroup: caller?.pgid ?? null,
          bystander: bystander && { pid: bystander.pid, pgid: bystander.pgid },
          callerAliveAfterRun: callerAlive,
          callerGroupAliveAfterRun: groupAlive,
        },
        checks: [
          ['the caller reported the run', reported && report !== null],
          ["the run stayed in the caller's group", r?.containment === 'none'],
          ['the run was cancelled', r?.reason === 'cancelled'],
          ['the child got SIGTERM (wrote its marker)', existsSync(join(inner, 'child.done'))],
          ['the command itself is gone after the run', victims.has('parent') && !parentAlive],
          ['the caller is alive after the run', callerAlive],
          ["the caller's process group is alive after the run", groupAlive],
        ],
      };
    },
  },
];

/** Runs one case and turns what happened into its proof; every process it started must be gone. */
export async function proveCase(c: ProofCase, ctx: CaseContext): Promise<CaseProof> {
  const o = await c.run(ctx);
  const survivors = new Set<number>();
  for (const dir of [ctx.dir, join(ctx.dir, 'inner')]) {
    if (!existsSync(dir)) continue;
    for (const pid of pidsIn(dir).values()) if (await alive(ctx.table, pid)) survivors.add(pid);
  }
  for (const id of [o.result.id, ...(o.runs ?? [])]) {
    for (const pid of (await ctx.table.findByEnv?.(COOKIE_NAME, id, OUTER_COOKIES_NAME)) ?? []) {
      if (await alive(ctx.table, pid)) survivors.add(pid);
    }
  }
  const checks = [...o.checks];
  if (o.descendant) checks.push([`the ${o.descendant.name} is gone after the run`, !o.descendant.alive]);
  checks.push(['nothing the case started is still alive', survivors.size === 0]);
  const markers: Record<string, boolean> = {};
  for (const m of c.markers) {
    markers[m] = existsSync(join(ctx.dir, m)) || existsSync(join(ctx.dir, 'inner', m));
  }
  const failed = checks.filter(([, ok]) => !ok).map(([what]) => what);
  const r = o.result;
  return {
    case: c.name,
    claim: c.claim,
    holds: failed.length === 0,
    failed,
    reason: r.reason,
    exitCode: r.exitCode,
    exitSignal: r.exitSignal,
    timedOut: r.timedOut,
    escalated: r.escalated,
    durationMs: r.durationMs,
    signalled: r.tree.signalled,
    killed: r.tree.killed,
    stdout: o.stdout.split('\n').filter((l) => l !== ''),
    markers,
    descendantAliveAfterWait: o.descendant ? o.descendant.alive : null,
    survivors: [...survivors],
    facts: o.facts ?? {},
  };
}
