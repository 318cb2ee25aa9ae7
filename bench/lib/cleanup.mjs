import { killSurvivors } from './procs.mjs';

/**
 * Every process the bench starts is registered here (by identity: pid + start time). At the end
 * of each figure, survivors are counted, SIGKILLed by pid, and reported: a benchmark that leaks
 * processes is a failed benchmark.
 */
export class Tracker {
  #members = [];

  add(members) {
    for (const m of members) this.#members.push(m);
  }

  /** Kills what is left, forgets everything, and returns how many were alive. */
  sweep() {
    const alive = killSurvivors(this.#members);
    this.#members = [];
    return alive;
  }
}
