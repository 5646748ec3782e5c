/**
 * Core purity: every `.ts` file under `src/` except the runtime adapters must run unchanged on
 * Node, Deno, Bun and browsers (README "Architecture": the core imports no adapter, which
 * `allowed-imports.test.ts` enforces; `wire/` and `credit/` have no timers and no I/O). So a core file may not import `node:*` or a bare Node builtin, nor
 * touch Node or browser globals (`Buffer`, `process`, an undetected `setImmediate`, `__dirname`,
 * `__filename`, `require(`, `global.`, `window`, `document`, `navigator`).
 *
 * Comments and string contents are blanked before matching identifiers (a small lexer, not a full
 * parser), so TSDoc mentioning "Buffer" or a string saying 'process' does not trip the check.
 */
import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

const NODE_BUILTINS = [
  'net',
  'fs',
  'crypto',
  'os',
  'path',
  'child_process',
  'worker_threads',
  'buffer',
  'process',
  'events',
  'stream',
  'http',
  'https',
  'tls',
  'dgram',
  'url',
  'util',
];

/** Identifiers that name a runtime-specific global when used free (not as `x.name` or a local). */
const FORBIDDEN_GLOBALS = ['Buffer', 'process', '__dirname', '__filename', 'window', 'document', 'navigator'];

/** Runtime adapter files: allowed to use their runtime. Paths are relative to `src/`, with `/`. */
export function isAdapter(rel: string): boolean {
  const base = rel.split('/').pop() ?? rel;
  return (
    /^transport\/node-tcp[^/]*\.ts$/.test(rel) ||
    /^transport\/ws-server[^/]*\.ts$/.test(rel) ||
    /^transport\/node-[^/]*\.ts$/.test(rel) ||
    /^adapters\/ws-server[^/]*\.ts$/.test(rel) ||
    rel.startsWith('node/') ||
    /^(node|deno|bun)-/.test(base)
  );
}

// ───────────────────────── a tiny lexer ─────────────────────────

const REGEX_PRECEDERS = new Set([
  '',
  '(',
  ',',
  '=',
  ':',
  '[',
  '!',
  '&',
  '|',
  '?',
  '{',
  '}',
  ';',
  '+',
  '-',
  '*',
  '%',
  '<',
  '>',
  '~',
  '^',
]);
const REGEX_KEYWORDS = /(?:^|[^\w$])(?:return|typeof|instanceof|in|of|new|delete|void|throw|case|do|else|yield|await)$/;

/**
 * Blank out comments and the contents of string, template and regex literals, keeping the quote
 * characters and every newline so offsets and line numbers survive. Template `${…}` expressions
 * stay code.
 */
