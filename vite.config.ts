import { defineConfig } from 'vitest/config';

// One config for the playground build (vite) and the test runner (vitest).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'e2e/**/*.test.ts'],
    environment: 'node',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Property tests: one fixed seed under CI (see the file).
    setupFiles: ['test/support/fast-check-seed.ts'],
  },
});
