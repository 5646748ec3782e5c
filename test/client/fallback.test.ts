// browserCarrier on Node: a fake WebTransport, the page client's real WebSocket path to a `ws` server node.
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { type TransportEvent, browserCarrier, connect } from '../../src/client.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import { closeAll, wsServer } from './support.ts';

afterEach(async () => {
  await closeAll();
});

/** A WebTransport constructor: `make` builds each session. */
function ctor(make: () => object): never {
  return class {
    constructor() {
      // biome-ignore lint/correctness/noConstructorReturn: a fake session stands in for the instance
      return make();
    }
  } as never;
}

async function counting() {
  const { node, url } = await wsServer();
  node.serve<{ n: number }, string>('count', async (req, sender) => {
    for (let i = 0; i < req.n; i++) await sender.send(`tok${i}`);
  });
  return url;
}

const toks = (n: number) => Array.from({ length: n }, (_, i) => `tok${i}`);

async function read(client: Awaited<ReturnType<typeof connect>>, n: number): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const t of client.stream('count', { n })) out.push(t);
  return out;
}

describe('browserCarrier', () => {
  it('a WebTransport session that closes before the server answers: the HELLO goes again over WebSocket, and streams', async () => {
    const wsUrl = await counting();
    let written = 0;
    const WebTransport = ctor(() => {
      let end!: () => void;
      const closed = new Promise<void>((r) => (end = r));
      return {
        ready: Promise.resolve(),
        closed,
        close: () => end(),
        createBidirectionalStream: async () => ({
          readable: new ReadableStream(),
          // The HELLO is written, then the session dies: a middlebox that passes the handshake only.
          writable: new WritableStream({
            write: () => {
              written++;
              end();
            },
          }),
        }),
      };
    });
    const events: TransportEvent[] = [];
    const client = await connect('https://127.0.0.1:1/lanemux', {
      transport: browserCarrier({
        webTransport: { WebTransport },
        webSocketUrl: wsUrl,
        WebSocket: WebSocket as never,
        onTransport: (e) => events.push(e),
      }),
    });
    try {
      expect(written).toBe(1);
      expect(await read(client, 50)).toEqual(toks(50));
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ transport: 'websocket', url: wsUrl });
      expect(events[0]!.reason).toMatch(/^WebTransport closed before the server answered/);
    } finally {
      await client.close();
    }
  });

  it('after a fallback, connects stay on WebSocket for webTransportRetryMs, then try WebTransport again', async () => {
    const wsUrl = await counting();
    let sessions = 0;
    const WebTransport = ctor(() => {
      sessions++;
      const ready = Promise.reject(new Error('Opening handshake failed.'));
      return { ready, closed: ready, close() {} };
    });
    const events: TransportEvent[] = [];
    let now = 0;
    const runtime = { ...systemRuntime(), now: () => now };
    const transport = browserCarrier({
      webTransport: { WebTransport },
      webSocketUrl: wsUrl,
      WebSocket: WebSocket as never,
      onTransport: (e) => events.push(e),
    });
    for (const at of [0, 299_000, 300_001]) {
      now = at;
      const client = await connect('https://127.0.0.1:1/lanemux', { transport, runtime });
      expect(await read(client, 3)).toEqual(toks(3));
      await client.close();
    }
    // Tried first, skipped within the 5 minutes, tried again after them.
    expect(sessions).toBe(2);
    // Reported once: the transport in use never changed.
    expect(events).toEqual([
      {
        transport: 'websocket',
        url: wsUrl,
        reason:
          'WebTransport failed: could not open WebTransport to https://127.0.0.1:1/lanemux: Opening handshake failed.',
      },
    ]);
  });

  it('a webSocketUrl that is not ws:// or wss:// throws ERR_INVALID_CONFIG', () => {
    expect(() => browserCarrier({ webSocketUrl: 'https://example.com/lanemux' })).toThrow(/webSocketUrl/);
  });
});
