import { NotApplicable } from './stats.mjs';

/**
 * Starts one procwarden run with the requested containment, or says why that containment is
 * not available here: CGROUP_UNAVAILABLE thrown by spawn, or a spawn-error result.
 */
export function spawnContained(sup, spec) {
  let handle;
  try {
    handle = sup.spawn(spec);
  } catch (error) {
    if (error?.code === 'CGROUP_UNAVAILABLE' || error?.code === 'INVALID_OPTION') {
      throw new NotApplicable(`${error.code}: ${error.message}`);
    }
    throw error;
  }
  return handle;
}

/** Checks once whether `containment` works on this host; returns null when it does, else the reason. */
export async function containmentUnavailable(sup, containment) {
  try {
    const r = await spawnContained(sup, { argv: ['/bin/true'], containment }).result;
    if (r.reason === 'spawn-error') return `${r.error?.code}: ${r.error?.message}`;
    if (r.containment !== containment) return `fell back to ${r.containment}: ${r.containmentFallback}`;
    return null;
  } catch (error) {
    if (error instanceof NotApplicable) return error.message;
    throw error;
  }
}
