export { launchChild } from './child.js';
export type { LaunchEvents, Launched, Launcher, LaunchOptions } from './types.js';
