export { launchChild } from './child.js';
export { lookUp } from './command-path.js';
export { createPtyLauncher, type PtyLauncherOptions } from './pty.js';
export type { LaunchEvents, Launched, Launcher, LaunchOptions } from './types.js';
