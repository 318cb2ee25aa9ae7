import { linkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isGone, type ProcessTable } from '../tree/index.js';
import { selfIdentity } from './self.js';
import { readRecordFile } from './trust.js';

/**
 * One reaper per run. The watchdog, `procwarden reap` and a `reconcileOnStart` can all find the
 * same orphaned run at once; each would send its own graceful signal (a second SIGTERM restarts a
 * shell trap's cleanup), run its own grace, SIGKILL and cgroup removal. Before its first signal a
 * reaper takes `<run id>.reap`, created whole or not at all (link(2) of a written temporary file
 * fails with EEXIST), holding its pid, start time and pid namespace. Another reaper leaves the run
 * to it while that process lives, and takes over only once it is provably dead (same namespace,
 * pid gone or reused).
 */
export const CLAIM_FORMAT = 'procwarden.reap/1';

/** Files of the claim protocol: never records, never reported as foreign files. */
export const CLAIM_FILE = /\.reap(\.\d+\.tmp)?$/;

interface Owner {
  format: typeof CLAIM_FORMAT;
  pid: number;
  start: string | null;
  pidNamespace: string | null;
}

export type ClaimResult =
  | { claimed: true; release: () => void }
  /** `live`: another reaper that lives holds it; otherwise a claim that could not be judged or taken. */
  | { claimed: false; live: boolean; why: string };

export async function claimRun(dir: string, runId: string, table: ProcessTable): Promise<ClaimResult> {
  const path = join(dir, `${runId}.reap`);
  const me = selfIdentity();
  const mine = JSON.stringify({
    format: CLAIM_FORMAT,
    pid: process.pid,
    start: me.start,
    pidNamespace: me.pidNamespace,
  } satisfies Owner);
  // Twice at most: once, and once more after removing a dead reaper's claim.
  for (let attempt = 0; attempt < 2; attempt++) {
    const taken = create(path, mine);
    if (taken === true) return { claimed: true, release: () => removeQuietly(path) };
    if (taken !== 'EEXIST') return { claimed: false, live: false, why: `cannot claim ${path}: ${taken}` };
    const read = readRecordFile(path);
    if ('untrusted' in read)
      return {
        claimed: false,
        live: false,
        why: `claim ${path} is not trusted (${read.untrusted}): left alone`,
      };
    if ('unreadable' in read) {
      // Removed between our create and our read: its owner finished; try again.
      if (read.unreadable.includes('ENOENT')) continue;
      return { claimed: false, live: false, why: `claim ${path}: ${read.unreadable}` };
    }
    const owner = parseOwner(read.text);
    if (!owner)
      return { claimed: false, live: false, why: `claim ${path} is not one procwarden writes: left alone` };
    if (owner.pid === process.pid && owner.start === me.start)
      return { claimed: false, live: true, why: 'this process is reaping it already' };
    // Whether that reaper lives cannot be told from here: a person's to look at.
    if (owner.pidNamespace !== me.pidNamespace)
      return {
        claimed: false,
        live: false,
        why: `reaper pid ${owner.pid} of another pid namespace (${owner.pidNamespace}) claimed it; not ours to judge`,
      };
    const info = await table.get(owner.pid);
    const dead = !info || isGone(info) || (owner.start !== null && info.startTime !== owner.start);
    if (!dead) return { claimed: false, live: true, why: `reaper pid ${owner.pid} is ending it` };
    // A dead reaper's claim. Checked again just before the unlink: a reaper that took it over
    // meanwhile wrote other content (the window left is between this read and the unlink).
    const again = readRecordFile(path);
    if (!('text' in again) || again.text !== read.text) continue;
    removeQuietly(path);
  }
  return { claimed: false, live: false, why: `claim ${path} keeps changing hands: left alone` };
}

/** true, or the errno code of the failure ('EEXIST' when someone holds it). */
function create(path: string, text: string): true | string {
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, text, { mode: 0o600, flag: 'w' });
    linkSync(tmp, path);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? String(error);
  } finally {
    removeQuietly(tmp);
  }
}

function parseOwner(text: string): Owner | null {
  try {
    const o = JSON.parse(text) as Partial<Owner>;
    const nullableString = (v: unknown) => v === null || (typeof v === 'string' && v !== '');
    if (
      o.format === CLAIM_FORMAT &&
      typeof o.pid === 'number' &&
      Number.isInteger(o.pid) &&
      o.pid > 0 &&
      nullableString(o.start) &&
      nullableString(o.pidNamespace)
    )
      return o as Owner;
  } catch {
    // not JSON
  }
  return null;
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // gone already
  }
}