export function blankCommentsAndStrings(src: string): string {
  const out = src.split('');
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== '\n') out[k] = ' ';
  };
  const templateDepth: number[] = []; // brace depth at which each open template's `${` began
  let braces = 0;
  let i = 0;
  let lastSignificant = '';
  let lastWord = '';
  const n = src.length;
  const scanTemplate = (start: number): number => {
    // `start` is just after a backtick or after the `}` that closes a `${…}`; returns the index after the literal part.
    let k = start;
    while (k < n) {
      const c = src[k]!;
      if (c === '\\') {
        k += 2;
        continue;
      }
      if (c === '`') {
        blank(start, k);
        return k + 1;
      }
      if (c === '$' && src[k + 1] === '{') {
        blank(start, k);
        templateDepth.push(braces);
        braces++;
        return k + 2;
      }
      k++;
    }
    blank(start, n);
    return n;
  };
  while (i < n) {
    const c = src[i]!;
    const d = src[i + 1];
    if (c === '/' && d === '/') {
      const end = src.indexOf('\n', i);
      const stop = end === -1 ? n : end;
      blank(i, stop);
      i = stop;
      continue;
    }
    if (c === '/' && d === '*') {
      const end = src.indexOf('*/', i + 2);
      const stop = end === -1 ? n : end + 2;
      blank(i, stop);
      i = stop;
      continue;
    }
    if (c === '"' || c === "'") {
      let k = i + 1;
      while (k < n && src[k] !== c && src[k] !== '\n') k += src[k] === '\\' ? 2 : 1;
      blank(i + 1, Math.min(k, n));
      i = k + 1;
      lastSignificant = c;
      lastWord = '';
      continue;
    }
    if (c === '`') {
      i = scanTemplate(i + 1);
      lastSignificant = '`';
      lastWord = '';
      continue;
    }
    if (c === '/' && (REGEX_PRECEDERS.has(lastSignificant) || REGEX_KEYWORDS.test(lastWord))) {
      // A regex literal: skip to the closing slash (respecting classes and escapes), then flags.
      let k = i + 1;
      let inClass = false;
      while (k < n && src[k] !== '\n') {
        const ch = src[k]!;
        if (ch === '\\') {
          k += 2;
          continue;
        }
        if (ch === '[') inClass = true;
        else if (ch === ']') inClass = false;
        else if (ch === '/' && !inClass) break;
        k++;
      }
      blank(i + 1, k);
      i = k + 1;
      while (i < n && /[a-z]/i.test(src[i]!)) i++;
      lastSignificant = '/';
      lastWord = '';
      continue;
    }
    if (c === '{') braces++;
    if (c === '}') {
      if (templateDepth.length > 0 && templateDepth[templateDepth.length - 1] === braces - 1) {
        templateDepth.pop();
        braces--;
        i = scanTemplate(i + 1);
        lastSignificant = '`';
        lastWord = '';
        continue;
      }
      braces--;
    }
    if (!/\s/.test(c)) {
      if (/[\w$]/.test(c)) {
        lastWord = /[\w$]/.test(lastSignificant) ? lastWord + c : c;
      } else {
        lastWord = '';
      }
      lastSignificant = /[\w$]/.test(c) ? 'a' : c;
    }
    i++;
  }
  return out.join('');
}

// ───────────────────────── the checker ─────────────────────────

export interface Violation {
  readonly line: number;
  readonly what: string;
}

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let k = 0; k < index; k++) if (text.charCodeAt(k) === 10) line++;
  return line;
}

function isNodeModule(spec: string): boolean {
  if (spec.startsWith('node:')) return true;
  const head = spec.split('/')[0]!;
  return NODE_BUILTINS.includes(head);
}

/** Names the file binds itself (const/let/var/function/class/import/parameters), so uses are local. */
function localBindings(code: string): Set<string> {
  const names = new Set<string>();
  const add = (re: RegExp) => {
    for (const m of code.matchAll(re)) if (m[1]) names.add(m[1]);
  };
  add(/\b(?:const|let|var|function|class)\s+([A-Za-z_$][\w$]*)/g);
  add(/\bimport\s+(?:type\s+)?([A-Za-z_$][\w$]*)\s*(?:,|from)/g);
  add(/\bas\s+([A-Za-z_$][\w$]*)/g);
  // Parameters: `(name:`, `, name:`, `(name)`, `(name,`, `name =>`, plus `{ name }`-style destructuring in params is rare in core.
  add(/[(,]\s*(?:readonly\s+)?([A-Za-z_$][\w$]*)\s*\??\s*[:,)=]/g);
  add(/\b([A-Za-z_$][\w$]*)\s*=>/g);
  // Import lists: import { a, b as c } from ...
  for (const m of code.matchAll(/\bimport\s+(?:type\s+)?\{([^}]*)\}/g)) {
    for (const part of m[1]!.split(',')) {
      const name = part
        .trim()
        .split(/\s+as\s+/)
        .pop()
        ?.replace(/^type\s+/, '')
        .trim();
      if (name) names.add(name);
    }
  }
  return names;
}

/** A pattern for `name` used free (not `x.name`, not a private `#name`, not part of a longer identifier). */
function freeUse(name: string): RegExp {
  return new RegExp(`(?<![\\w$.#])${name.replace(/\$/g, '\\$')}(?![\\w$])`, 'g');
}

