/**
 * Packaging: `publint` finds nothing wrong with the package as npm would publish it, and the
 * `exports` map's runtime conditions send each runtime to the right file: a Node-only adapter
 * imported under the `browser` condition throws `ERR_UNSUPPORTED_RUNTIME` naming what to use instead.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'vite';
import { buildPackage, type PackageFixture } from './package-fixture.ts';

let pkg: PackageFixture;
beforeAll(() => {
  pkg = buildPackage();
}, 60_000);
afterAll(() => pkg?.remove());

/** Import `specifier` from inside the package under `conditions`; report what happened as JSON. */
function importUnder(
  specifier: string,
  conditions: readonly string[],
): { ok: boolean; exports?: string[]; code?: string; message?: string } {
  const script = `try { const m = await import(${JSON.stringify(specifier)}); console.log(JSON.stringify({ ok: true, exports: Object.keys(m).sort() })); }
catch (e) { console.log(JSON.stringify({ ok: false, code: e.code, message: e.message })); }`;
  const r = spawnSync(
    process.execPath,
    [...conditions.map((c) => `--conditions=${c}`), '--input-type=module', '-e', script],
    { cwd: pkg.dir, encoding: 'utf8' },
  );
  const line = r.stdout.trim().split('\n').pop() ?? '';
  if (!line.startsWith('{')) throw new Error(`node failed (${r.status}): ${r.stderr}`);
  return JSON.parse(line) as { ok: boolean; exports?: string[]; code?: string; message?: string };
}

describe('packaging', () => {
  it('publint reports no errors, warnings or suggestions', async () => {
    const { messages, pkg: json } = await publint({ pkgDir: pkg.dir, level: 'suggestion', strict: true, pack: 'npm' });
    const text = messages.map((m) => `${m.type}: ${formatMessage(m, json) ?? m.code}`);
    expect(text).toEqual([]);
  }, 60_000);

  it('every Node-only adapter has a browser stub that throws ERR_UNSUPPORTED_RUNTIME naming the WebSocket client', () => {
    const exportsMap = JSON.parse(readFileSync(join(pkg.dir, 'package.json'), 'utf8')).exports as Record<
      string,
      unknown
    >;
    for (const subpath of ['./transport/node-tcp', './transport/tcp-stream', './transport/ws-server']) {
      const entry = exportsMap[subpath] as Record<string, string>;
      // Conditions match in key order: types first, browser before node, default last.
      expect(Object.keys(entry)).toEqual(['types', 'deno', 'bun', 'browser', 'node', 'default']);
      const specifier = `lanemux${subpath.slice(1)}`;
      const inBrowser = importUnder(specifier, ['browser']);
      expect(inBrowser.ok, specifier).toBe(false);
      expect(inBrowser.code).toBe('ERR_UNSUPPORTED_RUNTIME');
      expect(inBrowser.message).toContain(specifier);
      expect(inBrowser.message).toContain('lanemux/transport/websocket');
      // Node gets the real adapter, with the same export names the stub mirrors.
      const inNode = importUnder(specifier, []);
      expect(inNode.ok, `${specifier} on node: ${inNode.message}`).toBe(true);
      expect(inBrowser.message).not.toContain('does not provide an export');
    }
    expect(importUnder('lanemux/transport/node-tcp', []).exports).toEqual(['tcpTransport']);
    expect(importUnder('lanemux/transport/ws-server', []).exports).toEqual(['webSocketServerTransport']);
  }, 60_000);

  it('the browser entry points load under the browser condition', () => {
    expect(importUnder('lanemux', ['browser']).exports).toContain('createNode');
    expect(importUnder('lanemux/transport/websocket', ['browser']).exports).toEqual(['webSocketClientTransport']);
    expect(importUnder('lanemux/transport/memory', ['browser']).ok).toBe(true);
  }, 30_000);

  it('webtransport-server: the deno condition and the default export the same API; the default throws ERR_UNSUPPORTED_RUNTIME on Node', () => {
    const onNode = importUnder('lanemux/transport/webtransport-server', []);
    const onDeno = importUnder('lanemux/transport/webtransport-server', ['deno']);
    expect(onNode.exports).toEqual(['webTransportServerTransport']);
    expect(onDeno.exports).toEqual(onNode.exports);
    const script = `const { webTransportServerTransport } = await import('lanemux/transport/webtransport-server');
try { webTransportServerTransport({ cert: '', key: '' }); console.log('no throw'); } catch (e) { console.log(e.code); }`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: pkg.dir, encoding: 'utf8' });
    expect(r.stdout.trim()).toBe('ERR_UNSUPPORTED_RUNTIME');
  }, 30_000);

  it("an application's browser bundle that imports a Node-only adapter throws ERR_UNSUPPORTED_RUNTIME when it loads", async () => {
    // An app with lanemux installed, bundled by vite for the browser: the import resolves to the stub,
    // and `sideEffects` keeps the stub's throwing import even though the app never uses it (with
    // `"sideEffects": false` the bundler would drop the import silently).
    const app = join(pkg.dir, 'app');
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    symlinkSync(pkg.dir, join(app, 'node_modules', 'lanemux'), 'dir');
    writeFileSync(
      join(app, 'main.js'),
      "import { tcpTransport } from 'lanemux/transport/node-tcp';\nimport { webSocketClientTransport } from 'lanemux/transport/websocket';\nexport const dial = webSocketClientTransport;\n",
    );
    const out = (await build({
      configFile: false,
      root: app,
      logLevel: 'silent',
      resolve: { conditions: ['browser', 'module', 'import', 'default'], preserveSymlinks: true },
      build: { write: false, minify: true, lib: { entry: join(app, 'main.js'), formats: ['es'], fileName: 'app' } },
    })) as
      | Array<{ output: Array<{ type: string; code?: string }> }>
      | { output: Array<{ type: string; code?: string }> };
    const code = (Array.isArray(out) ? out : [out])
      .flatMap((o) => o.output)
      .map((c) => c.code ?? '')
      .join('\n');
    expect(code).toContain('ERR_UNSUPPORTED_RUNTIME');
    // The stub, not the adapter: no Node import, no socket code.
    expect(code).not.toMatch(/from\s*["'`]node:/);
    expect(code).not.toContain('createConnection');
    writeFileSync(join(app, 'bundle.mjs'), code);
    const r = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import(${JSON.stringify(join(app, 'bundle.mjs'))}).then(() => console.log('loaded'), (e) => console.log(e.code, e.message))`,
      ],
      { encoding: 'utf8' },
    );
    expect(r.stdout).toContain('ERR_UNSUPPORTED_RUNTIME lanemux/transport/node-tcp');
    expect(r.stdout).toContain('lanemux/transport/websocket');
  }, 60_000);
});
