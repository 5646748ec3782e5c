// HELLO `keys` name the streaming transports a peer supports (docs/protocol.md §3.1): a node opens
// no mux stream toward a peer whose HELLO does not list `messenger-mux-v2` — an attach does not
// offer the mux to it, a consumer answer choosing the mux anyway is refused, and a zero-RTT ticket
// open fails at once, with ERR_ATTACH_REFUSED saying why.
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { ATTACH_HANDLER } from '../../src/stream/attach-messages.ts';
import { encodeTicket } from '../../src/stream/ticket.ts';
import { formatHandle } from '../../src/stream/handle.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { MESSENGER_MUX_KEY } from '../../src/wire/constants.ts';
import { nextPeer, within } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';
import { rawPeer } from './raw-peer.ts';

const nodes: LanemuxNode[] = [];
const messengers: Messenger[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(messengers.splice(0).map((m) => m.close()));
  for (const n of nodes.splice(0)) await n.close();
});

async function listeningNode(): Promise<LanemuxNode> {
  const node = await createNode({ transports: [tcpTransport({ port: 0, closeGraceMs: 100 })] });
  nodes.push(node);
  return node;
}

const ticket = (session: bigint) =>
  encodeTicket({
    streaming_transport_key: MESSENGER_MUX_KEY,
    heartbeat_interval_ms: 5_000,
    routing_session_id: session,
    initial_credit: 8,
    slot_byte_budget: 1 << 20,
    lane: 0,
  });

describe('HELLO keys decide whether a node opens mux streams toward a peer', () => {
  it('a zero-RTT open toward a raw peer whose HELLO advertised keys: [] fails at once with ERR_ATTACH_REFUSED, opening no slot', async () => {
    const node = await listeningNode();
    // The raw peer's HELLO: worker abcdefabcdefabcd, keys [].
    const worker = 0xabcdefabcdefabcdn;
    const raw = await rawPeer(node.address, sockets);
    // The node's HELLO answer is the first frame back: the node established the link before sending it.
    await waitFor(() => raw.frames.length > 0, 2_000, 'the HELLO answer');
    const handle = formatHandle({ workerId: worker, localId: 7n });
    const open = node.openAnchorStream<string>(handle, ticket(0x1234n));
    await expect(open).rejects.toMatchObject({ code: 'ERR_ATTACH_REFUSED' });
    await expect(open).rejects.toThrow(/did not advertise messenger-mux-v2/);
    expect(node.metricsRegistry.liveSlots).toBe(0);
  });

  it('an attach to a peer that advertised keys: [] does not offer the mux, and a consumer answer choosing it anyway is refused', async () => {
    const node = await listeningNode();
    const peer = await createMessenger({
      transports: [tcpTransport({ listen: false, closeGraceMs: 100 })],
      transportKeys: [],
      healthCheck: false,
    });
    messengers.push(peer);
    const offers: unknown[] = [];
    // A consumer that ignores what was offered and answers with the mux.
    peer.handle(
      ATTACH_HANDLER,
      (_from, body) => {
        offers.push((body as { supported_transport_keys?: unknown }).supported_transport_keys);
        return {
          Ok: {
            streaming_transport_key: MESSENGER_MUX_KEY,
            heartbeat_interval_ms: 5_000,
            routing_session_id: '0x99',
            initial_credit: 8,
            slot_byte_budget: 1 << 20,
            lane: 0,
          },
        };
      },
      { signal: false },
    );
    const seen = nextPeer(peer);
    await peer.connect(node.address);
    await within(seen, 2_000, 'the link');
    const handle = formatHandle({ workerId: peer.self.workerId, localId: 9n });
    const attach = node.attachAnchor<string>(handle, { timeoutMs: 2_000 });
    await expect(attach).rejects.toMatchObject({ code: 'ERR_ATTACH_REFUSED' });
    await expect(attach).rejects.toThrow(/did not advertise messenger-mux-v2/);
    expect(offers).toEqual([[]]);
    expect(node.metricsRegistry.liveSlots).toBe(0);
  });

  it('a peer that advertised the mux key still gets mux streams (the normal case)', async () => {
    const consumer = await listeningNode();
    const producer = await createNode({ transports: [tcpTransport({ listen: false, closeGraceMs: 100 })] });
    nodes.push(producer);
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    expect(sender.negotiatedTransport).toBe(MESSENGER_MUX_KEY);
    await sender.send('x');
    await sender.finalize();
    const got: string[] = [];
    for await (const t of anchor) got.push(t);
    expect(got).toEqual(['x']);
  });
});
