// Where the shared perf anchors live (`../shared/bench-anchors` beside the repository root, in CI
// too), and the anchors' harness (`lib.mjs`: pass tracker, pass driver, ack writer, token format,
// runPair, finalizePass), imported from there so lanemux's benchmark runs exactly the same shapes.
// Override the folder with BENCH_ANCHORS_DIR.
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const anchorsDir = resolve(process.env.BENCH_ANCHORS_DIR ?? join(repoRoot, '..', 'shared', 'bench-anchors'));
export const distDir = resolve(process.env.LANEMUX_DIST ?? join(repoRoot, 'dist'));

if (!existsSync(join(anchorsDir, 'lib.mjs'))) {
  throw new Error(`bench anchors not found at ${anchorsDir} (expected ../shared/bench-anchors beside the repo; set BENCH_ANCHORS_DIR)`);
}

/** The anchors' harness module (lib.mjs). */
export const lib = await import(pathToFileURL(join(anchorsDir, 'lib.mjs')).href);

/** Import a module of the built lanemux output (dist/). */
export function dist(rel) {
  return import(pathToFileURL(join(distDir, rel)).href);
}
