/**
 * A built copy of the package in a temporary directory, as npm would install it: `package.json`,
 * `dist/` compiled from the current sources, and `node_modules` linked to the repo's (so its
 * dependencies resolve). Tests lint, import and run this copy instead of the repo's own `dist/`,
 * which other suites and scripts may be reading or rebuilding at the same time.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { scratchDir } from '../support/scratch.ts';

export const ROOT = join(import.meta.dirname, '..', '..');

/** A temporary package directory; `remove()` deletes it. */
export interface PackageFixture {
  readonly dir: string;
  remove(): void;
}

/** Compile the sources into `<tmp>/dist` and lay out the package around it; `extra` files are copied too. */
export function buildPackage(extra: readonly string[] = []): PackageFixture {
  const dir = scratchDir('lanemux-pkg-');
  const tsc = join(ROOT, 'node_modules', '.bin', 'tsc');
  const r = spawnSync(tsc, ['-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(dir, 'dist')], {
    encoding: 'utf8',
  });
  // Type errors are the typecheck step's to report; here only a missing entry point is fatal.
  if (!existsSync(join(dir, 'dist', 'index.js'))) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`tsc did not emit dist/index.js (status ${r.status}):\n${r.stdout}${r.stderr}`);
  }
  copyFileSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  for (const rel of extra) {
    mkdirSync(join(dir, rel, '..'), { recursive: true });
    copyFileSync(join(ROOT, rel), join(dir, rel));
  }
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
