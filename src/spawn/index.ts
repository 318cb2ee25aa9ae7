export { launchChild } from './child.js';
export { createPtyLauncher, type PtyLauncherOptions } from './pty.js';
export type { LaunchEvents, Launched, Launcher, LaunchOptions } from './types.js';
