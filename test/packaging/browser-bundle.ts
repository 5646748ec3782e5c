/**
 * Bundles the browser entry of lanemux (the `.` entry plus the WebSocket client adapter) the way an
 * application's bundler would: vite in library mode, minified, `browser` conditions, every
 * dependency (zod, @msgpack/msgpack, partysocket) inlined. Used by the size budget.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliCompressSync, constants } from 'node:zlib';
import { build } from 'vite';
import { scratchDir } from '../support/scratch.ts';

export const ROOT = join(import.meta.dirname, '..', '..');

/** The bundle's sizes and where its bytes come from. */
export interface BundleReport {
  /** Minified bytes. */
  readonly minified: number;
  /** Brotli (quality 11) bytes of the minified bundle. */
  readonly brotli: number;
  /** Bytes per package (`lanemux/<folder>` for the sources) before minification, largest first. */
  readonly byPackage: ReadonlyArray<readonly [string, number]>;
  /** Bytes per module (`src/…` for the sources, else the package) before minification, largest first. */
  readonly byModule: ReadonlyArray<readonly [string, number]>;
  /** The minified code of the entry chunk and the chunks it imports (what the page loads up front), for assertions on what it contains. */
  readonly code: string;
  /** Brotli bytes of the chunks loaded on demand (dynamic `import()`: zod to explain a refusal, the acceptor for a transport that listens). */
  readonly lazyBrotli: number;
}

/** Brotli bytes at the highest quality (what a CDN serves). */
export function brotliSize(bytes: Uint8Array): number {
  return brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }).byteLength;
}

/** The npm package a module id belongs to (`lanemux` for the sources). */
function packageOf(id: string): string {
  return (
    /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(id)?.[1] ??
    (id.includes('/src/') ? `lanemux/${/\/src\/([^/]+)/.exec(id)?.[1] ?? ''}` : 'entry')
  );
}

/** A module id as the size report names it: `stream/node.ts` for the sources, else its package. */
function moduleOf(id: string): string {
  const src = /\/src\/(.+)$/.exec(id)?.[1];
  return src !== undefined && !id.includes('node_modules') ? src : packageOf(id);
}

/** Bundle `entrySource` (an ES module importing the sources) and measure it. */
export async function bundleForBrowser(
  entrySource: string,
  options: { external?: readonly string[] } = {},
): Promise<BundleReport> {
  const dir = scratchDir('lanemux-size-');
  try {
    const entry = join(dir, 'entry.ts');
    writeFileSync(entry, entrySource);
    const out = await build({
      configFile: false,
      root: ROOT,
      logLevel: 'silent',
      resolve: { conditions: ['browser', 'module', 'import', 'default'], mainFields: ['browser', 'module', 'main'] },
      build: {
        write: false,
        minify: true,
        target: 'es2022',
        lib: { entry, formats: ['es'], fileName: 'lanemux-browser' },
        // Lib mode keeps whitespace in ES output (for /*@__PURE__*/ comments an app's bundler may
        // still use); an application ships fully minified code, so minify the output as it would.
        rollupOptions: {
          external: (id: string) => (options.external ?? []).some((p) => id === p || id.startsWith(`${p}/`)),
          output: { minify: true },
        },
      },
    });
    type Chunk = {
      type: string;
      fileName: string;
      isEntry?: boolean;
      imports?: string[];
      code?: string;
      modules?: Record<string, { renderedLength: number }>;
    };
    const outputs = (Array.isArray(out) ? out : [out]) as Array<{ output: Chunk[] }>;
    const all = outputs.flatMap((o) => o.output).filter((o) => o.type === 'chunk');
    // What the page loads up front counts against its budget: the entry chunk and every chunk it
    // imports statically (rollup moves modules a lazy chunk shares with the entry into such a
    // chunk). Chunks reached only through a dynamic import() load only when used (zod, when an input
    // is refused; the acceptor, when a transport listens) and are reported apart.
    const byName = new Map(all.map((c) => [c.fileName, c]));
    const upFront = new Set<Chunk>();
    const visit = (c: Chunk | undefined): void => {
      if (c === undefined || upFront.has(c)) return;
      upFront.add(c);
      for (const name of c.imports ?? []) visit(byName.get(name));
    };
    for (const c of all) if (c.isEntry === true) visit(c);
    const chunks = [...upFront];
    const lazy = all.filter((c) => !upFront.has(c));
    const code = chunks.map((c) => c.code ?? '').join('\n');
    const lazyBrotli =
      lazy.length === 0 ? 0 : brotliSize(new TextEncoder().encode(lazy.map((c) => c.code ?? '').join('\n')));
    const bytes = new TextEncoder().encode(code);
    const per = new Map<string, number>();
    const perModule = new Map<string, number>();
    for (const c of chunks) {
      for (const [id, m] of Object.entries(c.modules ?? {})) {
        per.set(packageOf(id), (per.get(packageOf(id)) ?? 0) + m.renderedLength);
        perModule.set(moduleOf(id), (perModule.get(moduleOf(id)) ?? 0) + m.renderedLength);
      }
    }
    const byPackage = [...per].sort((a, b) => b[1] - a[1]);
    const byModule = [...perModule].sort((a, b) => b[1] - a[1]);
    return { minified: bytes.byteLength, brotli: brotliSize(bytes), byPackage, byModule, code, lazyBrotli };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
