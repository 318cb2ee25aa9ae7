import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'forks',
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 30_000,
    // Real processes and real time: two cores, so keep parallelism modest to keep timing honest.
    maxWorkers: 2,
  },
});
