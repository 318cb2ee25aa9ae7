export { CgroupRemains } from './cgroup-remains.js';
export { Journal, type JournalEntry, type JournalProblem } from './journal.js';
export { type ReapAction, type ReapedRun, type ReapOptions, type ReapReport, reap } from './reap.js';
export { MAX_SIGNALLED, parseRecord, RECORD_FORMAT, type RunRecord, type StoppingRecord } from './record.js';
export { checkStateDir, defaultStateDir, fallbackDirs } from './state-dir.js';
