// A dial that lanemux stops for good — refused, a reconnect loop that gave up, a link lost on an
// adapter that does not reconnect — tells the application: `onDialEnded` on the messenger and on
// the node, with the address and the final coded error. Closing the node itself is not reported.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { DialEndedEvent, Messenger } from '../../src/messenger/types.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { nextGone, within } from './helpers.ts';

const messengers: Messenger[] = [];
const nodes: LanemuxNode[] = [];
afterEach(async () => {
  await Promise.all(messengers.splice(0).map((m) => m.close()));
  for (const n of nodes.splice(0)) await n.close();
});

/** A loopback port nothing listens on (bound, then released). */
async function refusedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** The next dial-ended event of `subscribe`'s source. */
function nextDialEnded(subscribe: (l: (e: DialEndedEvent) => void) => () => void): Promise<DialEndedEvent> {
  return new Promise((resolve) => {
    const off = subscribe((e) => {
      off();
      resolve(e);
    });
  });
}

describe('dialEnded: the application learns when lanemux stops dialling an address', () => {
  it('a refused TCP dial ends with ERR_CONNECT: the connect rejects and onDialEnded carries the address and the error', async () => {
    const m = await createMessenger({ transports: [tcpTransport({ listen: false })], healthCheck: false });
    messengers.push(m);
    const address = `tcp://127.0.0.1:${await refusedPort()}`;
    const events: DialEndedEvent[] = [];
    m.onDialEnded((e) => events.push(e));
    const ended = nextDialEnded((l) => m.onDialEnded(l));
    await expect(m.connect(address)).rejects.toMatchObject({ code: 'ERR_CONNECT' });
    const e = await within(ended, 2_000, 'dialEnded');
    expect(e.address).toBe(address);
    expect(e.code).toBe('ERR_CONNECT');
    expect(e.error).toMatchObject({ code: 'ERR_CONNECT', retryable: true });
    expect(e.reason).toContain('127.0.0.1');
    expect(events).toHaveLength(1);
  });

  it('a WebSocket reconnect loop that gives up after maxRetries refused attempts reports dialEnded once, after the peer went', async () => {
    const server = await createMessenger({
      transports: [webSocketServerTransport({ port: 0, closeGraceMs: 100 })],
      healthCheck: false,
    });
    const client = await createMessenger({
      transports: [
        webSocketClientTransport({
          WebSocket: WebSocket as never,
          minReconnectionDelay: 5,
          reconnectionJitter: 5,
          maxReconnectionDelay: 20,
          maxRetries: 2,
        }),
      ],
      healthCheck: false,
    });
    messengers.push(client);
    const address = server.addresses[0]!;
    await client.connect(address);
    const events: DialEndedEvent[] = [];
    client.onDialEnded((e) => events.push(e));
    const gone = nextGone(client);
    const ended = nextDialEnded((l) => client.onDialEnded(l));
    // The server goes away for good: every reconnect is refused.
    await server.close();
    await within(gone, 3_000, 'the peer gone');
    expect(events).toHaveLength(0);
    const e = await within(ended, 5_000, 'dialEnded after maxRetries');
    expect(e.address).toBe(address);
    expect(e.code).toBe('ERR_CONNECT');
    expect(e.reason).toMatch(/attempt/);
    expect(events).toHaveLength(1);
  });

  it('a TCP dial whose link is lost ends (TCP does not reconnect): dialEnded carries the loss', async () => {
    const server = await createMessenger({
      transports: [tcpTransport({ port: 0, closeGraceMs: 100 })],
      healthCheck: false,
    });
    const client = await createMessenger({
      transports: [tcpTransport({ listen: false, closeGraceMs: 100 })],
      healthCheck: false,
    });
    messengers.push(client);
    const address = server.addresses[0]!;
    await client.connect(address);
    const ended = nextDialEnded((l) => client.onDialEnded(l));
    await server.close();
    const e = await within(ended, 3_000, 'dialEnded');
    expect(e).toMatchObject({ address, code: 'ERR_PEER_GONE' });
  });

  it('the node surfaces it: node.onDialEnded over a refused TCP dial; closing the node reports nothing; unsubscribe stops it', async () => {
    const node = await createNode({ transports: [tcpTransport({ listen: false })] });
    nodes.push(node);
    const address = `tcp://127.0.0.1:${await refusedPort()}`;
    const events: DialEndedEvent[] = [];
    const off = node.onDialEnded((e) => events.push(e));
    const ended = nextDialEnded((l) => node.onDialEnded(l));
    await expect(node.connect(address)).rejects.toMatchObject({ code: 'ERR_CONNECT' });
    expect(await within(ended, 2_000, 'dialEnded')).toMatchObject({ address, code: 'ERR_CONNECT' });
    expect(events).toHaveLength(1);
    off();
    await expect(node.connect(address)).rejects.toMatchObject({ code: 'ERR_CONNECT' });
    expect(events).toHaveLength(1);

    // A live dial stopped by close() is the application's own doing: no event.
    const server = await createNode({ transports: [tcpTransport({ port: 0, closeGraceMs: 100 })] });
    nodes.push(server);
    const client = await createNode({ transports: [tcpTransport({ listen: false, closeGraceMs: 100 })] });
    const seen: DialEndedEvent[] = [];
    client.onDialEnded((e) => seen.push(e));
    await client.connect(server.address);
    await client.close();
    expect(seen).toEqual([]);
  });

  it('a listener that throws is reported through onError and does not stop the others', async () => {
    const m = await createMessenger({ transports: [tcpTransport({ listen: false })], healthCheck: false });
    messengers.push(m);
    const errors: unknown[] = [];
    m.onError((e) => errors.push(e.error));
    m.onDialEnded(() => {
      throw new Error('listener bug');
    });
    const ended = nextDialEnded((l) => m.onDialEnded(l));
    await expect(m.connect(`tcp://127.0.0.1:${await refusedPort()}`)).rejects.toMatchObject({ code: 'ERR_CONNECT' });
    await within(ended, 2_000, 'dialEnded');
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe('listener bug');
  });
});
