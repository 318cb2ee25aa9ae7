import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'forks',
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/built.ts', 'test/helpers/state-dir.ts'],
    testTimeout: 60_000,
    hookTimeout: 30_000,
    // Real processes and real time: two cores, so keep parallelism modest to keep timing honest.
    maxWorkers: 2,
    // One file at a time: the CLI files start many Node processes, and next to them the core
    // files' loose time bounds failed on this 2-core host; in sequence the suite takes as long.
    fileParallelism: true,
  },
});
