// A `ws` server node for the page client's tests, and a carrier whose connection the test can cut.
import WebSocket from 'ws';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { connect, type Client, type ClientOptions } from '../../src/client.ts';
import { type Carrier, type CarrierFactory, webSocketCarrier } from '../../src/client/carrier.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';

const closers: Array<{ close(): Promise<void> }> = [];

/** Close every node and client the test made. */
export async function closeAll(): Promise<void> {
  await Promise.all(closers.splice(0).map((c) => c.close()));
}

/** A node serving over a `ws` server on a free port, and its URL. */
export async function wsServer(options: Partial<NodeOptions> = {}): Promise<{ node: LanemuxNode; url: string }> {
  const node = await createNode({ transports: [webSocketServerTransport({ port: 0 })], ...options });
  closers.push(node);
  return { node, url: node.address };
}

/** A WebSocket carrier (on `ws`) whose live connection `cut()` drops as a network blink would. */
export function cuttableCarrier(): { factory: CarrierFactory; cut(): void; opened(): number } {
  const inner = webSocketCarrier(WebSocket as never);
  let current: { carrier: Carrier; closed(code: number, reason: string): void } | null = null;
  let opened = 0;
  return {
    factory: async (url, events, open) => {
      const carrier = await inner(url, events, open);
      opened++;
      current = { carrier, closed: events.closed };
      return carrier;
    },
    cut: () => {
      const c = current;
      current = null;
      if (c === null) return;
      c.carrier.close(1000, 'cut');
      c.closed(1006, 'cut by the test');
    },
    opened: () => opened,
  };
}

/** A page client on `url` over `ws`. */
export async function page(url: string, options: ClientOptions = {}): Promise<Client> {
  const client = await connect(url, { WebSocket: WebSocket as never, reconnectDelayMs: 10, ...options });
  closers.push(client);
  return client;
}
