export { type BindingPolicy, shouldClearSessionBinding } from './binding-policy.js';
export type { LiveChild } from './children.js';
export { DEFAULT_IDLE_TIMEOUT_MS, IDLE_TIMEOUT_ENV } from './idle-timeout.js';
export { DEFAULT_MAX_LINE_CHARS, type LineInfo } from './lines.js';
export {
  DEFAULT_CHILD_TIMEOUT_MS,
  DEFAULT_MAX_DRAIN_MS,
  DEFAULT_MAX_SESSIONS,
  DEFAULT_RUN_END_SETTLE_MS,
} from './options.js';
export { LiveSessionPool } from './pool.js';
export type { LiveSession } from './session.js';
export type { LiveTurn } from './turn.js';
export type * from './types.js';
