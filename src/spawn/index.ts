export { launchChild } from './child.js';
export { lookUp } from './command-path.js';
export { type OomScoreHost, type OomScorePlan, OWN_OOM_SCORE_FILE, planOomScore } from './oom-score.js';
export { createPtyLauncher, type PtyLauncherOptions } from './pty.js';
export type { LaunchEvents, Launched, Launcher, LaunchOptions } from './types.js';
