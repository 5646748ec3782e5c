/**
 * Stragglers apart from drops (docs/protocol.md §10.9): a record naming a slot that ended moments
 * ago on this side is a straggler (the teardown race), counted by record type; one naming a slot
 * never known here is a drop. Receive side: an IngressTable fed crafted batches. Send side: a mux
 * whose owned slot retired, fed crafted control from its peer.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ENDED_SLOTS, EndedSlots } from '../../src/mux/ended-slots.ts';
import { createNode } from '../../src/stream/node.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { CloseReason, LifecycleAction } from '../../src/wire/constants.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { MuxMetrics } from '../../src/metrics/mux-metrics.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';
import {
  EgressKind,
  FRAME_FINALIZED,
  IngressHarness,
  RecordType,
  RecordingOwner,
  encodeBatch,
  muxPair,
  read,
  rec,
  sid,
} from './harness.ts';

describe('EndedSlots: the ring of recently ended slots', () => {
  it('keeps the last 64 (SlotId, session) pairs and forgets the oldest beyond its size', () => {
    const ring = new EndedSlots();
    expect(ring.size).toBe(ENDED_SLOTS);
    expect(ENDED_SLOTS).toBeGreaterThanOrEqual(64);
    for (let i = 0; i < ENDED_SLOTS + 1; i++) ring.add(sid(i, 7), BigInt(i) + 0xffff_ffff_0000n);
    expect(ring.count).toBe(ENDED_SLOTS);
    expect(ring.has(sid(0, 7))).toBe(false);
    for (let i = 1; i <= ENDED_SLOTS; i++) expect(ring.has(sid(i, 7))).toBe(true);
    expect(ring.has(sid(1, 8))).toBe(false); // another generation of the same index
    expect(ring.hasSession(sid(5, 7), 5n + 0xffff_ffff_0000n)).toBe(true);
    expect(ring.hasSession(sid(5, 7), 6n)).toBe(false);
    ring.clear();
    expect(ring.has(sid(5, 7))).toBe(false);
  });

  it('matches the full u32 SlotId, generation 0xff and index 0xffffff included', () => {
    const ring = new EndedSlots(2);
    const top = sid(0xff_ffff, 0xff);
    ring.add(top, 2n ** 64n - 1n);
    expect(ring.has(top)).toBe(true);
    expect(ring.hasSession(top, 2n ** 64n - 1n)).toBe(true);
  });
});

describe('receive side: records for a slot that just ended', () => {
  it('records crossing a consumer cancel are stragglers by type, not drops; their window bytes are released', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(4, 2);
    h.open(id, b);
    h.send(rec.item(id, 1, 'one'));
    expect(read(b)).toEqual(['one']);
    h.table.consumerGone(h.table.slotAt(4)!);
    const replies = h.host.replies.length;
    // In flight when the cancel left: more data, the terminal and its CloseSlot.
    h.send(rec.item(id, 2, 'two'), rec.hb(id, 3), rec.fin(id, 4), rec.close(id, 5, CloseReason.TerminalSent));
    const m = h.metrics;
    expect(m.straggled(RecordType.Data)).toBe(2);
    expect(m.straggled(RecordType.SlotHeartbeat)).toBe(1);
    expect(m.straggled(RecordType.CloseSlot)).toBe(1);
    expect(m.straggled()).toBe(4);
    expect(m.dropped()).toBe(0);
    expect(m.unrouted()).toBe(0);
    expect(m.generationMismatch).toBe(0);
    // Handled as before: no reply, nothing delivered, nothing held.
    expect(h.host.replies.length).toBe(replies);
    expect(h.peerBudget.used).toBe(0);
    expect(h.table.liveSlots).toBe(0);
    const snap = m.snapshot();
    expect(snap['velo_streaming_mux_stragglers_total{record_type="data"}']).toBe(2);
    expect(snap['velo_streaming_mux_stragglers_total{record_type="close_slot"}']).toBe(1);
    expect(snap['velo_streaming_mux_no_route_total{record_type="data"}']).toBe(0);
  });

  it('a straggler for a reused index (the next generation live) is not a generation mismatch', () => {
    const h = new IngressHarness();
    const first = h.bind();
    const next = h.bind();
    h.open(sid(3, 1), first);
    h.send(rec.fin(sid(3, 1), 1), rec.close(sid(3, 1), 2, CloseReason.TerminalSent));
    h.open(sid(3, 2), next);
    h.send(rec.item(sid(3, 1), 2, 'late'));
    expect(h.metrics.straggled(RecordType.Data)).toBe(1);
    expect(h.metrics.generationMismatch).toBe(0);
    expect(h.metrics.dropped()).toBe(0);
    // A generation this table never saw is still a drop.
    h.send(rec.item(sid(3, 9), 1, 'stale'));
    expect(h.metrics.generationMismatch).toBe(1);
    expect(h.metrics.dropped('generation')).toBe(1);
    expect(h.metrics.unrouted(RecordType.Data)).toBe(1);
    expect(h.metrics.straggled()).toBe(1);
    expect(read(next)).toEqual([]);
  });

  it('records for a slot never opened are drops (records_dropped and no_route), not stragglers', () => {
    const h = new IngressHarness();
    h.send(rec.item(sid(8, 0), 1, 'x'), rec.close(sid(8, 0), 2, CloseReason.PeerGone));
    expect(h.metrics.straggled()).toBe(0);
    expect(h.metrics.dropped('closed_slot')).toBe(2);
    expect(h.metrics.unrouted(RecordType.Data)).toBe(1);
    expect(h.metrics.unrouted(RecordType.CloseSlot)).toBe(1);
    expect(h.host.replies).toEqual([]);
  });

  it('the table remembers 64 retired slots: the 65th-oldest ages back into a drop', () => {
    const h = new IngressHarness();
    const n = ENDED_SLOTS + 1;
    for (let i = 0; i < n; i++) {
      const b = h.bind();
      h.open(sid(i, 0), b);
      h.send(rec.fin(sid(i, 0), 1), rec.close(sid(i, 0), 2, CloseReason.TerminalSent));
    }
    expect(h.table.liveSlots).toBe(0);
    for (let i = 0; i < n; i++) h.send(rec.item(sid(i, 0), 2, 'late'));
    expect(h.metrics.straggled(RecordType.Data)).toBe(ENDED_SLOTS);
    expect(h.metrics.unrouted(RecordType.Data)).toBe(1);
    expect(h.metrics.dropped('closed_slot')).toBe(1);
  });

  it("a newer epoch forgets the old epoch's slots: its records naming them are drops", () => {
    const h = new IngressHarness();
    const b = h.bind();
    h.open(sid(1, 0), b);
    h.epoch = 2n;
    h.batchSeq = 0;
    h.send(rec.item(sid(1, 0), 1, 'new epoch'));
    expect(read(b)).toEqual(['Dropped']);
    expect(h.metrics.straggled()).toBe(0);
    expect(h.metrics.unrouted(RecordType.Data)).toBe(1);
  });

  it('a receiver close and cancel reaching the table (owned control) go to the owner unclassified here', () => {
    const h = new IngressHarness();
    h.send(rec.close(sid(2, 0), 0, CloseReason.UnknownSlot), rec.credit(sid(2, 0), 3));
    expect(h.host.owned.map((o) => o.kind)).toEqual(['close', 'credit']);
    expect(h.metrics.straggled()).toBe(0);
    expect(h.metrics.unrouted()).toBe(0);
  });
});

describe('send side: peer control for an owned slot that just retired', () => {
  /** A mux whose one owned slot toward B sent its terminal and retired (B never saw it: delivery held). */
  async function retiredSlot() {
    const p = muxPair();
    const peerB = p.mb.self.id;
    p.ma.holdDelivery();
    const batcher = p.a.batcherFor(peerB, 0);
    const owner = new RecordingOwner();
    const session = 0x5e55_1000n;
    const slot = await batcher.openSlot(0x1234n, session, 4, owner);
    batcher.offer(slot, EgressKind.Terminal, FRAME_FINALIZED);
    await p.runtime.runMacrotasks();
    expect(slot.closed).toBe(true);
    // B's side: the epoch and batch_seq of its crafted batches.
    let seq = 0;
    const fromB = (...recs: Parameters<typeof encodeBatch>[2]): void => {
      p.mb.sendBatch(p.ma.self.id, 0, encodeBatch(1n, seq++, recs));
    };
    return { p, slot, session, fromB };
  }

  it('a CreditUpdate, a CloseSlot{UnknownSlot} and a matching cancel for the retired slot are stragglers', async () => {
    const { p, slot, session, fromB } = await retiredSlot();
    const refusedBefore = p.metricsA.controlRefused;
    fromB(
      rec.credit(slot.id, 2),
      rec.close(slot.id, 0, CloseReason.UnknownSlot),
      rec.life(slot.id, session, LifecycleAction.Cancel),
    );
    await p.runtime.runMacrotasks();
    const m = p.metricsA;
    expect(m.straggled(RecordType.CreditUpdate)).toBe(1);
    expect(m.straggled(RecordType.CloseSlot)).toBe(1);
    expect(m.straggled(RecordType.LifecycleSlot)).toBe(1);
    expect(m.unrouted()).toBe(0);
    // Handled as before: an allocated index is not refused.
    expect(m.controlRefused).toBe(refusedBefore);
  });

  it('control for a slot never allocated is a drop (no_route) and still refused; a cancel naming another session is a drop', async () => {
    const { p, slot, fromB } = await retiredSlot();
    fromB(rec.credit(sid(40, 0), 1), rec.life(slot.id, 0x0bad_5e55n, LifecycleAction.Cancel));
    await p.runtime.runMacrotasks();
    const m = p.metricsA;
    expect(m.unrouted(RecordType.CreditUpdate)).toBe(1);
    expect(m.unrouted(RecordType.LifecycleSlot)).toBe(1);
    expect(m.straggled()).toBe(0);
    expect(m.controlRefused).toBe(1);
  });

  it('the memory of an owned slot outlives its batcher: credit reaching the next batcher is a straggler', async () => {
    const { p, slot, fromB } = await retiredSlot();
    const peerB = p.mb.self.id;
    const old = p.a.batcherFor(peerB, 0);
    old.retire();
    const fresh = p.a.batcherFor(peerB, 0);
    expect(fresh).not.toBe(old);
    // The next batcher never gives the retired slot's id to a new stream.
    expect(fresh.slotTable.allocate()).not.toBe(slot.id);
    fromB(rec.credit(slot.id, 1));
    await p.runtime.runMacrotasks();
    expect(p.metricsA.straggled(RecordType.CreditUpdate)).toBe(1);
    expect(p.metricsA.unrouted()).toBe(0);
  });
});

