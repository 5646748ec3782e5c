// Where this checkout's Deno and Bun are (installed from npm by `npm ci`).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CHECKOUT } from './scratch.ts';

/** The first of `candidates` that answers `--version` (`.bin/bun` is a placeholder after `npm ci --ignore-scripts`). */
export function binary(...candidates: string[]): string {
  const found = candidates.find(
    (c) =>
      existsSync(c) &&
      spawnSync(c, ['--version'], { stdio: 'ignore', env: { ...process.env, DENO_NO_UPDATE_CHECK: '1' } }).status === 0,
  );
  if (found === undefined) throw new Error(`no working binary among ${candidates.join(', ')}`);
  return found;
}

/** This checkout's Deno. */
export const denoBinary = (): string =>
  binary(join(CHECKOUT, 'node_modules/.bin/deno'), join(CHECKOUT, 'node_modules/deno/deno'));

/** This checkout's Bun. */
export const bunBinary = (): string =>
  binary(join(CHECKOUT, 'node_modules/.bin/bun'), join(CHECKOUT, 'node_modules/@oven/bun-linux-x64/bin/bun'));
