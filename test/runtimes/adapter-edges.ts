// Edge behaviour every Deno/Bun adapter shares with the Node ones: clear errors for a busy port, a
// refused dial and an address of the wrong scheme, and ERR_UNSUPPORTED_RUNTIME for the other
// runtime's adapters. Shared by the Deno and Bun entry files (runs under deno test / bun test).
import { expect, it } from 'vitest';
import { isLanemuxError } from '../../src/errors.ts';
import type { LanemuxError } from '../../src/errors.ts';
import { TransportError } from '../../src/transport/errors.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import type { ListenHost, TransportAdapter } from '../../src/transport/port.ts';
import type { FetchHandler } from '../../src/adapters/socket-options.ts';

const host: ListenHost = {
  frameLimit: 4096,
  maxMessageSize: 1 << 20,
  accept: (c) => c.close(new TransportError('ERR_CLOSED', 'unused'), 'abort'),
  runtime: systemRuntime(),
};

function dialOnce(adapter: TransportAdapter, address: string): Promise<LanemuxError> {
  return new Promise<LanemuxError>((resolve, reject) => {
    adapter.dial(
      { address, lane: 0, frameLimit: 4096, maxMessageSize: 1 << 20, reconnect: false, runtime: host.runtime },
      { open: () => reject(new Error(`dial to ${address} opened`)), fail: resolve },
    );
  });
}

export interface EdgeHarness {
  /** A TCP adapter of this runtime. */
  tcp(options: { port?: number; listen?: boolean }): TransportAdapter;
  /** A WebSocket server adapter of this runtime. */
  wsServer(options: { port?: number; fetch?: FetchHandler }): TransportAdapter;
  /** The other runtime's adapter factories: each must throw ERR_UNSUPPORTED_RUNTIME here. */
  foreign: ReadonlyArray<readonly [string, () => unknown]>;
}

export function adapterEdges(h: EdgeHarness): void {
  it('a busy port is a clear, retryable ERR_ADDRESS_IN_USE naming host and port, for TCP and WebSocket', async () => {
    const first = h.tcp({ port: 0 });
    const address = (await first.listen(host)) as string;
    const port = Number(new URL(address).port);
    try {
      for (const second of [h.tcp({ port }), h.wsServer({ port })]) {
        const e = await second.listen(host).then(
          () => undefined,
          (x: unknown) => x,
        );
        expect(isLanemuxError(e, 'ERR_ADDRESS_IN_USE')).toBe(true);
        expect((e as LanemuxError).retryable).toBe(true);
        expect((e as Error).message).toContain(`127.0.0.1:${port}`);
        await second.close();
      }
    } finally {
      await first.close();
    }
  });

  it('a refused dial fails retryably with ERR_CONNECT; a ws:// address is not a TCP address', async () => {
    const probe = h.tcp({ port: 0 });
    const address = (await probe.listen(host)) as string;
    await probe.close();
    const client = h.tcp({ listen: false });
    try {
      const refused = await dialOnce(client, address);
      expect(refused).toMatchObject({ code: 'ERR_CONNECT', retryable: true });
      expect(await dialOnce(client, 'ws://127.0.0.1:1/lanemux')).toMatchObject({ code: 'ERR_UNSUPPORTED_ADDRESS' });
    } finally {
      await client.close();
    }
  });

  it('the WebSocket server answers 404 off its path and 426 to plain HTTP, and does not dial', async () => {
    const server = h.wsServer({ port: 0 });
    const address = (await server.listen(host)) as string;
    try {
      const http = address.replace(/^ws:/, 'http:');
      const off = await fetch(http.replace(/\/lanemux$/, '/other'));
      await off.body?.cancel();
      expect(off.status).toBe(404);
      const plain = await fetch(http);
      await plain.body?.cancel();
      expect(plain.status).toBe(426);
      expect(await dialOnce(server, address)).toMatchObject({ code: 'ERR_UNSUPPORTED_ADDRESS' });
    } finally {
      await server.close();
    }
  });

  it('with fetch, the WebSocket server hands other paths to the app (a throwing app gets 500) and keeps its own', async () => {
    const server = h.wsServer({
      port: 0,
      fetch: async (request) => {
        const path = new URL(request.url).pathname;
        if (path === '/boom') throw new Error('app failed');
        return new Response(`app: ${request.method} ${path}`, { status: 201 });
      },
    });
    const address = (await server.listen(host)) as string;
    try {
      const http = address.replace(/^ws:/, 'http:');
      const app = await fetch(http.replace(/\/lanemux$/, '/other'), { method: 'POST', body: 'x' });
      expect([app.status, await app.text()]).toEqual([201, 'app: POST /other']);
      const boom = await fetch(http.replace(/\/lanemux$/, '/boom'));
      await boom.body?.cancel();
      expect(boom.status).toBe(500);
      const plain = await fetch(http);
      await plain.body?.cancel();
      expect(plain.status).toBe(426);
    } finally {
      await server.close();
    }
  });

  it("the other runtime's adapters refuse with ERR_UNSUPPORTED_RUNTIME", () => {
    for (const [name, make] of h.foreign) {
      let error: unknown;
      try {
        make();
      } catch (e) {
        error = e;
      }
      expect(isLanemuxError(error, 'ERR_UNSUPPORTED_RUNTIME'), name).toBe(true);
      expect((error as Error).message).toContain(name);
    }
  });
}