/** An object-literal key or a type member (`{ window: 1 }`, `{ setImmediate?: F }`) is not a use. */
function isKey(code: string, index: number, name: string): boolean {
  const after = code.slice(index + name.length).match(/^\s*(\S)/)?.[1];
  const before = code
    .slice(0, index)
    .replace(/\b(?:readonly|public|private|protected|static)\s*$/, '')
    .match(/(\S)\s*$/)?.[1];
  return (
    (after === ':' || after === '?') && (before === '{' || before === ',' || before === ';' || before === undefined)
  );
}

/** Check one source text; returns its violations (empty when pure). */
export function checkSource(src: string): Violation[] {
  const code = blankCommentsAndStrings(src);
  const found: Violation[] = [];
  const report = (index: number, what: string) => found.push({ line: lineOf(src, index), what });

  // Module specifiers: find the statement shape in blanked code, read the specifier from the source.
  const specifierPatterns = [
    /\b(?:import|export)\b[^;'"`]*?\bfrom\s*(['"])/g, // import x from '…' / export { x } from '…'
    /\bimport\s*(['"])/g, // import '…'
    /\bimport\s*\(\s*(['"])/g, // import('…')
    /\brequire\s*\(\s*(['"])/g, // require('…')
  ];
  for (const re of specifierPatterns) {
    for (const m of code.matchAll(re)) {
      const quoteAt = m.index + m[0].length - 1;
      const quote = m[1]!;
      const end = src.indexOf(quote, quoteAt + 1);
      if (end === -1) continue;
      const spec = src.slice(quoteAt + 1, end);
      if (isNodeModule(spec)) report(m.index, `imports Node builtin '${spec}'`);
    }
  }

  const locals = localBindings(code);
  for (const name of FORBIDDEN_GLOBALS) {
    if (locals.has(name)) continue;
    for (const m of code.matchAll(freeUse(name))) {
      if (!isKey(code, m.index, name)) report(m.index, `uses global '${name}'`);
    }
  }

  // setImmediate is fine when the file feature-detects it.
  const detects = /\btypeof\s+setImmediate\b/.test(code) || /\bglobalThis\s*(?:\.|\?\.)\s*setImmediate\b/.test(code);
  if (!detects && !locals.has('setImmediate')) {
    for (const m of code.matchAll(freeUse('setImmediate'))) {
      if (!isKey(code, m.index, 'setImmediate'))
        report(m.index, "uses global 'setImmediate' without feature detection");
    }
  }
  if (!locals.has('require')) {
    for (const m of code.matchAll(/(?<![\w$.])require\s*\(/g)) report(m.index, 'calls require(');
  }
  if (!locals.has('global')) {
    for (const m of code.matchAll(/(?<![\w$.])global\s*\./g)) report(m.index, "uses 'global.'");
  }
  return found;
}

/** Timer and clock globals: only `src/runtime/` touches them; every other file takes a `Runtime`. */
const CLOCK_GLOBALS = ['setTimeout', 'setInterval', 'clearTimeout', 'clearInterval', 'setImmediate', 'performance'];

/** Files that may use the clock globals: `src/runtime/` alone (the per-stream TCP transport gets the node's runtime through `setRuntime`). */
export function ownsItsClock(rel: string): boolean {
  return rel.startsWith('runtime/');
}

/** Where one source text reads a clock or sets a timer itself instead of through a `Runtime`. */
export function checkClockUse(src: string): Violation[] {
  const code = blankCommentsAndStrings(src);
  const locals = localBindings(code);
  const found: Violation[] = [];
  for (const name of CLOCK_GLOBALS) {
    if (locals.has(name)) continue;
    for (const m of code.matchAll(freeUse(name))) {
      if (!isKey(code, m.index, name))
        found.push({ line: lineOf(src, m.index), what: `uses '${name}' (take the clock from a Runtime)` });
    }
  }
  for (const m of code.matchAll(/\bglobalThis\s*(?:\.|\?\.)\s*(setTimeout|setInterval|setImmediate|performance)\b/g))
    found.push({ line: lineOf(src, m.index), what: `uses 'globalThis.${m[1]}' (take the clock from a Runtime)` });
  // Randomness too: a seeded runtime must replay jitter and ids (randomFraction, randomU64, randomHex).
  for (const m of code.matchAll(/\bMath\s*\.\s*random\b/g))
    found.push({ line: lineOf(src, m.index), what: "uses 'Math.random' (take randomness from a Runtime)" });
  return found;
}

function listTs(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const full = join(dir, entry);
    if (statSync(full).isDirectory()) out.push(...listTs(full));
    else if (entry.endsWith('.ts')) out.push(full);
  }
  return out.sort();
}

describe('core purity', () => {
  it('the checker flags `import net from "node:net"`, bare builtins and `Buffer.from(x)`, and passes comments and strings', () => {
    expect(checkSource("import net from 'node:net';\nexport const x = net;").map((v) => v.what)).toEqual([
      "imports Node builtin 'node:net'",
    ]);
    expect(checkSource('const b = Buffer.from(x);')).toEqual([{ line: 1, what: "uses global 'Buffer'" }]);
    expect(checkSource('// Buffer in a comment\nexport const x = 1;')).toEqual([]);
    // More positives.
    const bad: Array<[string, string]> = [
      ["import { readFileSync } from 'fs';", "'fs'"],
      ["import type { Socket } from 'node:net';", "'node:net'"],
      ["export { inspect } from 'util';", "'util'"],
      ["import 'node:process';", "'node:process'"],
      ["const m = await import('node:crypto');", "'node:crypto'"],
      ["import { pipeline } from 'stream/promises';", "'stream/promises'"],
      ['const e = process.env.X;', "'process'"],
      ['setImmediate(run);', 'setImmediate'],
      ['const o = { a: 1 }; setImmediate(() => o);', 'setImmediate'],
      ['const here = __dirname;', "'__dirname'"],
      ['const f = __filename;', "'__filename'"],
      ["const m = require('x');", 'require('],
      ['global.foo = 1;', "'global.'"],
      ['const w = window.innerWidth;', "'window'"],
      ['document.title = "x";', "'document'"],
      ['const ua = navigator.userAgent;', "'navigator'"],
      ['const t = `${Buffer.byteLength(s)} bytes`;', "'Buffer'"],
    ];
    for (const [snippet, needle] of bad) {
      const v = checkSource(snippet);
      expect(v.length, snippet).toBeGreaterThan(0);
      expect(v.map((x) => x.what).join('; '), snippet).toContain(needle);
    }
    // More negatives: comments, TSDoc, strings, templates, regexes, properties, locals, feature detection.
    const good = [
      '/** Unlike Buffer, a Uint8Array view never pools. process it later. */\nexport const x = 1;',
      "const msg = 'no Buffer or process here';",
      'const msg = "window document navigator __dirname require(x) global.y";',
      'const t = `a Buffer ${1 + 2} process`;',
      'const r = /Buffer|process/.test(s);',
      'const g = globalThis as { setImmediate?: (f: () => void) => void };\nif (typeof g.setImmediate === "function") g.setImmediate(f);',
      'if (typeof setImmediate === "function") setImmediate(run);',
      'const si = globalThis.setImmediate; if (si) si(run);',
      'export function batchFor(window: number): number { return window / 2; }',
      'class Gate { constructor(window: number) { this.w = window; } }',
      'class Watch { #window(): void {} tick(): void { this.#window(); } }',
      'const o = { process: 1, window: 2 };',
      'interface R { readonly document?: string; navigator: number }',
      'const p = host.process; const b = x.Buffer;',
      "const m = Reflect.get(host, 'process');",
      "import { encode } from '@msgpack/msgpack';\nimport { x } from './util.ts';\nimport { y } from '../stream/index.ts';",
      'const url = new URL(href);',
      'const r = a / b / c; // Buffer',
      'const si = (globalThis as { setImmediate?: (fn: () => void) => unknown }).setImmediate;',
    ];
    for (const snippet of good) expect(checkSource(snippet), snippet).toEqual([]);
  });

  it('adapter files are recognised by path', () => {
    for (const rel of [
      'transport/node-tcp.ts',
      'transport/node-tcp-server.ts',
      'transport/ws-server.ts',
      'transport/node-ws.ts',
      'adapters/ws-server.ts',
      'adapters/node-tcp.ts',
      'adapters/deno-ws.ts',
      'node/index.ts',
      'runtime/deno-timers.ts',
      'bun-listen.ts',
      'transport/node-foo.ts',
    ]) {
      expect(isAdapter(rel), rel).toBe(true);
    }
    for (const rel of [
      'wire/decoder.ts',
      'transport/memory.ts',
      'transport/websocket.ts',
      'adapters/memory.ts',
      'adapters/websocket.ts',
      'adapters/byte-stream-conn.ts',
      'credit/window.ts',
      'errors.ts',
      'runtime/runtime.ts',
      'mux/nodes.ts',
    ]) {
      expect(isAdapter(rel), rel).toBe(false);
    }
  });

  const files = listTs(SRC).map((full) => ({ full, rel: relative(SRC, full).split(sep).join('/') }));
  const core = files.filter((f) => !isAdapter(f.rel));
  const adapters = files.filter((f) => isAdapter(f.rel));

  it(`${core.length} core files under src/ import no Node builtin and use no runtime-specific global (${adapters.length} adapter files skipped)`, () => {
    expect(core.length).toBeGreaterThan(10);
    expect(core.some((f) => f.rel.startsWith('wire/'))).toBe(true);
    const problems: string[] = [];
    for (const f of core) {
      for (const v of checkSource(readFileSync(f.full, 'utf8'))) problems.push(`src/${f.rel}:${v.line} ${v.what}`);
    }
    console.log(
      `[core-purity] checked ${core.length} core files; skipped adapters: ${adapters.map((f) => f.rel).join(', ') || 'none'}`,
    );
    expect(problems, `checked ${core.length} files: ${core.map((f) => f.rel).join(', ')}`).toEqual([]);
  });

  it('the clock checker flags timers and clocks used directly, and passes the Runtime, comments and strings', () => {
    for (const snippet of [
      'const t = setTimeout(run, 5);',
      'const jitter = Math.random() * 2_500;',
      'clearTimeout(t);',
      'const i = setInterval(tick, 1000);',
      'clearInterval(i);',
      'if (typeof setImmediate === "function") setImmediate(run);',
      'const now = performance.now();',
      'const st = globalThis.setTimeout;',
    ]) {
      expect(checkClockUse(snippet).length, snippet).toBeGreaterThan(0);
    }
    for (const snippet of [
      'const t = rt.setTimer(run, 5); rt.clearTimer(t);',
      'const now = this.#rt.now();',
      '// a setTimeout would keep the process alive\nexport const x = 1;',
      "const msg = 'performance.now() is not monotonic everywhere';",
      'interface Timers { setTimeout?: (fn: () => void) => unknown }',
      'const o = { performance: 1 };',
      "const why = 'Math.random is not seeded';",
    ]) {
      expect(checkClockUse(snippet), snippet).toEqual([]);
    }
    expect(ownsItsClock('runtime/runtime.ts')).toBe(true);
    for (const rel of [
      'adapters/node-tcp-stream-inbound.ts',
      'transport/dial.ts',
      'messenger/health.ts',
      'adapters/memory.ts',
      'adapters/deno-tcp.ts',
    ])
      expect(ownsItsClock(rel), rel).toBe(false);
  });

  it('every file under src/ outside src/runtime/ takes its timers and clock from a Runtime (adapters included)', () => {
    const problems: string[] = [];
    for (const f of files) {
      if (ownsItsClock(f.rel)) continue;
      for (const v of checkClockUse(readFileSync(f.full, 'utf8'))) problems.push(`src/${f.rel}:${v.line} ${v.what}`);
    }
    expect(problems).toEqual([]);
  });
});
