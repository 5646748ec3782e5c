// `lanemux/transport/tcp`: one subpath, one export name (`tcpTransport`), each runtime's own TCP
// adapter behind its export condition; browsers and unknown runtimes get the throwing stub.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isLanemuxError } from '../../src/errors.ts';
import { bunTcpTransport } from '../../src/adapters/bun-tcp.ts';
import { denoTcpTransport } from '../../src/adapters/deno-tcp.ts';
import { tcpTransport as nodeTcpTransport } from '../../src/adapters/node-tcp.ts';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  exports: Record<string, Record<string, string>>;
};

/** The source module a `./dist/…js` target is built from. */
function sourceOf(target: string): URL {
  return new URL(`../../${target.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts')}`, import.meta.url);
}

describe('lanemux/transport/tcp', () => {
  const entry = pkg.exports['./transport/tcp']!;

  it('has a condition per runtime, matched in key order (types first, browser before node, default last)', () => {
    expect(Object.keys(entry)).toEqual(['types', 'deno', 'bun', 'browser', 'node', 'default']);
    expect(entry['types']).toBe(pkg.exports['./transport/node-tcp']!['types']);
  });

  it('exports tcpTransport: the Deno, Bun and Node TCP adapters under their conditions', async () => {
    const expected: Record<string, unknown> = { deno: denoTcpTransport, bun: bunTcpTransport, node: nodeTcpTransport };
    for (const [condition, adapter] of Object.entries(expected)) {
      const m = (await import(sourceOf(entry[condition]!).href)) as Record<string, unknown>;
      expect(Object.keys(m), condition).toEqual(['tcpTransport']);
      expect(m['tcpTransport'], condition).toBe(adapter);
    }
  });

  it('the browser and default conditions throw ERR_UNSUPPORTED_RUNTIME naming lanemux/transport/tcp', async () => {
    expect(entry['browser']).toBe(entry['default']);
    const e = await import(sourceOf(entry['browser']!).href).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isLanemuxError(e)).toBe(true);
    expect((e as { code: string }).code).toBe('ERR_UNSUPPORTED_RUNTIME');
    expect((e as Error).message).toContain('lanemux/transport/tcp needs');
    expect((e as Error).message).toContain('lanemux/transport/websocket');
  });

  it('keeps the per-runtime subpaths as aliases', () => {
    for (const subpath of ['./transport/node-tcp', './transport/deno-tcp', './transport/bun-tcp'])
      expect(pkg.exports[subpath], subpath).toBeDefined();
  });
});
