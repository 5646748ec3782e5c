/**
 * Citations in the sources resolve inside the repository: every "protocol.md §N" names a section
 * that docs/protocol.md has, and nothing sends a reader to a document the repository does not hold
 * (an outside specification's chapters, behaviour ids or numbered reviews).
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

function* files(dir: string, ext: RegExp): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name === 'results' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* files(p, ext);
    else if (ext.test(name)) yield p;
  }
}

/** Section numbers docs/protocol.md defines (`## 3.`, `### 3.6`, …). */
function protocolSections(): Set<string> {
  const out = new Set<string>();
  for (const line of readFileSync(join(ROOT, 'docs', 'protocol.md'), 'utf8').split('\n')) {
    const m = /^#{2,4}\s+(\d+(?:\.\d+)*)\.?\s/.exec(line);
    if (m) out.add(m[1]!);
  }
  return out;
}

/** Phrases that point at documents outside the repository. */
const OUTSIDE = [
  /seed chapter/i,
  /credit-model\.md/,
  /architecture\.md/,
  /performance\.md/i,
  /\bbehaviou?rs? [A-Z]+-\d+/,
  /\(review \d+/i,
  /shared\/spec/,
];

const SCANNED = ['src', 'test', 'bench', 'e2e', 'playground', 'docs'].map((d) => join(ROOT, d));
const SELF = fileURLToPath(import.meta.url);

describe('citations resolve inside the repository', () => {
  it('every "protocol.md §N" in the sources names a section of docs/protocol.md', () => {
    const sections = protocolSections();
    expect(sections.size).toBeGreaterThan(20);
    const broken: string[] = [];
    for (const file of files(join(ROOT, 'src'), /\.ts$/)) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        const at = line.indexOf('protocol.md');
        if (at < 0) return;
        // "protocol.md §9.6, §10.2" and "protocol.md §§3–4": every § after the name on that line.
        for (const m of line.slice(at).matchAll(/§+\s*(\d+(?:\.\d+)*)/g)) {
          if (!sections.has(m[1]!))
            broken.push(
              `${relative(ROOT, file).split(sep).join('/')}:${i + 1}: §${m[1]} is not a section of docs/protocol.md`,
            );
        }
      });
    }
    expect(broken).toEqual([]);
  });

  it('no file sends the reader to a document outside the repository', () => {
    const found: string[] = [];
    for (const dir of SCANNED) {
      for (const file of files(dir, /\.(ts|mts|mjs|js|md)$/)) {
        if (file === SELF) continue;
        const lines = readFileSync(file, 'utf8').split('\n');
        lines.forEach((line, i) => {
          // A phrase wrapped onto the next line of a comment counts too ("… (seed\n * chapter …").
          const next = (lines[i + 1] ?? '').replace(/^\s*(?:\*|\/\/|#)?\s*/, '');
          const joined = `${line} ${next}`;
          for (const re of OUTSIDE)
            if (re.test(joined) && !re.test(next))
              found.push(`${relative(ROOT, file).split(sep).join('/')}:${i + 1}: ${line.trim().slice(0, 100)}`);
        });
      }
    }
    expect(found).toEqual([]);
  });
});
