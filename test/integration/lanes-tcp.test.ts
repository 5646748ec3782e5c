// Issue 5, lanes over TCP with 8 lanes: unkeyed attaches and pre-binds spread within one of even,
// keyed streams land on splitmix64(key) % 8 (checked against an independent splitmix64), load
// counts on the chosen lane from bind to close and per sender, the sender uses `lane mod` its own
// count, replies go back on the arrival lane, and a lane-0 answer or ticket has no lane field.
// Every placement is also checked on the wire (a tap on the TCP adapter decodes the batches).
import { decode as msgpackDecode } from '@msgpack/msgpack';
import { afterEach, describe, expect, it } from 'vitest';
import { createNode } from '../../src/stream/node.ts';
import type { NodeOptions } from '../../src/stream/node.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { BatchEncoder } from '../../src/wire/encoder.ts';
import { encodeFrame } from '../../src/wire/frame.ts';
import { RecordType } from '../../src/wire/constants.ts';
import { Relay, closeAll, parseTcp } from './helpers.ts';
import { readAll } from '../support/read-all.ts';
import { waitFor } from '../support/wait-for.ts';
import { type Tap, type WireMsg, tappedNode, tappedPair } from './wire-tap.ts';

afterEach(closeAll);

// ───────────────────────── an independent splitmix64 (protocol.md §5.8) ─────────────────────────

const M64 = (1n << 64n) - 1n;
function refSplitmix64(key: bigint): bigint {
  let z = (key + 0x9e3779b97f4a7c15n) & M64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  return z ^ (z >> 31n);
}
const refLane = (key: bigint, lanes: number): number => Number(refSplitmix64(key & M64) % BigInt(lanes));

/** A consumer and a producer over loopback TCP, both tapped. */
const pair = (consumerLanes = 8, producerLanes = 8, mux: NodeOptions['mux'] = {}) =>
  tappedPair(mux, consumerLanes, producerLanes);

const spread = (lanes: number[], n: number): number[] => {
  const per = new Array<number>(n).fill(0);
  for (const l of lanes) per[l]! += 1;
  return per;
};

/** Map (lane, slot) of every OpenSlot the producer sent to the anchor id it opened. */
function opensByAnchor(ptap: Tap): Map<bigint, { lane: number; slot: number; session: bigint }> {
  const m = new Map<bigint, { lane: number; slot: number; session: bigint }>();
  for (const r of ptap.records('out'))
    if (r.type === RecordType.OpenSlot) m.set(r.anchorId!, { lane: r.lane, slot: r.slot, session: r.sessionId! });
  return m;
}

describe('splitmix64 (protocol.md §5.8 golden vectors)', () => {
  it('the reference implementation used by these tests matches the spec vectors', () => {
    expect(refSplitmix64(0n)).toBe(0xe220a8397b1dcdafn);
    expect(refSplitmix64(1n)).toBe(0x910a2dec89025cc1n);
    expect([0n, 1n, 2n, 3n, 4n, 5n, 6n, 7n].map((k) => refLane(k, 4))).toEqual([3, 1, 2, 1, 2, 2, 0, 3]);
  });
});

