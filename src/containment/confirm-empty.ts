import { type Members, unconfirmed } from '../kill/index.js';
import type { ProcessInfo } from '../tree/index.js';

/** One scan's members, and what it could not read. */
export interface ScanOutcome {
  members: ProcessInfo[];
  /** Processes that vanished between the listing and their read (see Sweep.vanished). */
  vanished: number;
  /** Processes read between two execs, their environment (so their cookie) unreadable. */
  unsettled: number;
}

/** Extra scans before an empty tree is believed, when processes keep vanishing mid-scan. */
const CONFIRM_SCANS = 3;
/**
 * How long an empty tree waits for processes caught between two execs (their environment, so
 * their cookie, unreadable) to finish the exec: one the loaded machine keeps off the CPU for a few
 * scheduler slices is then readable; one that takes longer is named in the notes.
 */
const SETTLE_MS = 100;
/**
 * And at least this many looks, however long they take: on a loaded machine one sweep of /proc
 * can take the whole window, and the process it waits for is as slow to get the CPU as the sweep.
 */
const SETTLE_SCANS = 3;
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Scans until its answer can be believed. Members found are believed at once; "nothing left" only
 * from a scan that saw no process vanish mid-read (a member that forks and exits between the
 * directory read and its stat read leaves a child that was not listed, and pid numbers wrap, so a
 * new child is not always listed later) and none caught between two execs (the late fork of a
 * member's SIGTERM handler, re-parented away at once, has no tie to the run but its cookie until
 * its exec is done). A table that cannot tell what it missed (`sure` false: ps) always gets a
 * second look. A supervisor's scans and the watchdog's after a crash need the same care. An empty
 * tree it could not believe for processes that kept vanishing is answered as `unconfirmed`, never
 * as gone: the caller decides (a termination stops what its scans read, and counts one as escaped
 * if that does not settle it).
 */
export async function scanUntilSure(
  scanOnce: () => Promise<ScanOutcome>,
  sure: boolean,
  notes: string[],
): Promise<Members> {
  let scan = await scanOnce();
  for (let i = 0; scan.members.length === 0 && (scan.vanished > 0 || !sure) && i < CONFIRM_SCANS; i++) {
    scan = await scanOnce();
    if (scan.vanished === 0) break;
  }
  const settleBy = Date.now() + SETTLE_MS;
  for (let looks = 0; scan.members.length === 0 && scan.unsettled > 0; looks++) {
    if (looks >= SETTLE_SCANS && Date.now() >= settleBy) break;
    await pause(1);
    scan = await scanOnce();
  }
  const say = (text: string) => {
    if (!notes.includes(text)) notes.push(text);
  };
  if (scan.members.length === 0 && scan.unsettled > 0) {
    say(
      `a process stayed between two execs (its environment unreadable) for ${SETTLE_MS} ms and ${SETTLE_SCANS} looks: that nothing of the tree is left could not be confirmed`,
    );
  }
  if (scan.members.length === 0 && scan.vanished > 0) {
    return unconfirmed('processes kept vanishing mid-scan faster than they could be read');
  }
  return scan.members;
}