describe('node.metrics(): stragglers beside drops', () => {
  const nodes: LanemuxNode[] = [];
  afterEach(async () => {
    for (const n of nodes.splice(0)) await n.close();
  });

  it('a consumer grant crossing the end of a finished stream shows as a credit straggler on the producer node', async () => {
    const runtime = new ManualRuntime();
    const [ma, mb] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: ma, runtime, mux: { initialCredit: 4 } });
    const logged: Array<[string, Record<string, unknown>]> = [];
    const producer = await createNode({
      messenger: mb,
      runtime,
      mux: { initialCredit: 4 },
      logger: { debug: (m, f) => logged.push([m, f]) },
    });
    nodes.push(consumer, producer);
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    await sender.finalize();
    await runtime.advance(50);
    const got: string[] = [];
    for await (const t of anchor) got.push(t);
    expect(got).toEqual(['a']);
    // The producer's slot: the Data records it sent.
    const data = mb.sent.flatMap((s) => decodeBatch(s.payload).records).filter((r) => r.type === RecordType.Data);
    const slot = data[0]!.slot;
    // A grant the consumer posted before the close arrived, landing after it (a batch of its own).
    ma.sendBatch(mb.self.id, 0, encodeBatch(99n, 0, [rec.credit(slot, 1)]));
    await runtime.advance(10);
    const snap = producer.metrics();
    expect(snap['velo_streaming_mux_stragglers_total{record_type="credit_update"}']).toBe(1);
    expect(snap['velo_streaming_mux_no_route_total{record_type="credit_update"}']).toBe(0);
    expect(Object.keys(snap).filter((k) => k.includes('stragglers_total'))).toHaveLength(6);
    expect(Object.keys(snap).filter((k) => k.includes('no_route_total'))).toHaveLength(6);
    // And at debug level, to the node's logger.
    expect(logged).toEqual([
      [expect.stringContaining('straggler'), { recordType: 'credit_update', peer: ma.self.id, lane: 0, count: 1 }],
    ]);
  });

  it('records for slots never known go to the logger at warning level at the 1st, 10th, 100th, 1,000th only', () => {
    const m = new MuxMetrics();
    const warned: number[] = [];
    m.logger = { warn: (_msg, f) => warned.push(f['count'] as number) };
    for (let i = 0; i < 1_500; i++) m.noRouteFor(RecordType.Data, 'peer', 0);
    expect(warned).toEqual([1, 10, 100, 1_000]);
    expect(m.unrouted(RecordType.Data)).toBe(1_500);
  });

  it('a logger that is not one is refused by createNode, naming the field', async () => {
    const [ma] = LoopMessenger.pair();
    await expect(createNode({ messenger: ma, logger: { warn: 'loud' } as never })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
      message: expect.stringContaining('logger'),
    });
  });
});
