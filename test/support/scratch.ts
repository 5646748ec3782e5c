/**
 * Scratch directories for tests, inside the checkout (`<root>/.scratch/`, git-ignored), never in the
 * system temp directory: a file written there resolves packages only if some `node_modules` happens
 * to sit above it, so a suite that passes on one machine fails on a fresh one.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';

/** The checkout's root. */
export const CHECKOUT = join(import.meta.dirname, '..', '..');

/** A new empty directory under `<root>/.scratch/`, named `<prefix>XXXXXX`. The caller removes it. */
export function scratchDir(prefix: string): string {
  const base = join(CHECKOUT, '.scratch');
  mkdirSync(base, { recursive: true });
  return mkdtempSync(join(base, prefix));
}
