// The Deno and Bun adapters refuse to run elsewhere (here: Node) with ERR_UNSUPPORTED_RUNTIME and a
// message naming what to use instead, not a TypeError about an undefined `Deno` or `Bun`.
import { describe, expect, it } from 'vitest';
import { isLanemuxError } from '../../src/errors.ts';
import { bunTcpTransport } from '../../src/adapters/bun-tcp.ts';
import { bunWebSocketServerTransport } from '../../src/adapters/bun-ws.ts';
import { denoTcpTransport } from '../../src/adapters/deno-tcp.ts';
import { denoWebSocketServerTransport } from '../../src/adapters/deno-ws.ts';

function refusal(make: () => unknown): { code: string; message: string } {
  try {
    make();
  } catch (e) {
    expect(isLanemuxError(e)).toBe(true);
    return { code: (e as { code: string }).code, message: (e as Error).message };
  }
  throw new Error('the factory did not throw');
}

describe('runtime adapters outside their runtime', () => {
  it('deno-tcp and bun-tcp name the TCP adapter of each runtime', () => {
    for (const [make, name] of [
      [() => denoTcpTransport(), 'denoTcpTransport'],
      [() => bunTcpTransport({ port: 0 }), 'bunTcpTransport'],
    ] as const) {
      const e = refusal(make);
      expect(e.code).toBe('ERR_UNSUPPORTED_RUNTIME');
      expect(e.message).toContain(name);
      expect(e.message).toContain('tcpTransport from lanemux/transport/node-tcp on Node');
    }
  });

  it('deno-ws and bun-ws name the WebSocket server adapter of each runtime', () => {
    for (const [make, name] of [
      [() => denoWebSocketServerTransport(), 'denoWebSocketServerTransport'],
      [() => bunWebSocketServerTransport(), 'bunWebSocketServerTransport'],
    ] as const) {
      const e = refusal(make);
      expect(e.code).toBe('ERR_UNSUPPORTED_RUNTIME');
      expect(e.message).toContain(name);
      expect(e.message).toContain('webSocketServerTransport from lanemux/transport/ws-server on Node');
    }
  });

  it('a Deno-like global without the needed functions is refused too', () => {
    const g = globalThis as { Deno?: unknown };
    g.Deno = { version: {} };
    try {
      expect(refusal(() => denoTcpTransport()).code).toBe('ERR_UNSUPPORTED_RUNTIME');
    } finally {
      delete g.Deno;
    }
  });
});
