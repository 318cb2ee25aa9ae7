import { accessSync, constants, readFileSync } from 'node:fs';
import { ProcwardenError } from '../errors.js';
import type { OomScoreSetting } from '../options/index.js';

/** This process's own score: what a command it starts inherits, and what the run's is raised from. */
export const OWN_OOM_SCORE_FILE = '/proc/self/oom_score_adj';
/** The kernel's bounds for oom_score_adj. */
const OOM_SCORE_MAX = 1000;
const OOM_SCORE_MIN = -1000;

/** What the command's start must do about its score (LaunchPlan.oomScore), and what to say. */
export interface OomScorePlan {
  /** The value the shell that starts the command writes first; absent: the command inherits ours. */
  write?: { value: number; required: boolean };
  /** Why the default could not be applied (the run goes on with our score). */
  note?: string;
}

export interface OomScoreHost {
  platform: NodeJS.Platform;
  /** Where this process's own score is read (and shown writable); the shell writes its own. */
  file: string;
}

const THIS_HOST: OomScoreHost = { platform: process.platform, file: OWN_OOM_SCORE_FILE };

/**
 * Decides a run's oom_score_adj at spawn(): ours + `raise`, capped at 1000. Nothing to write when
 * that is ours already (raise 0, or ours is 1000): the command inherits it, and no shell is needed.
 *
 * Whether the write can work is judged here, from our own file: readable, and writable (access(2)
 * sees a read-only /proc and the file's owner; raising needs no capability, so the kernel refuses
 * an increase for no other reason short of a security module). When it cannot, the default gives
 * way (a note, and the command runs with our score) and an explicit setting throws
 * OOM_SCORE_UNAVAILABLE before anything starts. Outside Linux there is no oom_score_adj: nothing is
 * done (an explicit setting notes that).
 */
export function planOomScore(setting: OomScoreSetting | null, host: OomScoreHost = THIS_HOST): OomScorePlan {
  if (setting === null || setting.raise === 0) return {};
  if (host.platform !== 'linux') {
    return setting.explicit
      ? {
          note: `oomScoreAdj: not applied: the OOM killer's scores are Linux's, and this is ${host.platform}`,
        }
      : {};
  }
  let step = 'read';
  try {
    const own = parseScore(readFileSync(host.file, 'latin1'));
    const value = Math.min(OOM_SCORE_MAX, own + setting.raise);
    if (value === own) return {};
    step = 'written';
    accessSync(host.file, constants.W_OK);
    return { write: { value, required: setting.explicit } };
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    const why = `${host.file} cannot be ${step} ${code === undefined ? `(${message})` : `(${code})`}`;
    if (setting.explicit) {
      throw new ProcwardenError(
        'OOM_SCORE_UNAVAILABLE',
        `oomScoreAdj: ${setting.raise} cannot be applied: ${why}; give oomScoreAdj: false (--oom-score-adj off) to run the command with this process's score.`,
        { cause: error },
      );
    }
    return { note: `oomScoreAdj: the command keeps this process's OOM score: ${why}` };
  }
}

function parseScore(text: string): number {
  const value = Number(text.trim());
  if (!Number.isInteger(value) || value < OOM_SCORE_MIN || value > OOM_SCORE_MAX)
    throw new Error(`it holds ${JSON.stringify(text.slice(0, 20))}, not a score`);
  return value;
}
