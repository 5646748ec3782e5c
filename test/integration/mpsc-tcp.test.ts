// MPSC anchors over real TCP: 8 senders on two producer nodes into one anchor, cancel, a producer
// node killed mid-stream, bounded credit when the consumer stops reading, mixed transports.
import { afterEach, describe, expect, it } from 'vitest';
import type { MpscAnchor, MpscEvent } from '../../src/stream/mpsc-anchor.ts';
import type { MpscSender } from '../../src/stream/mpsc-sender.ts';
import { tcpStreamTransport } from '../../src/adapters/node-tcp-stream.ts';
import { Relay, closeAll, parseTcp, tcpNode } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';

afterEach(closeAll);

async function readEvents<T>(anchor: MpscAnchor<T>): Promise<MpscEvent<T>[]> {
  const out: MpscEvent<T>[] = [];
  for await (const e of anchor) out.push(e);
  return out;
}

function bySender<T>(events: MpscEvent<T>[]): Map<number, T[]> {
  const m = new Map<number, T[]>();
  for (const e of events) {
    if (e.kind !== 'item') continue;
    let l = m.get(e.sender);
    if (!l) m.set(e.sender, (l = []));
    l.push(e.value);
  }
  return m;
}

const expected = (s: MpscSender<string>, n: number): string[] =>
  Array.from({ length: n }, (_, k) => `${s.senderId}:${k}`);

/** A consumer and two producer nodes (each connected to it), all with `mux`. */
async function threeNodes(mux: Record<string, unknown> = {}, lanes = 1) {
  const consumer = await tcpNode({ mux, lanes });
  const p1 = await tcpNode({ listen: false, mux, lanes });
  const p2 = await tcpNode({ listen: false, mux, lanes });
  await p1.connect(consumer.address);
  await p2.connect(consumer.address);
  return { consumer, p1, p2 };
}

