import { readFileSync } from 'node:fs';
import { delay, isGone, killSurvivors } from './procs.mjs';

/** What a figure's processes get to end on their own after it returns (a watchdog reading its host's exit). */
const SETTLE_MS = 2000;

/**
 * Every process the bench starts is registered here (by identity: pid + start time). At the end
 * of each figure, what is still alive once it had SETTLE_MS to exit is counted, SIGKILLed by pid
 * and reported: a benchmark that leaks processes is a failed benchmark.
 */
export class Tracker {
  #members = [];

  add(members) {
    for (const m of members) this.#members.push(m);
  }

  /** Kills what is left after the settle window, forgets everything, and returns how many were alive. */
  async sweep() {
    const until = performance.now() + SETTLE_MS;
    while (this.#members.some((m) => !isGone(m)) && performance.now() < until) await delay(10);
    for (const m of this.#members.filter((m) => !isGone(m))) {
      console.error(`  survivor: pid ${m.pid}: ${commandLine(m.pid)}`);
    }
    const alive = killSurvivors(this.#members);
    this.#members = [];
    return alive;
  }
}

function commandLine(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '(gone)';
  }
}
