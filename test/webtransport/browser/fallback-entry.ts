// Browser entry of browser-fallback.test.ts (bundled by vite's dev server): one run of the browser
// client adapter per page, on `globalThis.lanemuxFallback` for playwright's page.evaluate. A run may
// delete `WebTransport` from the page first (an older browser, an insecure context), then connects,
// streams `n` tokens from the server's `generate` handler and reports which transport carried them.
import { certificateHashFromHex } from '../../../src/adapters/dev-cert.ts';
import { browserClientTransport, type TransportInUseEvent } from '../../../src/adapters/browser-client.ts';
import { createNode } from '../../../src/index.ts';
import { MESSENGER_MUX_KEY, createMessenger } from '../../../src/messenger/index.ts';
import { GENERATE_HANDLER, checkOrder, type GenerateRequest } from '../../../e2e/support/protocol.ts';

export interface FallbackRun {
  /** The WebTransport URL dialled (`connect`'s address). */
  readonly address: string;
  /** The server's WebSocket endpoint. */
  readonly wsUrl: string;
  /** SHA-256 of the WebTransport server's development certificate, hex. */
  readonly hashHex?: string;
  /** Delete `globalThis.WebTransport` before the adapter is made. */
  readonly deleteWebTransport: boolean;
  readonly prompt: string;
  readonly n: number;
}

export interface FallbackResult {
  readonly pageHasWebTransport: boolean;
  readonly transportInUse: string | undefined;
  readonly events: Array<Pick<TransportInUseEvent, 'transport' | 'url' | 'reason'>>;
  readonly hashCalls: number;
  readonly tokens: string[];
  readonly orderOk: boolean;
  readonly mainCount: number;
  readonly connectMs: number;
}

export interface FallbackApi {
  run(o: FallbackRun): Promise<FallbackResult>;
}

const api: FallbackApi = {
  async run(o) {
    if (o.deleteWebTransport) delete (globalThis as { WebTransport?: unknown }).WebTransport;
    const events: TransportInUseEvent[] = [];
    let hashCalls = 0;
    const transport = browserClientTransport({
      webTransport: {
        serverCertificateHashes: () => {
          hashCalls++;
          return o.hashHex === undefined ? [] : [certificateHashFromHex(o.hashHex)];
        },
      },
      webSocket: { url: o.wsUrl },
      onTransport: (e) => events.push(e),
    });
    const messenger = await createMessenger({
      transports: [transport],
      transportKeys: [MESSENGER_MUX_KEY],
      healthCheck: false,
    });
    const node = await createNode({ messenger });
    try {
      const t0 = performance.now();
      const peer = await messenger.connect(o.address);
      const connectMs = performance.now() - t0;
      const anchor = node.createAnchor<string>();
      const ticket = node.prebindAnchor(anchor);
      if (ticket === undefined) throw new Error('prebindAnchor gave no ticket');
      const body: GenerateRequest = { handle: anchor.handle, ticket, prompt: o.prompt, n: o.n, delayMs: 0, tail: 0 };
      await messenger.request(peer.id, GENERATE_HANDLER, body, { timeoutMs: 10_000 });
      const tokens: string[] = [];
      for await (const token of anchor) tokens.push(token);
      const order = checkOrder(o.prompt, tokens);
      return {
        pageHasWebTransport: typeof (globalThis as { WebTransport?: unknown }).WebTransport === 'function',
        transportInUse: transport.transportInUse,
        events: events.map((e) => ({ transport: e.transport, url: e.url, reason: e.reason })),
        hashCalls,
        tokens,
        orderOk: order.ok,
        mainCount: order.main,
        connectMs,
      };
    } finally {
      await node.close();
      await messenger.close();
    }
  },
};
(globalThis as { lanemuxFallback?: FallbackApi }).lanemuxFallback = api;