describe('MPSC anchors over TCP', () => {
  it('8 MPSC senders on two producer nodes deliver every item into one anchor, in per-sender order', async () => {
    const { consumer, p1, p2 } = await threeNodes({ initialCredit: 16 }, 4);
    const anchor = consumer.createMpscAnchor<string>();
    // Interleaved attaches from both nodes; half keyed (placement hint), half least-loaded.
    const senders: MpscSender<string>[] = [];
    for (let i = 0; i < 8; i++) {
      const node = i % 2 === 0 ? p1 : p2;
      senders.push(await node.attachMpscAnchor<string>(anchor.handle, i < 4 ? { laneKey: BigInt(i) } : {}));
    }
    expect(new Set(senders.map((s) => s.senderId)).size).toBe(8);
    expect(senders.every((s) => s.negotiatedTransport === 'messenger-mux-v2')).toBe(true);
    anchor.seal();
    const reading = readEvents(anchor);
    const N = 500;
    // Every round, every sender sends one item (both nodes at once); then each finalizes.
    for (let k = 0; k < N; k++) await Promise.all(senders.map((s) => s.send(`${s.senderId}:${k}`)));
    await Promise.all(senders.map((s) => s.finalize()));
    const events = await reading;
    const items = bySender(events);
    for (const s of senders) expect(items.get(s.senderId)).toEqual(expected(s, N));
    expect(events.filter((e) => e.kind !== 'item').map((e) => e.kind)).toEqual(Array(8).fill('finalized'));
    // Items of different senders really interleave at the consumer.
    const firstSenders = new Set(events.slice(0, 64).map((e) => e.sender));
    expect(firstSenders.size).toBeGreaterThan(1);
    expect(await Promise.all(senders.map((s) => s.retired()))).toEqual(Array(8).fill('Sent'));
    expect(
      consumer.metrics()[
        'velo_streaming_anchor_operations_total{operation="attach",outcome="success",transport_scheme="mux"}'
      ],
    ).toBe(8);
  }, 30_000);

  it("cancelling the anchor closes every sender's slot: each producer's next send fails", async () => {
    const { consumer, p1, p2 } = await threeNodes();
    const anchor = consumer.createMpscAnchor<string>();
    const senders = await Promise.all([p1, p2, p1, p2].map((n) => n.attachMpscAnchor<string>(anchor.handle)));
    for (const s of senders) await s.send('first');
    await waitFor(() => anchor.buffered === 4, 5_000, 'first records');
    anchor.cancel();
    await Promise.all(
      senders.map(
        (s) =>
          new Promise<void>((r) =>
            s.cancelSignal.aborted ? r() : s.cancelSignal.addEventListener('abort', () => r()),
          ),
      ),
    );
    for (const s of senders) await expect(s.send('late')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    await waitFor(
      () => consumer.metricsRegistry.liveSlots + p1.metricsRegistry.liveSlots + p2.metricsRegistry.liveSlots === 0,
      5_000,
      'every slot closed',
    );
  }, 20_000);

  it("a producer node cut off for good mid-stream ends only its senders' parts (dropped once the resume window passed); the others go on to the end", async () => {
    // The doomed node's link never comes back: its senders wait out the consumer's resume window (docs/protocol.md §8.3).
    const consumer = await tcpNode({ mux: { initialCredit: 16 }, resume: { windowMs: 300 } });
    const healthy = await tcpNode({ listen: false, mux: { initialCredit: 16 } });
    const doomed = await tcpNode({ listen: false, mux: { initialCredit: 16 } });
    const relay = new Relay(parseTcp(consumer.address));
    try {
      await healthy.connect(consumer.address);
      await doomed.connect(await relay.listen());
      const anchor = consumer.createMpscAnchor<string>();
      const good = await Promise.all([0, 1, 2, 3].map(() => healthy.attachMpscAnchor<string>(anchor.handle)));
      const bad = await Promise.all([0, 1, 2, 3].map(() => doomed.attachMpscAnchor<string>(anchor.handle)));
      anchor.seal();
      const reading = readEvents(anchor);
      for (let k = 0; k < 50; k++) await Promise.all([...good, ...bad].map((s) => s.send(`${s.senderId}:${k}`)));
      await waitFor(() => consumer.metricsRegistry.liveSlots === 8, 5_000, 'every slot open');
      // No further connection through the relay either: the doomed node cannot link again.
      await relay.close();
      for (let k = 50; k < 200; k++) await Promise.all(good.map((s) => s.send(`${s.senderId}:${k}`)));
      await Promise.all(good.map((s) => s.finalize()));
      const events = await reading;
      const items = bySender(events);
      for (const s of good) expect(items.get(s.senderId)).toEqual(expected(s, 200));
      for (const s of bad) {
        // What reached the consumer is a prefix, in order; then exactly one dropped event.
        const got = items.get(s.senderId) ?? [];
        expect(got).toEqual(expected(s, got.length));
        const ends = events.filter((e) => e.sender === s.senderId && e.kind !== 'item');
        expect(ends).toEqual([
          {
            kind: 'dropped',
            sender: s.senderId,
            error: expect.objectContaining({ code: 'ERR_SENDER_DROPPED', reason: 'window' }),
          },
        ]);
      }
      expect(
        events
          .filter((e) => e.kind === 'finalized')
          .map((e) => e.sender)
          .sort(),
      ).toEqual(good.map((s) => s.senderId).sort());
    } finally {
      await relay.close();
    }
  }, 30_000);

  it('a consumer that stops reading holds each of 8 senders to its window C; the rest waits on the producers', async () => {
    const C = 8;
    const N = 100;
    const { consumer, p1, p2 } = await threeNodes({ initialCredit: C });
    const anchor = consumer.createMpscAnchor<string>();
    const senders = await Promise.all(
      [p1, p2, p1, p2, p1, p2, p1, p2].map((n) => n.attachMpscAnchor<string>(anchor.handle)),
    );
    for (const s of senders) for (let k = 0; k < N; k++) expect(s.trySend(`${s.senderId}:${k}`)).toBe(true);
    await waitFor(() => anchor.buffered === 8 * C, 5_000, 'C records per sender delivered');
    await waitFor(
      () => p1.metricsRegistry.withheldRecords === 4 * (N - C) && p2.metricsRegistry.withheldRecords === 4 * (N - C),
      5_000,
      'the rest withheld',
    );
    // Nothing more crosses while nobody reads (a few sweep intervals later).
    await new Promise((r) => setTimeout(r, 50));
    expect(anchor.buffered).toBe(8 * C);
    anchor.seal();
    const reading = readEvents(anchor);
    await Promise.all(senders.map((s) => s.finalize()));
    const items = bySender(await reading);
    for (const s of senders) expect(items.get(s.senderId)).toEqual(expected(s, N));
    expect(p1.metricsRegistry.withheldRecords + p2.metricsRegistry.withheldRecords).toBe(0);
  }, 30_000);

  it('negotiation per sender: a producer without the mux joins over tcp-stream next to a mux producer', async () => {
    const consumer = await tcpNode({ perStream: tcpStreamTransport() });
    const legacy = await tcpNode({ listen: false, perStream: tcpStreamTransport(), mux: { enabled: false } });
    const modern = await tcpNode({ listen: false, perStream: tcpStreamTransport() });
    await legacy.connect(consumer.address);
    await modern.connect(consumer.address);
    const anchor = consumer.createMpscAnchor<string>();
    const a = await legacy.attachMpscAnchor<string>(anchor.handle);
    const b = await modern.attachMpscAnchor<string>(anchor.handle);
    const c = await consumer.attachMpscAnchor<string>(anchor.handle);
    expect([a.negotiatedTransport, b.negotiatedTransport, c.negotiatedTransport]).toEqual([
      'tcp-stream',
      'messenger-mux-v2',
      null,
    ]);
    anchor.seal();
    const reading = readEvents(anchor);
    for (let k = 0; k < 100; k++) await Promise.all([a, b, c].map((s) => s.send(`${s.senderId}:${k}`)));
    await Promise.all([a, b, c].map((s) => s.finalize()));
    const items = bySender(await reading);
    for (const s of [a, b, c]) expect(items.get(s.senderId)).toEqual(expected(s, 100));
    // A mux-less consumer with no per-stream transport refuses clearly.
    const bare = await tcpNode({ mux: { enabled: false } });
    await modern.connect(bare.address);
    const other = bare.createMpscAnchor();
    await expect(modern.attachMpscAnchor(other.handle)).rejects.toThrow(/no common streaming transport/);
  }, 30_000);

  it("cancel reaches every transport: the tcp-stream sender's connection is reset, the mux sender learns ERR_STREAM_CANCELLED", async () => {
    const consumer = await tcpNode({ perStream: tcpStreamTransport() });
    const legacy = await tcpNode({ listen: false, perStream: tcpStreamTransport(), mux: { enabled: false } });
    const modern = await tcpNode({ listen: false });
    await legacy.connect(consumer.address);
    await modern.connect(consumer.address);
    const anchor = consumer.createMpscAnchor<string>();
    const a = await legacy.attachMpscAnchor<string>(anchor.handle);
    const b = await modern.attachMpscAnchor<string>(anchor.handle);
    await a.send('a');
    await b.send('b');
    await waitFor(() => anchor.buffered === 2, 5_000, 'both connected');
    anchor.cancel();
    await Promise.all(
      [a, b].map(
        (s) =>
          new Promise<void>((r) =>
            s.cancelSignal.aborted ? r() : s.cancelSignal.addEventListener('abort', () => r()),
          ),
      ),
    );
    await expect(a.send('late')).rejects.toBeDefined();
    await expect(b.send('late')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    expect(await a.retired()).toBe('Discarded');
  }, 20_000);
});
