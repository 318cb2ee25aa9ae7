import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'forks',
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/built.ts', 'test/helpers/state-dir.ts', 'test/helpers/no-bashrc.ts'],
    testTimeout: 60_000,
    hookTimeout: 30_000,
    // Real processes and real time. Most of a test's time is spent waiting on processes (a grace, a
    // timer, a start-up), not computing: three files at a time keep two cores busy without starving
    // any one of them. A test asserts a property, never a timing, so the sharing cannot fail it.
    maxWorkers: 3,
    fileParallelism: true,
  },
});
