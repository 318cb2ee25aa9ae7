/** Median, min and max of a sample list (the median of an even count is the mean of the middle two). */
export function summarize(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const n = sorted.length;
  const mid = Math.floor(n / 2);
  const median = n % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted[n - 1], n, samples };
}

/**
 * Runs every contender `reps` times, alternating: repetition r starts at contender r (mod count),
 * so no contender always runs first on a warm or cold machine. `measure(contender, rep)` returns a
 * number, or throws `NotApplicable` to mark the contender n/a for this case.
 */
export async function alternate(contenders, reps, measure) {
  const samples = new Map(contenders.map((c) => [c, []]));
  const na = new Map();
  for (let rep = 0; rep < reps; rep++) {
    for (let k = 0; k < contenders.length; k++) {
      const c = contenders[(rep + k) % contenders.length];
      if (na.has(c)) continue;
      try {
        samples.get(c).push(await measure(c, rep));
      } catch (error) {
        if (!(error instanceof NotApplicable)) throw error;
        na.set(c, error.message);
      }
    }
  }
  return contenders.map((c) =>
    na.has(c) ? { contender: c.name, na: na.get(c) } : { contender: c.name, ...summarize(samples.get(c)) },
  );
}

export class NotApplicable extends Error {}

/** Adds `ratio` (median / the baseline row's median) to every measured row. */
export function withRatios(rows, baselineName) {
  const base = rows.find((r) => r.contender === baselineName);
  return rows.map((r) => (r.na || !base || base.na ? r : { ...r, ratio: r.median / base.median }));
}
