import { randomBytes } from 'node:crypto';
import { type Clock, realClock } from '../clock.js';
import { CgroupHost } from '../containment/index.js';
import { ProcwardenError } from '../errors.js';
import type { SendSignal } from '../kill/index.js';
import { type Launcher, launchChild } from '../spawn/index.js';
import { normalizeSpec } from '../spec/index.js';
import { type ProcessTable, platformTable } from '../tree/index.js';
import type { RunHandle, RunMode, RunResult, RunSpec, SupervisorOptions } from '../types.js';
import { ManagedRun } from './managed-run.js';

/** Seams for tests and other platforms; not part of the stable contract. */
export interface SupervisorInternals {
  table?: ProcessTable;
  send?: SendSignal;
  /** Where cgroup containment is probed and its cgroups are made (one per supervisor by default). */
  cgroups?: CgroupHost;
  launchers?: Partial<Record<RunMode, Launcher>>;
}

const ptyNotReady: Launcher = () => {
  throw new ProcwardenError(
    'PTY_UNAVAILABLE',
    "mode 'pty' is not available in this build; use mode 'child'.",
  );
};

/** Owns runs: spawns them, knows which are live, and can stop them all. */
export class Supervisor {
  /** Unique on this machine: it prefixes run ids, which are also the runs' environment cookies. */
  readonly id = `pw${process.pid.toString(36)}${randomBytes(3).toString('hex')}`;
  private readonly clock: Clock;
  private readonly table: ProcessTable;
  private readonly send: SendSignal | undefined;
  private readonly cgroups: CgroupHost;
  private readonly launchers: Record<RunMode, Launcher>;
  private readonly defaults: SupervisorOptions['defaults'];
  private readonly live = new Map<string, ManagedRun>();
  private counter = 0;

  constructor(options: SupervisorOptions & SupervisorInternals = {}) {
    this.clock = options.clock ?? realClock;
    this.table = options.table ?? platformTable();
    this.send = options.send;
    this.cgroups = options.cgroups ?? new CgroupHost();
    this.defaults = options.defaults;
    this.launchers = { child: launchChild, pty: ptyNotReady, ...options.launchers };
  }

  /** Validates the spec (throws ProcwardenError on bad input, before anything starts) and starts it. */
  spawn(spec: RunSpec): RunHandle {
    const id = `${this.id}-${++this.counter}`;
    const normal = normalizeSpec(spec, id, this.defaults);
    const run = new ManagedRun(id, normal, {
      clock: this.clock,
      table: this.table,
      send: this.send,
      cgroups: this.cgroups,
      launcher: this.launchers[normal.mode],
      onSettled: (r: ManagedRun, _result: RunResult) => this.live.delete(r.id),
    });
    this.live.set(id, run);
    run.start();
    return run;
  }

  /** Runs that have not settled yet. */
  running(): RunHandle[] {
    return [...this.live.values()];
  }

  /** Cancels every live run gracefully and resolves when all have settled. */
  async cancelAll(reason = 'cancelAll'): Promise<RunResult[]> {
    const runs = [...this.live.values()];
    for (const run of runs) run.cancel(reason);
    return Promise.all(runs.map((r) => r.result));
  }
}
