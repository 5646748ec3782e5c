/**
 * Packaging: what `npm pack` puts in the tarball from a fresh clone (no `dist/` yet). `prepack`
 * builds `dist/` (the tarball used to ship without it), with source and declaration maps into the
 * shipped `src/`; LICENSE is in it; package.json names the repository; README's links work on the
 * registry page (npmjs.com resolves no relative link).
 *
 * The pack runs on a copy of the package's files in a scratch directory: `npm pack --dry-run` runs
 * `prepack`, which rebuilds `dist/`, and the checkout's `dist/` may be in use by other suites.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join, posix } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECKOUT, scratchDir } from '../support/scratch.ts';

interface PackResult {
  readonly files: ReadonlyArray<{ readonly path: string }>;
}

let dir: string;
let files: Set<string>;

beforeAll(() => {
  dir = scratchDir('lanemux-pack-');
  // What a clone holds that the pack needs: the manifest, the docs npm always ships, the build config and the sources.
  for (const f of ['package.json', 'README.md', 'LICENSE', 'tsconfig.json', 'tsconfig.build.json'])
    copyFileSync(join(CHECKOUT, f), join(dir, f));
  cpSync(join(CHECKOUT, 'src'), join(dir, 'src'), { recursive: true });
  symlinkSync(join(CHECKOUT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const r = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['pack', '--dry-run', '--json'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 180_000,
  });
  const json = r.stdout.slice(Math.max(0, r.stdout.indexOf('[')));
  if (r.status !== 0 || !json.startsWith('['))
    throw new Error(`npm pack failed (status ${r.status}):\n${r.stdout}\n${r.stderr}`);
  files = new Set((JSON.parse(json) as PackResult[])[0]!.files.map((f) => f.path));
}, 200_000);

afterAll(() => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('npm pack from a fresh clone', () => {
  it('ships dist/ built by prepack: the entry point, its types, their source and declaration maps', () => {
    for (const f of [
      'dist/index.js',
      'dist/index.d.ts',
      'dist/index.js.map',
      'dist/index.d.ts.map',
      'dist/adapters/websocket.d.ts.map',
    ])
      expect(files, f).toContain(f);
  });

  it('ships every file the exports map points at', () => {
    const exportsMap = (
      JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        exports: Record<string, string | Record<string, string>>;
      }
    ).exports;
    const targets = Object.values(exportsMap).flatMap((e) => (typeof e === 'string' ? [e] : Object.values(e)));
    for (const t of targets) expect(files, t).toContain(posix.normalize(t));
  });

  it('the maps point into the shipped src/, so a debugger and "go to definition" land on the TypeScript source', () => {
    for (const map of ['dist/index.d.ts.map', 'dist/index.js.map', 'dist/wire/item.js.map']) {
      const { sources } = JSON.parse(readFileSync(join(dir, map), 'utf8')) as { sources: string[] };
      expect(sources.length, map).toBeGreaterThan(0);
      for (const s of sources) expect(files, `${map} → ${s}`).toContain(posix.join(posix.dirname(map), s));
    }
  });

  it('ships the MIT LICENSE and README', () => {
    expect(files).toContain('LICENSE');
    expect(files).toContain('README.md');
    const license = readFileSync(join(CHECKOUT, 'LICENSE'), 'utf8');
    expect(license).toMatch(/^MIT License\n\nCopyright \(c\) 2026 lanemux contributors\n/);
    expect((JSON.parse(readFileSync(join(CHECKOUT, 'package.json'), 'utf8')) as { license: string }).license).toBe(
      'MIT',
    );
  });

  it('package.json names the repository', () => {
    const pkg = JSON.parse(readFileSync(join(CHECKOUT, 'package.json'), 'utf8')) as { repository?: unknown };
    expect(pkg.repository).toEqual({ type: 'git', url: 'git+https://github.com/lanemux/lanemux.git' });
  });

  it("README's links and images are absolute (npmjs.com renders the README without the repository's files)", () => {
    const readme = readFileSync(join(CHECKOUT, 'README.md'), 'utf8');
    const targets = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
    expect(targets.length).toBeGreaterThan(0);
    expect(targets.filter((t) => !/^(https?:|#|mailto:)/.test(t))).toEqual([]);
  });
});
