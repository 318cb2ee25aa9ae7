export { type CwdProblem, cwdProblem } from './cwd.js';
export { checkDuration, parseDuration, UNITS as DURATION_UNITS } from './duration.js';
export { type EnvSource, envDurationMs, WATCHDOG_ENV, watchdogFromEnv } from './env.js';
export {
  COOKIE_NAME,
  checkInput,
  checkOptions,
  checkPtyCells,
  checkSwitch,
  DEFAULT_DRAIN_MS,
  DEFAULT_GRACE_MS,
  DEFAULT_MAX_BYTES,
  DEFAULT_OOM_SCORE_RAISE,
  elements,
  MAX_OOM_SCORE_RAISE,
  MAX_PTY_CELLS,
  type NormalSpec,
  normalizeOomScoreAdj,
  normalizeSpec,
  type OomScoreSetting,
  OUTER_COOKIES_NAME,
  oneOf,
} from './normalize.js';
export { killable, RT_MAX, RT_MIN, realtimeName, realtimeNumber } from './realtime.js';
export { normalizeSignal, signalName, signalNumber } from './signals.js';
