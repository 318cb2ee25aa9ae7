import { type Clock, nextTurn, within } from '../clock.js';
import type { OutputCollector } from '../output/index.js';

/**
 * Far more than the pipes or socket pairs of a tree that is gone can still hold (a socket's send
 * buffer goes up to net.core.wmem_max, doubled: 8 MiB here; a pipe to fs.pipe-max-size, 1 MiB):
 * more, written after the end while a consumer was behind, comes from a process still alive.
 */
const DRAIN_MAX_BYTES = 64 * 1024 * 1024;

/** What the drain reads of its run. */
export interface DrainRun {
  clock: Clock;
  output: OutputCollector;
  outputDone: Promise<void>;
  drainMs: number;
  drainMaxMs: number;
  /** When the run's timeout comes (clock time): it bounds a slow consumer's wait. */
  deadline: number;
  /** Settles when cancel() or kill() comes during the drain: it waits no more. */
  givenUp: Promise<void>;
  /** Asked at each check: whether a consumer that is behind is waited for (see ManagedRun). */
  waitsForConsumer(): boolean;
  /** Processes the run keeps (leftovers: 'keep') may be what writes or holds the pipes. */
  keepsWriters: boolean;
  notes: string[];
}

/**
 * Waits for the pipes to end. While output keeps coming the window starts again (an active
 * writer's last lines are what a user reads first), bounded by drainMaxMs in all; pipes held open
 * with nothing coming through are let go after drainMs. A consumer that is behind is waited for
 * only when the run says so (its remaining output is finite); otherwise what it has not taken is
 * dropped. Every cut of output that was still coming, or still waiting for a consumer, is noted.
 */
export async function drainOutput(d: DrainRun): Promise<void> {
  const { clock, output } = d;
  let ended = false;
  const end = d.outputDone.then(() => {
    ended = true;
  });
  let givenUp = false;
  const quit = d.givenUp.then(() => {
    givenUp = true;
  });
  const start = clock.now();
  const hardEnd = start + d.drainMaxMs;
  const from = output.received;
  let quietFrom = start;
  /** When the drain last found output had come (before its start: nothing came during it). */
  let lastArrival = Number.NEGATIVE_INFINITY;
  let seen = output.received;
  for (;;) {
    // Whether the window closed, asked of the timer itself: a clock read can fall a fraction of
    // a millisecond short of a deadline the timer has reached.
    let woke = false;
    const wake = Promise.race([end, quit]).then(() => {
      woke = true;
    });
    const due = Math.min(quietFrom + d.drainMs, hardEnd);
    await within(clock, wake, Math.max(0, due - clock.now()));
    // The whole drain's bound, asked of the deadline the timer had (see above), not of a clock read.
    const spent = !woke && due === hardEnd;
    // Nothing read yet: after a stall of this process (a loaded machine) its expired timers run
    // before the poll that reads what the pipes got meanwhile. One turn of the loop lets it read.
    if (!ended && !output.behind && output.received === seen) await nextTurn();
    if (ended && !output.behind) return;
    const arrived = output.received !== seen;
    seen = output.received;
    if (arrived) lastArrival = clock.now();
    const written = output.received - from;
    const after = `${Math.round(clock.now() - start)} ms`;
    if (output.behind) {
      if (!d.waitsForConsumer()) {
        d.notes.push(
          `output: a consumer was still behind when the drain ended (${after} after the command's end); what the pipes still held was dropped`,
        );
        return;
      }
      if (!ended && written > DRAIN_MAX_BYTES) {
        d.notes.push(cutNote(d, written, after, 'more than the pipes of an ended tree can hold'));
        return;
      }
      let settled = false;
      const waited = Promise.race([output.caughtUp(), quit]).then(() => {
        settled = true;
      });
      const left = d.deadline - clock.now();
      if (Number.isFinite(left)) await within(clock, waited, Math.max(0, left));
      else await waited;
      // The run's timeout came, asked of the timer itself, as for the window above: timers count
      // whole milliseconds, and one can fire a fraction of one before the clock reads its deadline.
      if (output.behind && !settled) {
        d.notes.push(
          'output: a consumer was still behind when the run’s timeout came (the command had ended); what the pipes still held was dropped',
        );
        return;
      }
      if (output.behind) continue; // given up: the check above drops it, with its note
      if (ended) return;
      // The consumer caught up with what the pipes held: the window starts again for the rest.
      quietFrom = clock.now();
      seen = output.received;
      continue;
    }
    // Quiet for drainMs, unless this window was the sliver left before drainMaxMs: then output that
    // came within the last drainMs was still coming when the drain ran out.
    const quiet = !arrived && clock.now() - lastArrival >= d.drainMs;
    if (givenUp) {
      if (arrived) d.notes.push(cutNote(d, written, after, 'the run was stopped during the drain'));
      return;
    }
    if (spent || written > DRAIN_MAX_BYTES) {
      if (!quiet) d.notes.push(cutNote(d, written, after, `drainMaxMs (${d.drainMaxMs} ms) ran out`));
      else if (!ended && d.keepsWriters) d.notes.push(letGoNote(clock.now() - quietFrom));
      return;
    }
    if (!arrived) {
      // The pipes are merely held open. What a process the run keeps writes there from now on is
      // not read; say so, as its output is the run's to expect.
      if (!ended && d.keepsWriters) d.notes.push(letGoNote(clock.now() - quietFrom));
      return;
    }
    // Output is still coming: the quiet window starts again.
    quietFrom = clock.now();
    lastArrival = quietFrom;
  }
}

function letGoNote(quietMs: number): string {
  return `output: the pipes were let go after ${Math.round(quietMs)} ms of quiet while still held open (by a leftover the run keeps, or a process that escaped the tree); what is written to them later is not read`;
}

function cutNote(d: DrainRun, written: number, after: string, why: string): string {
  const who = d.keepsWriters
    ? 'a leftover the run keeps (or a process that escaped the tree)'
    : "a process outside the run's tree (it escaped it, or was given the pipes)";
  return `output: cut while still being written, by ${who}, ${after} after the command's end (${why}): ${written} bytes came through after the end; what came later was not read`;
}
