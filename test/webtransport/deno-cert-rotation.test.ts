// The Deno WebTransport server keeps serving after setCertificate() once the replaced listener is
// garbage-collected (Deno clears an endpoint's server config when a listener is dropped). Runs on
// Node against a fake Deno, with gc exposed, so it is a file of its own.
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { systemRuntime } from '../../src/runtime/runtime.ts';

afterEach(() => {
  delete (globalThis as { Deno?: unknown }).Deno;
});

// ---------------------------------------------------------------------------------------------
// Deno WebTransport server on a fake Deno: the slice of Deno's QUIC API that matters here. Deno's
// ListenerResource clears the endpoint's server config when it is dropped (garbage-collected):
// ext/net/quic.rs `impl Drop for ListenerResource { self.0.set_server_config(None) }`, the same as
// `stop()`. Emulated with a FinalizationRegistry.
// ---------------------------------------------------------------------------------------------

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

interface FakeEndpointState {
  serverConfig: string | null;
  readonly waiters: Array<(incoming: unknown) => void>;
}

function fakeDeno(): { endpoints: FakeEndpointState[]; accepted: () => number } {
  const endpoints: FakeEndpointState[] = [];
  const accepted = 0;
  const dropped = new FinalizationRegistry<FakeEndpointState>((state) => {
    state.serverConfig = null;
  });
  class QuicEndpoint {
    readonly addr = { hostname: '127.0.0.1', port: 4433 };
    readonly #state: FakeEndpointState = { serverConfig: null, waiters: [] };
    constructor() {
      endpoints.push(this.#state);
    }
    listen(options: { cert: string }): unknown {
      const state = this.#state;
      state.serverConfig = options.cert;
      const listener = {
        // quinn's Endpoint::accept, shared by every listener of the endpoint; stop() does not end it.
        incoming: () => new Promise((resolve) => state.waiters.push(resolve)),
        stop: () => {
          state.serverConfig = null;
        },
        // What the code before c322afb iterated.
        [Symbol.asyncIterator]() {
          return { next: () => listener.incoming().then((value) => ({ value, done: false })) };
        },
      };
      dropped.register(listener, state);
      return listener;
    }
    close(): void {}
  }
  (globalThis as { Deno?: unknown }).Deno = {
    QuicEndpoint,
    upgradeWebTransport: () => new Promise(() => {}),
  };
  return { endpoints, accepted: () => accepted };
}

const PEM = (n: number): string => `-----BEGIN CERTIFICATE-----\n${n}\n-----END CERTIFICATE-----\n`;

describe('Deno WebTransport server: certificate rotation', () => {
  it('keeps serving after a rotation once the replaced listener is garbage-collected', async () => {
    const fake = fakeDeno();
    const { webTransportServerTransport } = await import('../../src/adapters/deno-webtransport.ts');
    const adapter = webTransportServerTransport({ cert: PEM(1), key: PEM(11) });
    await adapter.listen({ frameLimit: 1 << 20, maxMessageSize: 1 << 20, accept: () => {}, runtime: systemRuntime() });
    const endpoint = fake.endpoints[0]!;
    expect(endpoint.serverConfig).toBe(PEM(1));
    adapter.setCertificate({ cert: PEM(2), key: PEM(12) });
    expect(endpoint.serverConfig).toBe(PEM(2));
    // The first connection after the rotation goes to the replaced listener's waiting accept (it
    // waited first); its loop hands it over and ends, leaving that listener unreferenced.
    const first = endpoint.waiters.shift()!;
    first({
      remoteAddr: { hostname: '127.0.0.1', port: 1 },
      accept: () => Promise.reject(new Error('x')),
      refuse: () => {},
    });
    for (let i = 0; i < 10 && endpoint.serverConfig !== null; i++) {
      await new Promise((r) => setTimeout(r, 10));
      gc();
    }
    // Deno would now silently refuse every new connection.
    expect(endpoint.serverConfig).toBe(PEM(2));
    await adapter.close();
  });
});
