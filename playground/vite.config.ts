import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/** The engine's HTTP port (server-node.mjs `--port`); vite forwards `/engine.json` to it. */
const enginePort = Number(process.env['PLAYGROUND_ENGINE_PORT'] ?? 8787);

// The playground page (vite app). The root `vite.config.ts` is vitest's.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  logLevel: 'warn',
  server: {
    host: '127.0.0.1',
    port: Number(process.env['PLAYGROUND_PORT'] ?? 5173),
    proxy: { '/engine.json': `http://127.0.0.1:${enginePort}` },
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
  },
});
