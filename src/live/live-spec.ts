import { ProcwardenError } from '../errors.js';
import { type NormalSpec, normalizeSpec } from '../options/index.js';
import { checkWritable, isThenable } from '../output/index.js';
import type { RunSpec, StreamName } from '../types.js';

/**
 * A copy of the spec as acquire() was given it, down to the parts a caller could still change
 * (argv, env, output, pty, inheritFds): the spec is checked, fingerprinted and started from this
 * copy, so a change after acquire() returned cannot slip a spec that was never checked past the
 * check (and evict a session for a spec that then cannot start). The signal and callbacks stay
 * the caller's, by design. What is not an object is passed on for checkLiveSpec to refuse.
 */
export function snapshotSpec(spec: RunSpec): RunSpec {
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) return spec;
  const copy: Record<string, unknown> = { ...spec };
  for (const key of ['argv', 'inheritFds']) {
    if (Array.isArray(copy[key])) copy[key] = [...(copy[key] as unknown[])];
  }
  for (const key of ['env', 'output', 'pty']) {
    const value = copy[key];
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) copy[key] = { ...value };
  }
  return copy as unknown as RunSpec;
}

/**
 * Checks a session's spec completely, before the pool does anything for it (evicting an idle
 * session to make room for a spec that cannot start would lose that session for nothing).
 */
export function checkLiveSpec(spec: RunSpec): NormalSpec {
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
    throw new ProcwardenError(
      'INVALID_SPEC',
      `acquire(key, spec): spec must be an object like { argv: [...] }, got ${spec === null ? 'null' : typeof spec}.`,
    );
  }
  if (spec.stdin !== undefined && spec.stdin !== 'pipe') {
    throw new ProcwardenError(
      'INVALID_OPTION',
      `a live session talks to its process over stdin; leave spec.stdin unset (it is 'pipe'), got ${JSON.stringify(typeof spec.stdin === 'string' ? spec.stdin : typeof spec.stdin)}.`,
    );
  }
  // As given (a non-object output would be spread into one below), then as it will be spawned,
  // the session's own onData included (output.inherit cannot have one).
  normalizeSpec({ ...spec, stdin: 'pipe' }, 'live-spec-check');
  const spawned = normalizeSpec(liveSpec(spec, { output: () => {}, consumer: () => {} }), 'live-spec-check');
  // Opened only at the spawn, after any eviction: the likely failures are checked now.
  if (spawned.file !== undefined) checkWritable(spawned.file);
  return spawned;
}

/** What the session reads of the output: the text, and whether the spec's consumer is behind. */
export interface SessionReader {
  output(text: string, stream: StreamName): void;
  /** The spec's onData returned a promise (+1), or one of those settled (-1). */
  consumer(waits: 1 | -1): void;
}

/** The session's process talks over stdin; its output also feeds the session (events, turn silence). */
export function liveSpec(spec: RunSpec, reader: SessionReader): RunSpec {
  const userOnData = spec.output?.onData;
  return {
    ...spec,
    stdin: 'pipe',
    output: {
      ...spec.output,
      // The session's own reading comes first and regardless: a throwing onData (recorded in the
      // run's notes by the output collector) must not blind the session's events and turn timers.
      onData: (text, stream) => {
        reader.output(text, stream);
        const returned = userOnData?.(text, stream);
        if (!isThenable(returned)) return returned;
        // Passed through: the promise is the caller's backpressure, and while it is pending the
        // process may be blocked on a full pipe, which a turn must not take for silence.
        reader.consumer(1);
        const settled = () => reader.consumer(-1);
        return Promise.resolve(returned).then(settled, (error) => {
          settled();
          throw error;
        });
      },
    },
  };
}
