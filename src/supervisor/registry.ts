import { ProcwardenError, showValue } from '../errors.js';
import type { RunFilter, RunInfo, RunResult, RunState } from '../types.js';
import type { ManagedRun } from './managed-run.js';
import type { RunLog } from './run-log.js';

export interface RegistryEntry {
  readonly run: ManagedRun;
  readonly log: RunLog;
  readonly scope: string | null;
  result: RunResult | null;
  endedAt: number | null;
}

export const DEFAULT_MAX_EXITED = 2000;
/**
 * What the exited runs may keep in all, in characters of captured output and log: 2000 runs of a
 * command that filled the default capture (1 MiB a stream) and log would otherwise hold gigabytes.
 * Past it the oldest exited are forgotten first, as past maxExited; the newest is always kept.
 */
export const MAX_RETAINED_CHARS = 64 * 1024 * 1024;

const retainedBy = (e: RegistryEntry) =>
  (e.result?.stdout.text.length ?? 0) + (e.result?.stderr.text.length ?? 0) + e.log.chars;

/**
 * Every run a supervisor knows: live ones until they settle, then exited ones up to a cap (the
 * oldest exited are forgotten first). Finalisation happens once; a second one changes nothing.
 */
export class RunRegistry {
  private readonly live = new Map<string, RegistryEntry>();
  private readonly exited = new Map<string, RegistryEntry>();
  private retained = 0;

  constructor(private readonly maxExited: number) {}

  add(entry: RegistryEntry): void {
    this.live.set(entry.run.id, entry);
  }

  /** Moves a run to the exited records; returns false when it was already final. */
  finalize(id: string, result: RunResult): boolean {
    const entry = this.live.get(id);
    if (!entry) return false;
    this.live.delete(id);
    entry.result = result;
    entry.endedAt = Date.now();
    // What it keeps from here on costs what retainedBy counts, not whatever its front was cut from.
    entry.log.settle();
    if (this.maxExited > 0) {
      this.exited.set(id, entry);
      this.retained += retainedBy(entry);
    }
    while (
      this.exited.size > this.maxExited ||
      (this.retained > MAX_RETAINED_CHARS && this.exited.size > 1)
    ) {
      const [oldest, gone] = this.exited.entries().next().value as [string, RegistryEntry];
      this.exited.delete(oldest);
      this.retained -= retainedBy(gone);
    }
    return true;
  }

  entry(id: string): RegistryEntry | undefined {
    return this.live.get(id) ?? this.exited.get(id);
  }

  liveRuns(): ManagedRun[] {
    return [...this.live.values()].map((e) => e.run);
  }

  liveCount(): number {
    return this.live.size;
  }

  liveInScope(scope: string): ManagedRun[] {
    return [...this.live.values()].filter((e) => e.scope === scope).map((e) => e.run);
  }

  list(filter: RunFilter = {}): RunInfo[] {
    const states = filter.state === undefined ? null : checkStates(filter.state);
    const out: RunInfo[] = [];
    for (const map of [this.exited, this.live]) {
      for (const e of map.values()) {
        if (filter.scope !== undefined && e.scope !== filter.scope) continue;
        const info = describe(e);
        if (states && !states.includes(info.state)) continue;
        out.push(info);
      }
    }
    return out.sort((a, b) => a.startedAt - b.startedAt);
  }
}

export function describe(e: RegistryEntry): RunInfo {
  const { run, result } = e;
  const holding = !result && run.state === 'holding';
  return {
    id: run.id,
    command: [...run.spec.argv],
    pid: run.pid ?? null,
    pgid: run.pgid,
    cgroupPath: run.cgroupPath ?? null,
    containment: run.containment,
    // Until the registry has the result, the run counts as stopping (its release is in flight).
    state: result ? 'exited' : run.state === 'exited' ? 'stopping' : run.state,
    reason: result?.reason ?? run.stopReason ?? null,
    // A held run's command has ended: its status is known before the run's result.
    exitCode: result ? result.exitCode : holding ? (run.commandExit?.code ?? null) : null,
    exitSignal: result ? result.exitSignal : holding ? (run.commandExit?.signal ?? null) : null,
    scope: e.scope,
    startedAt: run.startedAt,
    endedAt: e.endedAt,
    lastOutputAt: run.lastOutputAt,
    ...(holding ? { held: [...run.heldMembers] } : {}),
  };
}

const STATES: readonly RunState[] = ['starting', 'running', 'holding', 'stopping', 'exited'];

/** A misspelt state would silently match nothing: say so instead. */
function checkStates(state: RunState | readonly RunState[]): readonly string[] {
  const states = ([] as string[]).concat(state);
  for (const s of states) {
    if (!STATES.includes(s as RunState)) {
      throw new ProcwardenError(
        'INVALID_OPTION',
        `list({ state }): ${showValue(s)} is not a run state; use ${STATES.join(', ')}.`,
      );
    }
  }
  return states;
}

/** A log cursor: a whole number of characters, as a previous read returned it (0: from the start). */
export function checkCursor(since: unknown): number {
  if (since === undefined) return 0;
  if (typeof since !== 'number' || !Number.isSafeInteger(since) || since < 0) {
    throw new ProcwardenError(
      'INVALID_OPTION',
      `read({ since }): ${showValue(since)} is not a cursor; pass 0 or the cursor a previous read returned.`,
    );
  }
  return since;
}
