// Lanes over TCP (1..16 per peer: unkeyed least-loaded spread, keyed splitmix64 placement, order
// per stream) and the mux over WebSocket (ws server, WHATWG/partysocket client on Node 20's `ws`).
import { afterEach, describe, expect, it } from 'vitest';
import { createNode } from '../../src/stream/node.ts';
import { laneForKey } from '../../src/wire/lane-hash.ts';
import { closeAll, open, suiteTransports, tcpNode } from './helpers.ts';
import { readAll } from '../support/read-all.ts';

afterEach(closeAll);

describe('lanes over TCP', () => {
  it('unkeyed streams spread evenly over 4 lanes; each stream stays in order', async () => {
    const consumer = await tcpNode({ lanes: 4 });
    const producer = await tcpNode({ listen: false, lanes: 4 });
    await producer.connect(consumer.address);
    const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    const perLane = [0, 0, 0, 0];
    for (const a of anchors) perLane[a.bind!.lane]! += 1;
    expect(perLane).toEqual([16, 16, 16, 16]);
    const reads = anchors.map((a) => readAll(a));
    for (let k = 0; k < 50; k++) await Promise.all(senders.map((s, i) => s.send(`${i}:${k}`)));
    await Promise.all(senders.map((s) => s.finalize()));
    const got = await Promise.all(reads);
    got.forEach((items, i) => expect(items).toEqual(Array.from({ length: 50 }, (_, k) => `${i}:${k}`)));
    // Each lane carried its own batches (its own batcher, epoch and batch_seq).
    const m = consumer.metrics();
    expect(m['velo_streaming_mux_batches_total{direction="received"}']).toBeGreaterThanOrEqual(4);
    expect(m['velo_streaming_mux_records_dropped_total{reason="lane_mismatch"}']).toBe(0);
  });

  it('a keyed attach lands on lane splitmix64(key) % lanes', async () => {
    const consumer = await tcpNode({ lanes: 4 });
    const producer = await tcpNode({ listen: false, lanes: 4 });
    await producer.connect(consumer.address);
    for (const key of [0n, 1n, 2n, 3n, 4n, 5n, 6n, 7n, 0xdeadbeefn]) {
      const a = consumer.createAnchor<string>();
      const s = await producer.attachAnchor<string>(a.handle, { laneKey: key });
      expect(a.bind!.lane).toBe(laneForKey(key, 4));
      const read = readAll(a);
      await s.send(`k${key}`);
      await s.finalize();
      expect(await read).toEqual([`k${key}`]);
    }
  });

  it('a one-lane producer talking to a four-lane consumer uses lane 0 only', async () => {
    const consumer = await tcpNode({ lanes: 4 });
    const producer = await tcpNode({ listen: false, lanes: 1 });
    await producer.connect(consumer.address);
    const anchors = Array.from({ length: 8 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    for (const a of anchors) expect(a.bind!.lane).toBe(0);
    const reads = anchors.map((a) => readAll(a));
    for (const s of senders) {
      await s.send('x');
      await s.finalize();
    }
    expect(await Promise.all(reads)).toEqual(anchors.map(() => ['x']));
  });
});

describe('the mux over WebSocket', () => {
  it('a partysocket client consumes 128 streams from a ws server producer', async () => {
    const server = await createNode({ transports: [suiteTransports.wsServer()] });
    open.push(server);
    const client = await createNode({ transports: [suiteTransports.wsClient()] });
    open.push(client);
    await client.connect(server.address);
    // The browser-shaped direction: the client consumes, the server produces.
    const anchors = Array.from({ length: 128 }, () => client.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => server.attachAnchor<string>(a.handle)));
    expect(senders.every((s) => s.negotiatedTransport === 'messenger-mux-v2')).toBe(true);
    const reads = anchors.map((a) => readAll(a));
    for (let k = 0; k < 40; k++) await Promise.all(senders.map((s, i) => s.send(`${i}.${k}`)));
    await Promise.all(senders.map((s) => s.finalize()));
    const got = await Promise.all(reads);
    got.forEach((items, i) => expect(items).toEqual(Array.from({ length: 40 }, (_, k) => `${i}.${k}`)));
    const m = server.metrics();
    expect(m['velo_streaming_mux_records_sent_total{record_type="data"}']).toBe(128 * 41);
  });
});
