// The draining notice (docs/protocol.md §8.4): its bytes are the document's, it travels on every lane
// of the link and keeps it up, a peer reports `draining` once per link and hears it again on a new
// link, a malformed one is counted and ignored, and a restarted instance of the worker takes streams.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { memoryTransport } from '../../src/adapters/memory.ts';
import { messageHead } from '../../src/messenger/envelope.ts';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { PeerEvent, PeerStateEvent } from '../../src/messenger/types.ts';
import {
  DRAIN_HANDLER,
  DRAIN_KEY,
  PHASE_DEADLINE,
  PHASE_DRAINING,
  decodeDrainNotice,
  encodeDrainNotice,
} from '../../src/stream/drain-notice.ts';
import { formatHandle } from '../../src/stream/handle.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { MESSENGER_MUX_KEY } from '../../src/wire/constants.ts';
import { DrainHarness, collect, numbered, peerIdOf, produce } from '../support/drain-harness.ts';
import { hex } from '../wire/helpers.ts';

let h: DrainHarness;
beforeEach(() => {
  h = new DrainHarness();
});
afterEach(async () => {
  await h.closeAll();
});

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

describe('the notice on the wire', () => {
  it('is the bytes of docs/protocol.md §8.4: a MESSAGE `_stream_drain` with [u8 phase][u32 ms]', () => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'protocol.md'), 'utf8');
    const s84 = doc.slice(doc.indexOf('### 8.4'), doc.indexOf('## 9.'));
    const golden = /```\n([0-9a-f ]+)\n```/.exec(s84)![1]!;
    const head = messageHead(new TextEncoder().encode(DRAIN_HANDLER));
    expect(`${hex(head)} ${hex(encodeDrainNotice(PHASE_DRAINING, 30_000))}`).toBe(golden);
    expect(s84).toContain(`\`${DRAIN_KEY}\``);
  });

  it('decodes exactly 5 bytes of a known phase, and nothing else', () => {
    expect(decodeDrainNotice(encodeDrainNotice(PHASE_DRAINING, 1234))).toEqual({ phase: 0, ms: 1234 });
    expect(decodeDrainNotice(encodeDrainNotice(PHASE_DEADLINE, 0))).toEqual({ phase: 1, ms: 0 });
    // A u32: longer waits are clamped, never wrapped.
    expect(decodeDrainNotice(encodeDrainNotice(PHASE_DRAINING, 2 ** 40))).toEqual({ phase: 0, ms: 0xffff_ffff });
    for (const bad of [new Uint8Array(0), new Uint8Array(4), new Uint8Array(6), Uint8Array.of(2, 0, 0, 0, 0)])
      expect(decodeDrainNotice(bad)).toBeNull();
    // A view into a larger buffer decodes from its own offset.
    const big = Uint8Array.of(9, 9, 1, 0, 0, 1, 0);
    expect(decodeDrainNotice(big.subarray(2))).toEqual({ phase: 1, ms: 256 });
  });
});

describe('a peer hears the notice', () => {
  it('on every lane, and reports one `draining` per link to onPeerState and peerEvents', async () => {
    const server = await h.node('server', { lanes: 4 });
    const client = await h.node(null, { lanes: 4 });
    const states: PeerStateEvent[] = [];
    client.onPeerState((e) => states.push(e));
    const iterator = client.peerEvents();
    await h.drive(client.connect('memory://server'));
    void server.drain();
    await h.rt.runMacrotasks();
    expect(metric(server, 'streaming_drain_notices_total{direction="sent"}')).toBe(4);
    expect(metric(client, 'streaming_drain_notices_total{direction="received"}')).toBe(4);
    expect(states.map((e) => e.type)).toEqual(['up', 'draining']);
    expect(states[1]).toMatchObject({ peer: peerIdOf(server), workerId: server.workerId, error: undefined });
    const seen: PeerEvent[] = [];
    for (let i = 0; i < 2; i++) seen.push((await h.drive(iterator.next())).value as PeerEvent);
    expect(seen.map((e) => e.type)).toEqual(['up', 'draining']);
    await iterator.return?.();
    // The link stays up: the peer is still connected and nothing went down.
    expect(client.metrics()['velo_streaming_mux_epoch_deaths_total']).toBe(0);
  });

  it('on a link formed during the drain, and again after a reconnect of the same instance', async () => {
    const server = await h.node('server');
    void server.drain({ timeout: 60_000 });
    const client = await h.node(null);
    const states: string[] = [];
    client.onPeerState((e) => states.push(e.type));
    await h.drive(client.connect('memory://server'));
    await h.rt.runMacrotasks();
    expect(states).toEqual(['up', 'draining']);
    h.cut();
    await h.rt.runMacrotasks();
    await h.drive(client.connect('memory://server'));
    await h.rt.runMacrotasks();
    expect(states).toEqual(['up', 'draining', 'down', 'resumed', 'draining']);
    // Back on a new link, the same instance still drains: a new stream toward it fails before any request.
    const handle = formatHandle({ workerId: server.workerId, localId: 5n });
    await expect(h.drive(client.attachAnchor(handle))).rejects.toMatchObject({
      code: 'ERR_DRAINING',
      message: expect.stringMatching(/is draining/),
    });
  });

  it('a malformed notice is counted and ignored: no event, streams toward the peer still open', async () => {
    // A server on its own messenger, so the test can write any payload under the notice's name.
    const messenger = await createMessenger({
      transports: [memoryTransport({ network: h.network, name: 'server' })],
      transportKeys: [MESSENGER_MUX_KEY, DRAIN_KEY],
      runtime: h.rt,
    });
    const server = await createNode({ messenger, runtime: h.rt });
    h.nodes.push(server);
    const client = await h.node(null);
    const states: string[] = [];
    client.onPeerState((e) => states.push(e.type));
    await h.drive(client.connect('memory://server'));
    for (const bad of [new Uint8Array(0), Uint8Array.of(0, 0, 0, 0), Uint8Array.of(7, 0, 0, 0, 0)])
      await h.drive(Promise.resolve(messenger.send(peerIdOf(client), 0, DRAIN_HANDLER, bad)));
    await h.rt.runMacrotasks();
    expect(metric(client, 'streaming_drain_notice_errors_total{reason="malformed"}')).toBe(3);
    expect(metric(client, 'streaming_drain_notices_total{direction="received"}')).toBe(0);
    expect(states).toEqual(['up']);
    const anchor = server.createAnchor<string>();
    const sender = await h.drive(client.attachAnchor<string>(anchor.handle));
    const read = collect(anchor);
    expect(await h.tick(produce(sender, 3))).toBeNull();
    expect(await h.tick(read)).toEqual({ items: numbered(3), error: null });
    await h.drive(messenger.close());
  });

  it('a restarted instance of a drained worker takes new streams again', async () => {
    const server = await h.node('server');
    const client = await h.node(null);
    await h.drive(client.connect('memory://server'));
    await h.drive(server.drain());
    await h.drive(server.close());
    // The same worker id at the same address: a new process instance.
    const again = await h.node('server', { workerId: server.workerId });
    await h.drive(client.connect('memory://server'));
    const anchor = again.createAnchor<string>();
    const sender = await h.drive(client.attachAnchor<string>(anchor.handle));
    const read = collect(anchor);
    expect(await h.tick(produce(sender, 2))).toBeNull();
    expect(await h.tick(read)).toEqual({ items: numbered(2), error: null });
  });
});
