/**
 * The layers of `src/`, enforced: which folder may import which. A wrong-way import (the codec
 * reaching into the engine, the mux naming a transport, an adapter reaching into streams) fails
 * `npm test` with the file, the line and the rule it breaks.
 *
 * From the bottom up (README "Architecture" draws the same picture):
 * - `errors.ts`, `validate.ts`: the error base and option parsing, shared by every layer.
 * - `runtime/`: the one place that touches clocks, timers and the CSPRNG.
 * - `wire/`: the byte-exact codec. `credit/`: the pure credit model (names wire's record types).
 * - `metrics/`: counters and histograms.
 * - `discovery/`: finding peers (static lists, etcd, NATS), on the runtime's clock.
 * - `transport/`: the transport port and the peer layer (HELLO, framing, links, dials).
 * - `adapters/`: one file per runtime adapter (the per-stream ones implement `transport/per-stream-port.ts`).
 * - `messenger/`: active messages over the port.
 * - `mux/`: batcher, ingress and sweep, over the messenger's interface.
 * - `stream/`: anchors, senders, tickets, `createNode` (which finds peers through `discovery/`): everything below.
 * - `ai/`: the AI SDK's chat transport and server helper (`lanemux/ai`), on `stream/`'s calls.
 * - `index.ts`: the public entry.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');

const LEAVES = ['errors.ts', 'validate.ts', 'schema.ts'];

/** Folder (or root file) → what it may import by value. Its own folder is always allowed. */
const ALLOWED: Record<string, readonly string[]> = {
  'errors.ts': [],
  'validate.ts': ['errors.ts', 'schema.ts'],
  'schema.ts': [],
  runtime: [],
  wire: LEAVES,
  credit: ['wire', ...LEAVES],
  metrics: ['wire', ...LEAVES],
  discovery: ['wire', 'runtime', ...LEAVES],
  transport: ['wire', 'runtime', ...LEAVES],
  adapters: ['transport', 'wire', 'runtime', ...LEAVES],
  messenger: ['transport', 'wire', 'runtime', ...LEAVES],
  mux: ['messenger', 'credit', 'wire', 'runtime', 'metrics', ...LEAVES],
  stream: ['mux', 'messenger', 'credit', 'wire', 'runtime', 'metrics', 'transport', 'discovery', ...LEAVES],
  ai: ['stream', 'messenger', ...LEAVES],
  client: ['stream', 'messenger', 'transport', 'wire', 'runtime', ...LEAVES],
  'client.ts': ['client', 'stream', 'mux', 'messenger', 'adapters', ...LEAVES],
  'index.ts': [
    'discovery',
    'stream',
    'mux',
    'messenger',
    'credit',
    'wire',
    'runtime',
    'metrics',
    'transport',
    'adapters',
    ...LEAVES,
  ],
};

/** Type-only imports a layer may make beyond {@link ALLOWED} (they vanish at runtime): none today. */
const ALLOWED_TYPES: Record<string, readonly string[]> = {};

function* tsFiles(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* tsFiles(p);
    else if (name.endsWith('.ts')) yield p;
  }
}

/** The layer of a path relative to `src/`: its top folder, or the root file itself. */
function layerOf(rel: string): string {
  return rel.includes('/') ? rel.slice(0, rel.indexOf('/')) : rel;
}

interface Import {
  readonly line: number;
  readonly target: string; // relative to src/, with '/'
  readonly typeOnly: boolean;
}

/** Static imports and re-exports with a relative specifier, and dynamic `import('…')`. */
export function importsOf(text: string, fileRel: string): Import[] {
  const out: Import[] = [];
  const re = /(?:^|\n)\s*(import|export)\s+(type\s+)?([^;]*?)\s*from\s*'([^']+)'|import\(\s*'([^']+)'\s*\)/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const spec = m[4] ?? m[5]!;
    if (!spec.startsWith('.')) continue;
    const clause = m[3] ?? '';
    // `import { type A, type B }` is type-only too.
    const names = /^\{([^}]*)\}$/.exec(clause.trim())?.[1];
    const allTypes =
      names !== undefined && names.split(',').every((n) => n.trim() === '' || n.trim().startsWith('type '));
    const target = normalize(join(dirname(fileRel), spec))
      .split(sep)
      .join('/');
    const line = text.slice(0, m.index).split('\n').length + (text[m.index] === '\n' ? 1 : 0);
    out.push({ line, target, typeOnly: m[2] !== undefined || allTypes });
  }
  return out;
}

describe('allowed imports between the layers of src/', () => {
  it('every folder imports only the layers below it', () => {
    const broken: string[] = [];
    for (const file of tsFiles(SRC)) {
      const rel = relative(SRC, file).split(sep).join('/');
      const from = layerOf(rel);
      const allowed = ALLOWED[from];
      if (allowed === undefined) {
        broken.push(`${rel}: the layer '${from}' is not in the table of allowed imports (add it where it belongs)`);
        continue;
      }
      for (const imp of importsOf(readFileSync(file, 'utf8'), rel)) {
        if (imp.target.startsWith('..')) {
          broken.push(`src/${rel}:${imp.line}: imports ${imp.target}, outside src/`);
          continue;
        }
        const to = layerOf(imp.target);
        if (to === from || allowed.includes(to)) continue;
        if (imp.typeOnly && (ALLOWED_TYPES[from] ?? []).includes(imp.target)) continue;
        broken.push(
          `src/${rel}:${imp.line}: ${from} may not import ${imp.typeOnly ? 'types from ' : ''}${imp.target} (${from} → ${allowed.join(', ') || 'nothing'})`,
        );
      }
    }
    expect(broken).toEqual([]);
  });

  it('the checker sees the import forms the sources use', () => {
    const text = [
      "import { a } from '../wire/a.ts';",
      "import type { B } from '../mux/b.ts';",
      "import {\n  c,\n  d,\n} from './x.ts';",
      "import { type E, type F } from '../stream/e.ts';",
      "export { g } from '../credit/g.ts';",
      "const h = await import('../runtime/h.ts');",
      "import { z } from 'zod/mini';",
    ].join('\n');
    expect(importsOf(text, 'mux/file.ts').map((i) => `${i.line} ${i.target} ${i.typeOnly}`)).toEqual([
      '1 wire/a.ts false',
      '2 mux/b.ts true',
      '3 mux/x.ts false',
      '7 stream/e.ts true',
      '8 credit/g.ts false',
      '9 runtime/h.ts false',
    ]);
  });
});