describe('lanes over TCP: 8 lanes', () => {
  it('1,000 unkeyed attaches land within one of even across the 8 lanes, and ride those lanes on the wire', async () => {
    const { consumer, producer, ctap, ptap } = await pair();
    const anchors = Array.from({ length: 1000 }, () => consumer.createAnchor<number>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<number>(a.handle)));
    const lanes = anchors.map((a) => a.bind!.lane);
    const per = spread(lanes, 8);
    expect(Math.max(...per) - Math.min(...per), `per-lane ${per.join(',')}`).toBeLessThanOrEqual(1);
    const reads = anchors.map((a) => readAll(a));
    senders.forEach((s, i) => void s.send(i));
    await Promise.all(senders.map((s) => s.finalize()));
    const got = await Promise.all(reads);
    got.forEach((items, i) => expect(items).toEqual([i]));
    // On the wire: each stream's OpenSlot rode the lane the receiver chose (8-lane sender: lane mod 8).
    const opens = opensByAnchor(ptap);
    expect(opens.size).toBe(1000);
    anchors.forEach((a) => expect(opens.get(a.localId)!.lane).toBe(a.bind!.lane));
    // And the consumer saw exactly those batches on those lanes.
    const inOpens = ctap.records('in').filter((r) => r.type === RecordType.OpenSlot);
    expect(
      spread(
        inOpens.map((r) => r.lane),
        8,
      ),
    ).toEqual(per);
    expect(consumer.metrics()['velo_streaming_mux_records_dropped_total{reason="lane_mismatch"}']).toBe(0);
  });

  it('1,000 unkeyed pre-binds land within one of even across the 8 lanes (load on this node)', async () => {
    const { consumer, producer, ptap } = await pair();
    const anchors = Array.from({ length: 1000 }, () => consumer.createAnchor<number>());
    const tickets = anchors.map((a) => consumer.prebindAnchor(a)!);
    const per = spread(
      anchors.map((a) => a.bind!.lane),
      8,
    );
    expect(Math.max(...per) - Math.min(...per), `per-lane ${per.join(',')}`).toBeLessThanOrEqual(1);
    const senders = await Promise.all(anchors.map((a, i) => producer.openAnchorStream<number>(a.handle, tickets[i]!)));
    const reads = anchors.map((a) => readAll(a));
    senders.forEach((s, i) => void s.send(i));
    await Promise.all(senders.map((s) => s.finalize()));
    (await Promise.all(reads)).forEach((items, i) => expect(items).toEqual([i]));
    const opens = opensByAnchor(ptap);
    anchors.forEach((a) => expect(opens.get(a.localId)!.lane).toBe(a.bind!.lane));
  });

  it('keyed attaches and keyed pre-binds land on splitmix64(key) % 8, and ride that lane', async () => {
    const { consumer, producer, ptap } = await pair();
    const keys = [0n, 1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 42n, 0xdeadbeefn, 0xffff_ffff_ffff_ffffn, 1n << 63n, -2n];
    const expected = keys.map((k) => refLane(k, 8));
    // The keys exercise more than one lane (else the check would be vacuous).
    expect(new Set(expected).size).toBeGreaterThan(3);
    const attached = keys.map(() => consumer.createAnchor<string>());
    const senders = [];
    for (let i = 0; i < keys.length; i++)
      senders.push(await producer.attachAnchor<string>(attached[i]!.handle, { laneKey: keys[i]! }));
    const prebound = keys.map(() => consumer.createAnchor<string>());
    const tickets = prebound.map((a, i) => consumer.prebindAnchor(a, { laneKey: keys[i]! })!);
    for (let i = 0; i < keys.length; i++)
      senders.push(await producer.openAnchorStream<string>(prebound[i]!.handle, tickets[i]!));
    const all = [...attached, ...prebound];
    all.forEach((a, i) => expect(a.bind!.lane, `stream ${i}`).toBe(expected[i % keys.length]));
    const reads = all.map((a) => readAll(a));
    for (const s of senders) {
      await s.send('k');
      await s.finalize();
    }
    expect(await Promise.all(reads)).toEqual(all.map(() => ['k']));
    const opens = opensByAnchor(ptap);
    all.forEach((a, i) => expect(opens.get(a.localId)!.lane).toBe(expected[i % keys.length]));
    // A key is a hint, not a load choice: ten streams with one key share its lane.
    const same = Array.from({ length: 10 }, () => consumer.createAnchor());
    for (const a of same) await producer.attachAnchor(a.handle, { laneKey: 42n });
    for (const a of same) expect(a.bind!.lane).toBe(refLane(42n, 8));
  });

  it('ties go to the lowest lane, and a stream counts on its lane from bind until its slot closes', async () => {
    const { consumer, producer } = await pair();
    const first = Array.from({ length: 8 }, () => consumer.createAnchor<string>());
    const senders = [];
    // Sequential unkeyed attaches on an idle node: 0, 1, 2, …, 7 (ties to the lowest lane).
    for (const a of first) senders.push(await producer.attachAnchor<string>(a.handle));
    expect(first.map((a) => a.bind!.lane)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // Lanes 3 and 5 close; the next two streams fill exactly those lanes again.
    for (const i of [3, 5]) {
      const read = readAll(first[i]!);
      await senders[i]!.finalize();
      await read;
    }
    await waitFor(() => consumer.metricsRegistry.liveSlots === 6, 5_000, 'two slots closed');
    const next = [consumer.createAnchor(), consumer.createAnchor()];
    for (const a of next) await producer.attachAnchor(a.handle);
    expect(next.map((a) => a.bind!.lane)).toEqual([3, 5]);
    // A cancelled (dropped) stream gives its lane back too.
    first[6]!.cancel();
    const again = consumer.createAnchor();
    await producer.attachAnchor(again.handle);
    expect(again.bind!.lane).toBe(6);
  });

  it('unkeyed attach load is per sender; unkeyed pre-bind load is every peer plus unclaimed pre-binds', async () => {
    const consumer = (await tappedNode({ lanes: 8 })).node;
    const a = (await tappedNode({ listen: false, lanes: 8 })).node;
    const b = (await tappedNode({ listen: false, lanes: 8 })).node;
    await a.connect(consumer.address);
    await b.connect(consumer.address);
    // Producer A takes lanes 0..2.
    const fromA = Array.from({ length: 3 }, () => consumer.createAnchor());
    for (const x of fromA) await a.attachAnchor(x.handle);
    expect(fromA.map((x) => x.bind!.lane)).toEqual([0, 1, 2]);
    // Producer B's first unkeyed attach sees only its own load: lane 0.
    const fromB = consumer.createAnchor();
    await b.attachAnchor(fromB.handle);
    expect(fromB.bind!.lane).toBe(0);
    // A pre-bind sees every peer's live slots (lanes 0,0,1,2 busy): lane 3; then an unclaimed pre-bind counts: lane 4.
    const p1 = consumer.createAnchor();
    const t1 = consumer.prebindAnchor(p1)!;
    expect(p1.bind!.lane).toBe(3);
    const p2 = consumer.createAnchor();
    consumer.prebindAnchor(p2);
    expect(p2.bind!.lane).toBe(4);
    // A released (cancelled) unclaimed pre-bind gives its lane back.
    p2.cancel();
    const p3 = consumer.createAnchor();
    consumer.prebindAnchor(p3);
    expect(p3.bind!.lane).toBe(4);
    // A pre-bind claimed by B becomes B's live slot on lane 3: B now holds lanes 0 and 3, so its next
    // unkeyed attaches go to lanes 1 and 2, and then to 4 (not 3).
    await b.openAnchorStream(p1.handle, t1);
    await waitFor(() => p1.bind?.claimed === true, 5_000, 'pre-bind claimed');
    const fromB2 = consumer.createAnchor();
    await b.attachAnchor(fromB2.handle);
    expect(fromB2.bind!.lane).toBe(1);
    const fromB3 = consumer.createAnchor();
    await b.attachAnchor(fromB3.handle);
    expect(fromB3.bind!.lane).toBe(2);
    const fromB4 = consumer.createAnchor();
    await b.attachAnchor(fromB4.handle);
    expect(fromB4.bind!.lane, 'lane 3 holds the claimed pre-bind of B').toBe(4);
  });

  it('a 4-lane sender uses ticket lane mod 4; replies come back on the arrival lane; load stays on the chosen lane', async () => {
    const { consumer, producer, ctap, ptap } = await pair(8, 4, { initialCredit: 2 });
    // A key whose lane at 8 is ≥ 4, so lane mod 4 differs from the chosen lane.
    let key = 0n;
    while (refLane(key, 8) < 4) key++;
    const chosen = refLane(key, 8);
    const anchor = consumer.createAnchor<number>();
    const ticket = consumer.prebindAnchor(anchor, { laneKey: key })!;
    expect(anchor.bind!.lane).toBe(chosen);
    const s = await producer.openAnchorStream<number>(anchor.handle, ticket);
    const read = readAll(anchor);
    // 20 items through a window of 2: credit must come back many times.
    for (let i = 0; i < 20; i++) await s.send(i);
    await s.finalize();
    expect(await read).toEqual(Array.from({ length: 20 }, (_, i) => i));
    const open = opensByAnchor(ptap).get(anchor.localId)!;
    expect(open.lane).toBe(chosen % 4);
    const replies = ctap.records('out').filter((r) => r.type === RecordType.CreditUpdate && r.slot === open.slot);
    expect(replies.length).toBeGreaterThan(0);
    for (const r of replies) expect(r.lane, 'credit reply on the arrival lane').toBe(chosen % 4);
    // The stream counted on the chosen lane while it lived: a pre-bind made now (after close) is back at 0,
    // and one made while a chosen-lane stream lives skips that lane.
    const live = consumer.createAnchor();
    const liveTicket = consumer.prebindAnchor(live, { laneKey: key })!;
    await producer.openAnchorStream(live.handle, liveTicket);
    await waitFor(() => live.bind?.claimed === true, 5_000, 'claimed');
    const probe = Array.from({ length: 8 }, () => consumer.createAnchor());
    for (const a of probe) consumer.prebindAnchor(a);
    const lanes = probe.map((a) => a.bind!.lane);
    expect(lanes, 'the chosen lane (not the arrival lane) is the loaded one').not.toContain(chosen);
    expect(lanes).toContain(chosen % 4);
  });

  it('every reply record rides the lane its slot arrived on (64 streams, 8 lanes, small window)', async () => {
    const { consumer, producer, ctap, ptap } = await pair(8, 8, { initialCredit: 2 });
    const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<number>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<number>(a.handle)));
    const reads = anchors.map((a) => readAll(a));
    for (let k = 0; k < 10; k++) await Promise.all(senders.map((s) => s.send(k)));
    anchors[0]!.requestStop();
    await Promise.all(senders.map((s) => s.finalize()));
    await Promise.all(reads);
    const opened = new Set<string>();
    for (const r of ptap.records('out')) if (r.type === RecordType.OpenSlot) opened.add(`${r.lane}:${r.slot}`);
    const replies = ctap
      .records('out')
      .filter(
        (r) =>
          r.type === RecordType.CreditUpdate || r.type === RecordType.LifecycleSlot || r.type === RecordType.CloseSlot,
      );
    expect(replies.length).toBeGreaterThan(64);
    for (const r of replies)
      expect(opened.has(`${r.lane}:${r.slot}`), `reply type ${r.type} for slot ${r.slot} on lane ${r.lane}`).toBe(true);
  });

  it('an unkeyed attach counts the binds it answered that no OpenSlot claimed yet', async () => {
    const { consumer, producer, ptap } = await pair();
    ptap.holdBatches = true; // attach answers come back; the producer's OpenSlots do not arrive
    const anchors = Array.from({ length: 10 }, () => consumer.createAnchor<string>());
    const senders = [];
    for (const a of anchors) senders.push(await producer.attachAnchor<string>(a.handle));
    expect(anchors.every((a) => a.bind!.claimed === false)).toBe(true);
    expect(anchors.map((a) => a.bind!.lane)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 0, 1]);
    ptap.release();
    const reads = anchors.map((a) => readAll(a));
    for (const s of senders) {
      await s.send('x');
      await s.finalize();
    }
    expect(await Promise.all(reads)).toEqual(anchors.map(() => ['x']));
  });

  it('an unkeyed pre-bind counts live slots and unclaimed pre-binds, not attach answers still waiting for their OpenSlot', async () => {
    // The load of a lane is its live slots from every peer, plus the pre-binds on it that are not yet
    // claimed, released or expired (docs/protocol.md §10.6).
    const { consumer, producer, ptap } = await pair();
    ptap.holdBatches = true;
    const attached = Array.from({ length: 3 }, () => consumer.createAnchor());
    for (const a of attached) await producer.attachAnchor(a.handle);
    expect(attached.map((a) => a.bind!.lane)).toEqual([0, 1, 2]);
    const pre = consumer.createAnchor();
    consumer.prebindAnchor(pre);
    ptap.release();
    expect(pre.bind!.lane, 'no live slot and no pre-bind on any lane yet: lane 0').toBe(0);
  });

  it('16 lanes is the most per peer, and the count follows the transport (the smaller side)', async () => {
    await expect(createNode({ transports: [tcpTransport({ listen: false })], lanes: 17 })).rejects.toBeDefined();
    const { consumer, producer, ptap } = await pair(16, 16);
    const anchors = Array.from({ length: 32 }, () => consumer.createAnchor<number>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<number>(a.handle)));
    expect(
      spread(
        anchors.map((a) => a.bind!.lane),
        16,
      ),
    ).toEqual(new Array(16).fill(2));
    const reads = anchors.map((a) => readAll(a));
    await Promise.all(senders.map((s, i) => s.send(i).then(() => s.finalize())));
    (await Promise.all(reads)).forEach((items, i) => expect(items).toEqual([i]));
    const opens = opensByAnchor(ptap);
    anchors.forEach((a) => expect(opens.get(a.localId)!.lane).toBe(a.bind!.lane));
    // A 3-lane producer to a 16-lane consumer: attaches are chosen among 3 lanes only.
    const small = (await tappedNode({ listen: false, lanes: 3 })).node;
    await small.connect(consumer.address);
    const few = Array.from({ length: 9 }, () => consumer.createAnchor());
    for (const a of few) await small.attachAnchor(a.handle);
    expect(few.map((a) => a.bind!.lane)).toEqual([0, 1, 2, 0, 1, 2, 0, 1, 2]);
    const keyed = consumer.createAnchor();
    await small.attachAnchor(keyed.handle, { laneKey: 0xdeadbeefn });
    expect(keyed.bind!.lane).toBe(refLane(0xdeadbeefn, 3));
  });

  it('all lane tables of a peer share one byte budget: holds on two lanes overflow a budget each alone fits', async () => {
    const { consumer, producer, ptap } = await pair(8, 8, { peerByteBudget: 3_000 });
    const a = consumer.createAnchor<string>();
    const b = consumer.createAnchor<string>();
    const sa = await producer.attachAnchor<string>(a.handle);
    const sb = await producer.attachAnchor<string>(b.handle);
    expect([a.bind!.lane, b.bind!.lane]).toEqual([0, 1]);
    await sa.send('a0');
    await sb.send('b0');
    expect(await a.next()).toEqual({ done: false, value: 'a0' });
    expect(await b.next()).toEqual({ done: false, value: 'b0' });
    const opens = opensByAnchor(ptap);
    const body = encodeFrame({ kind: 'Item', value: 'h'.repeat(2_000) });
    /** A Data record one ahead of sequence (frame_seq 3; the slot expects 2), as the producer's next batch on its lane. */
    const injectAhead = (anchorId: bigint): void => {
      const { lane, slot } = opens.get(anchorId)!;
      const last = decodeBatch(
        ptap
          .batches('out')
          .filter((x) => x.lane === lane)
          .at(-1)!.payload,
      ).header!;
      const enc = new BatchEncoder();
      enc.begin(last.epoch, (last.batchSeq + 1) >>> 0, lane);
      enc.appendData(slot, 3, body);
      void ptap.conns[lane]!.send(Uint8Array.of(0x01), enc.finish().slice());
    };
    injectAhead(a.localId);
    await waitFor(() => consumer.metricsRegistry.heldRecords === 1, 5_000, 'lane 0 hold');
    expect(consumer.metrics()['velo_streaming_mux_hold_overflow_total']).toBe(0);
    injectAhead(b.localId);
    // 2 × ~2 KB > 3,000 B for the peer, whichever lane: the second hold overflows and ends only that slot.
    await waitFor(
      () => (consumer.metrics()['velo_streaming_mux_hold_overflow_total'] ?? 0) > 0,
      2_000,
      'hold overflow on lane 1',
    );
    expect(consumer.metrics()['velo_streaming_mux_hold_overflow_total']).toBe(1);
    await expect(b.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    expect(consumer.metricsRegistry.heldRecords).toBe(1);
    expect(a.finished).toBe(false);
  });

  it('a peer that left with answered, unclaimed binds gets an unskewed lane load when it reconnects', async () => {
    const mux = { acceptWindow: 300, creditSweepInterval: 20 };
    // Without resume: the lost link's streams and binds end with it.
    const consumer = (await tappedNode({ lanes: 8, mux, resume: false })).node;
    const relay = new Relay(parseTcp(consumer.address));
    const via = await relay.listen();
    try {
      const { node: producer, tap: ptap } = await tappedNode({ listen: false, lanes: 8, mux, resume: false });
      await producer.connect(via);
      // One claimed stream (the consumer holds an ingress table for the peer) …
      const a1 = consumer.createAnchor<string>();
      const s1 = await producer.attachAnchor<string>(a1.handle);
      await s1.send('x');
      expect(await a1.next()).toEqual({ done: false, value: 'x' });
      // … and one answered bind whose OpenSlot never arrives.
      ptap.holdBatches = true;
      const a2 = consumer.createAnchor<string>();
      await producer.attachAnchor(a2.handle);
      expect([a2.bind!.lane, a2.bind!.claimed]).toEqual([1, false]);
      relay.kill();
      await expect(a1.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
      await waitFor(() => s1.closed, 5_000, 'producer saw the link go');
      ptap.discard();
      await producer.connect(via); // same worker id: the same peer to the consumer
      const a3 = consumer.createAnchor();
      await producer.attachAnchor(a3.handle);
      expect(a3.bind!.lane).toBe(0);
      // The old answered bind ends (at the latest when its accept window closes) …
      await expect(a2.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
      // … and must not be taken off the reconnected peer's fresh load: lanes 1, 2 next.
      const more = [consumer.createAnchor(), consumer.createAnchor()];
      for (const a of more) await producer.attachAnchor(a.handle);
      expect(more.map((a) => a.bind!.lane)).toEqual([1, 2]);
    } finally {
      await relay.close();
    }
  });

  it('a lane-0 attach answer has exactly the five pre-lanes fields; another lane adds `lane` last', async () => {
    const { consumer, producer, ctap } = await pair();
    const a0 = consumer.createAnchor();
    await producer.attachAnchor(a0.handle); // idle node: lane 0
    const a1 = consumer.createAnchor();
    await producer.attachAnchor(a1.handle); // lane 1
    expect([a0.bind!.lane, a1.bind!.lane]).toEqual([0, 1]);
    const reqs = ctap.requests('in', '_anchor_attach');
    expect(reqs.length).toBe(2);
    // An unkeyed attach request carries no lane_key.
    const reqBody = (m: WireMsg) => msgpackDecode(m.bytes.subarray(6 + m.bytes[5]!)) as Record<string, unknown>;
    for (const r of reqs) expect(Object.keys(reqBody(r))).not.toContain('lane_key');
    const answers = reqs.map((r) => ctap.msgs.find((m) => m.dir === 'out' && m.kind === 0x04 && m.id === r.id)!);
    const bodies = answers.map((m) => (msgpackDecode(m.bytes.subarray(5)) as { Ok: Record<string, unknown> }).Ok);
    expect(Object.keys(bodies[0]!)).toEqual([
      'streaming_transport_key',
      'heartbeat_interval_ms',
      'routing_session_id',
      'initial_credit',
      'slot_byte_budget',
    ]);
    expect(Object.keys(bodies[1]!)).toEqual([
      'streaming_transport_key',
      'heartbeat_interval_ms',
      'routing_session_id',
      'initial_credit',
      'slot_byte_budget',
      'lane',
    ]);
    expect(bodies[1]!['lane']).toBe(1);
    // Lane-0 batches write flags 0 (byte-identical header to pre-lanes).
    const lane0 = ctap.batches('in').filter((b) => b.lane === 0);
    expect(lane0.length).toBeGreaterThan(0);
    for (const b of lane0) expect(b.payload[1]).toBe(0);
  });

  it('a one-lane consumer names lane 0 for every stream, keyed or not', async () => {
    const { consumer, producer } = await pair(1, 8);
    const keyed = consumer.createAnchor();
    await producer.attachAnchor(keyed.handle, { laneKey: 0n }); // splitmix64(0) % 8 = 7, but one lane
    const pre = consumer.createAnchor();
    consumer.prebindAnchor(pre, { laneKey: 0n });
    const plain = Array.from({ length: 4 }, () => consumer.createAnchor());
    for (const a of plain) await producer.attachAnchor(a.handle);
    for (const a of [keyed, pre, ...plain]) expect(a.bind!.lane).toBe(0);
  });
});
