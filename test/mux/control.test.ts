/**
 * Batcher control (CONTROL-*), epochs and retirement.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MuxError } from '../../src/mux/errors.ts';
import { createNode } from '../../src/stream/node.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { CloseReason } from '../../src/wire/constants.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';
import {
  RecordType,
  batches,
  dataOf,
  egress,
  encodeBatch,
  grant,
  itemsOf,
  label,
  loopWire,
  muxPair,
  offerFinalized,
  offerItems,
  openSlot,
  openSlots,
  produce,
  records,
  sid,
  tokens,
  wire,
} from './harness.ts';

describe('E. Batcher control, epochs and retirement', () => {
  it('CTRL-01 a reply posted after retire was requested, while the batcher is parked, rides the final flush as a single CloseSlot batch; a later reply is refused', async () => {
    // lanemux: retirement is requested through the inbox (`postRetire`) and applied by the
    // batcher's next drain. The batcher is parked on admission when both posts land.
    const h = egress({ replyLinger: 0 });
    h.sink.mode = 'stall';
    expect(h.batcher.inbox.postReplyCredit(sid(20, 1), 3)).toBe(true);
    await h.runtime.runMacrotasks();
    expect(h.batcher.parked).toBe(true);
    const mark = h.sink.sent.length;
    h.batcher.inbox.postRetire();
    expect(h.batcher.inbox.postReplyClose(sid(21, 4), CloseReason.UnknownSlot)).toBe(true);
    await h.runtime.runMacrotasks();
    expect(h.sink.sent.length).toBe(mark); // nothing written while parked
    h.sink.release();
    await h.runtime.advance(10);
    expect(h.batcher.retired).toBe(true);
    expect(wire(h, mark, true)).toEqual([['21.4:Close(UnknownSlot)@0']]);
    expect(h.batcher.inbox.postReplyClose(sid(22, 0), CloseReason.UnknownSlot)).toBe(false);
    expect(h.batcher.inbox.postReplyCredit(sid(22, 0), 1)).toBe(false);
  });

  it('CTRL-01 (graceful retire) when the retirement closes span batches on a stalled transport, every producer still fails exactly once and live_slots returns to 0', async () => {
    // A retire applied by the batcher's drain closes each live slot with CloseSlot{PeerGone}. With a
    // 64-byte cap three closes fit a batch; the transport stalls on the first, so the rest cannot be
    // staged. Those slots must still be failed locally (epoch death fails those slots, so their producers
    // re-attach, and live_slots returns to 0).
    const h = egress({ maxBatchBytes: 64 });
    const opened = await openSlots(h, 5);
    h.sink.mode = 'stall';
    h.batcher.inbox.postRetire();
    await h.runtime.runMacrotasks();
    expect(h.batcher.retired).toBe(true);
    h.sink.release();
    await h.runtime.advance(100);
    expect(opened.map((o) => o.owner.closed.length)).toEqual([1, 1, 1, 1, 1]);
    expect(opened.every((o) => o.slot.closed)).toBe(true);
    expect(h.batcher.liveSlots).toBe(0);
    expect(h.metrics.liveSlots).toBe(0);
  });

  it('CTRL-01 (whole mux) a reply for a retired batcher is not lost: the mux re-resolves a fresh batcher, which writes it as a single CloseSlot batch', async () => {
    const p = muxPair({ creditSweepInterval: 10, batcherIdleTtl: 10 });
    const peerB = p.mb.self.id;
    const old = p.a.batcherFor(peerB, 0);
    await p.runtime.advance(25); // idle: the sweep evicts (retires) it
    expect(old.retired).toBe(true);
    expect(old.inbox.postReplyClose(sid(3, 0), CloseReason.UnknownSlot)).toBe(false);
    const mark = p.ma.sent.length;
    p.a.replyClose(peerB, 0, sid(3, 0), CloseReason.UnknownSlot);
    await p.runtime.runMacrotasks();
    const sent = loopWire(p.ma, mark);
    expect(sent.map((b) => b.records.map((r) => label(r, true)))).toEqual([['3.0:Close(UnknownSlot)@0']]);
    expect(p.a.batcherFor(peerB, 0)).not.toBe(old);
  });

  it('CTRL-02 stalled transport; 10,000 grants and 10,000 replies while parked: ≤ 3 inbox entries, no write while parked; then the deltas sum to 10,000 in < 2,500 records, the parked close survives and 100 records arrive in order', async () => {
    const h = egress();
    const { slot } = await openSlot(h, 1);
    h.sink.mode = 'stall';
    offerItems(h, slot, ['first']);
    await h.runtime.runMacrotasks();
    expect(h.batcher.parked).toBe(true);
    expect(h.sink.stalledCount).toBe(1);
    const mark = h.sink.sent.length;
    const producer = produce(h, slot, tokens(100));
    const peerCredit = sid(40, 3);
    const peerClose = sid(41, 0);
    for (let i = 0; i < 10_000; i++) {
      expect(grant(h, slot, 1)).toBe(true);
      expect(h.batcher.inbox.postReplyCredit(peerCredit, 1)).toBe(true);
    }
    expect(h.batcher.inbox.postReplyClose(peerClose, CloseReason.ProtocolError)).toBe(true);
    await h.runtime.advance(100);
    expect(h.batcher.inbox.size).toBeLessThanOrEqual(3);
    expect(h.sink.sent.length).toBe(mark);
    h.sink.release();
    await h.runtime.advance(10);
    await producer;
    await h.runtime.advance(10);
    const after = records(h, mark);
    const credits = after.filter((r) => r.type === RecordType.CreditUpdate);
    expect(credits.every((r) => r.slot === peerCredit)).toBe(true);
    expect(credits.reduce((a, r) => a + (r.creditDelta ?? 0), 0)).toBe(10_000);
    expect(credits.length).toBeLessThan(2_500);
    expect(after.filter((r) => r.type === RecordType.CloseSlot).map((r) => label(r, true))).toEqual([
      '41.0:Close(ProtocolError)@0',
    ]);
    expect(itemsOf(h, slot.id, mark)).toEqual(tokens(100).map((t) => JSON.stringify(t)));
    expect(dataOf(h, slot.id, mark).map((r) => r.frameSeq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 2));
  });

  it('CTRL-03 a resolution that fails after its slot closed is stale: no epoch death follows, and the reopened slot works', async () => {
    // lanemux equivalent: lanemux sends no rendezvous singletons, so nothing posts singleton
    // resolutions in practice; the inbox keeps the reference's rule for them (a failure for a
    // stale generation is dropped, never epoch death). records_dropped{stale_singleton} has no
    // source in lanemux and is not asserted.
    const h = egress();
    const first = await openSlot(h);
    offerFinalized(h, first.slot);
    await h.runtime.runMacrotasks();
    const again = await openSlot(h);
    expect(again.slot.index).toBe(first.slot.index);
    expect(again.slot.id).not.toBe(first.slot.id);
    expect(h.batcher.inbox.postResolution(first.slot.id, false, 'rendezvous refused')).toBe(true);
    await h.runtime.runMacrotasks();
    expect(h.metrics.epochDeaths).toBe(0);
    expect(again.slot.closed).toBe(false);
    const mark = h.sink.sent.length;
    grant(h, again.slot, 2);
    offerItems(h, again.slot, ['a', 'b']);
    await h.runtime.runMacrotasks();
    expect(itemsOf(h, again.slot.id, mark)).toEqual(['"a"', '"b"']);
    // Contrast: the same failure for the live generation is epoch death.
    h.batcher.inbox.postResolution(again.slot.id, false, 'rendezvous refused');
    await h.runtime.runMacrotasks();
    expect(h.metrics.epochDeaths).toBe(1);
  });

  it('CTRL-04 epoch death with 3 live slots: epoch_deaths = 1, each producer fails exactly once, live_slots = 0, the freed indices are reused', async () => {
    const h = egress();
    const opened = await openSlots(h, 3);
    grant(h, opened[0]!.slot, 1);
    await h.runtime.runMacrotasks();
    h.sink.mode = 'refuse';
    offerItems(h, opened[0]!.slot, ['doomed']);
    await h.runtime.runMacrotasks();
    expect(h.metrics.epochDeaths).toBe(1);
    for (const { owner, slot } of opened) {
      expect(owner.closed).toHaveLength(1);
      expect(owner.closed[0]?.code).toBe('ERR_EPOCH_DEATH');
      expect(slot.closed).toBe(true);
      expect(offerItems(h, slot, ['x'])).toEqual([2]); // Offer.Closed
    }
    expect(h.batcher.liveSlots).toBe(0);
    expect(h.metrics.liveSlots).toBe(0);
    await h.runtime.advance(100);
    for (const { owner } of opened) expect(owner.closed).toHaveLength(1);
    h.sink.mode = 'open';
    const reopened = await openSlots(h, 3);
    expect(new Set(reopened.map((o) => o.slot.index))).toEqual(new Set(opened.map((o) => o.slot.index)));
    // docs/protocol.md §10.2: the free list is LIFO (slots were closed in index order 0, 1, 2).
    expect(reopened.map((o) => o.slot.index)).toEqual([2, 1, 0]);
    expect(reopened.every((o) => (o.slot.id & 0xff) === 1)).toBe(true);
    expect(h.batcher.liveSlots).toBe(3);
  });

  it('CTRL-05 after epoch death the same index reopens at generation + 1, with a greater epoch and batch_seq 0', async () => {
    const h = egress();
    const { slot } = await openSlot(h, 1);
    const deadEpoch = h.batcher.epoch;
    h.sink.mode = 'refuse';
    offerItems(h, slot, ['x']);
    await h.runtime.runMacrotasks();
    expect(h.metrics.epochDeaths).toBe(1);
    expect(h.batcher.epoch).toBeGreaterThan(deadEpoch);
    expect(h.batcher.batchSeq).toBe(0);
    h.sink.mode = 'open';
    const mark = h.sink.sent.length;
    const again = await openSlot(h);
    expect(again.slot.id).toBe(sid(slot.index, 1));
    const [b] = batches(h, mark);
    expect(b!.header!.epoch).toBeGreaterThan(deadEpoch);
    expect(b!.header!.batchSeq).toBe(0);
    expect(b!.records.map((r) => [r.type, r.slot, r.frameSeq])).toEqual([[RecordType.OpenSlot, sid(slot.index, 1), 0]]);
  });

  describe('CTRL-06', () => {
    const nodes: LanemuxNode[] = [];
    afterEach(async () => {
      for (const n of nodes.splice(0)) await n.close();
    });

    it('CTRL-06 cancelling the transport closes every producer channel', async () => {
      // lanemux equivalent: the producer's channel is its StreamSender over the slot. Cancelling the
      // transport (the connection dies: both sides see the peer gone) fails every sender.
      const runtime = new ManualRuntime();
      const [ma, mb] = LoopMessenger.pair();
      const consumer = await createNode({ messenger: ma, runtime, mux: { initialCredit: 4 } });
      const producer = await createNode({ messenger: mb, runtime, mux: { initialCredit: 4 } });
      nodes.push(consumer, producer);
      const anchors = [
        consumer.createAnchor<string>(),
        consumer.createAnchor<string>(),
        consumer.createAnchor<string>(),
      ];
      const senders = [];
      for (const a of anchors) senders.push(await producer.attachAnchor<string>(a.handle));
      await runtime.runMacrotasks();
      for (const s of senders) await s.send('hi');
      await runtime.runMacrotasks();
      expect(producer.metricsRegistry.liveSlots).toBe(3);
      mb.kill();
      await runtime.runMacrotasks();
      for (const s of senders) {
        expect(s.closed).toBe(true);
        expect(s.cancelSignal.aborted).toBe(true);
        await expect(s.send('after')).rejects.toBeDefined();
      }
      expect(producer.metricsRegistry.liveSlots).toBe(0);
    });

    it('CTRL-06 (batcher) cancelling a batcher closes every slot once and fails its producers', async () => {
      const h = egress();
      const opened = await openSlots(h, 4);
      h.batcher.retire(new MuxError('ERR_CLOSED', 'transport cancelled'));
      for (const { slot, owner } of opened) {
        expect(slot.closed).toBe(true);
        expect(owner.closed.map((e) => e?.code)).toEqual(['ERR_CLOSED']);
        await expect(slot.waitWritable()).rejects.toMatchObject({ code: 'ERR_CLOSED' });
      }
      expect(h.metrics.liveSlots).toBe(0);
    });
  });

  it('CTRL-07 a cancelled batcher is unregistered before it refuses any reply: in 64 attempts no reply is refused while it is still registered', async () => {
    // JS is single-threaded: retirement and unregistration happen in one synchronous sweep step,
    // so the race the reference guards against cannot interleave. The test drives 64 evictions
    // with replies posted around each one and checks the registered batcher never refuses.
    const p = muxPair({ creditSweepInterval: 10, batcherIdleTtl: 10, replyLinger: 0 });
    const peerB = p.mb.self.id;
    // B has sent A one batch, so A holds an ingress table for B and its sweep keeps ticking.
    p.mb.sendBatch(p.ma.self.id, 0, encodeBatch(1n, 0, []));
    await p.runtime.runMacrotasks();
    let posted = 0;
    let evictions = 0;
    let last = p.a.batcherFor(peerB, 0);
    for (let attempt = 0; attempt < 64; attempt++) {
      for (let step = 0; step < 3; step++) {
        const registered = p.a.batcherFor(peerB, 0);
        if (registered !== last) {
          expect(last.retired).toBe(true);
          expect(last.inbox.postReplyCredit(sid(0, 0), 1)).toBe(false); // refuses only once unregistered
          evictions++;
          last = registered;
        }
        expect(registered.retired).toBe(false);
        expect(registered.inbox.closed).toBe(false);
        p.a.replyCredit(peerB, 0, sid(attempt, step), 1);
        posted++;
        await p.runtime.advance(attempt % 7);
      }
      await p.runtime.advance(21 + (attempt % 5));
    }
    await p.runtime.advance(50);
    expect(evictions).toBeGreaterThanOrEqual(60);
    expect(p.metricsA.creditLost).toBe(0);
    const credits = loopWire(p.ma)
      .flatMap((b) => b.records)
      .filter((r) => r.type === RecordType.CreditUpdate);
    expect(credits.reduce((a, r) => a + (r.creditDelta ?? 0), 0)).toBe(posted);
  });

  it('CTRL-07 (eviction) a batcher created after the sweep went quiet is still evicted once idle', async () => {
    // A batcher is evictable after batcher_idle_ttl with no live slots. The sweep stops
    // ticking when the node has no work; creating a batcher must restart it.
    const p = muxPair({ creditSweepInterval: 10, batcherIdleTtl: 10 });
    const peerB = p.mb.self.id;
    const first = p.a.batcherFor(peerB, 0);
    await p.runtime.advance(50);
    expect(first.retired).toBe(true);
    const second = p.a.batcherFor(peerB, 0);
    expect(second).not.toBe(first);
    await p.runtime.advance(100);
    expect(second.retired).toBe(true);
  });

  it('CTRL-07 (sweep) a producer that opens its first stream after its sweep went quiet still heartbeats, so an idle healthy stream survives the consumer watchdog', async () => {
    // Same root cause as the eviction test above: the producer's sweep (which sends heartbeats and
    // runs health checks) is not restarted by opening a slot.
    const runtime = new ManualRuntime();
    const [ma, mb] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: ma, runtime, mux: { initialCredit: 4 } });
    const producer = await createNode({ messenger: mb, runtime, mux: { initialCredit: 4 } });
    try {
      await runtime.advance(1_000); // both nodes idle: their sweeps go quiet
      const anchor = consumer.createAnchor<string>();
      const sender = await producer.attachAnchor<string>(anchor.handle);
      await sender.send('x');
      await runtime.advance(10);
      expect((await anchor.next()).value).toBe('x');
      let outcome = 'pending';
      void anchor.next().then(
        () => (outcome = 'value'),
        (e: { code: string }) => (outcome = e.code),
      );
      await runtime.advance(30_000); // 6 heartbeat windows of 5 s with nothing to say
      expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
      expect(outcome).toBe('pending');
      expect(sender.closed).toBe(false);
    } finally {
      await consumer.close();
      await producer.close();
    }
  });

  it('CTRL-08 credit refused with a discarded batch reaches the replacement: credit_reposted = 7, credit_lost = 0, and CreditUpdate{slot, 7} goes out exactly once', async () => {
    // lanemux equivalent: the batch carrying the credit reply is refused at admission (epoch death);
    // the batcher re-posts the reply to its inbox and the new epoch (the replacement) writes it.
    const h = egress({ replyLinger: 0 });
    h.sink.mode = 'stall';
    h.batcher.inbox.postReplyCredit(sid(12, 4), 7);
    await h.runtime.runMacrotasks();
    expect(h.batcher.parked).toBe(true);
    const oldEpoch = h.batcher.epoch;
    const mark = h.sink.sent.length;
    h.sink.mode = 'open';
    h.sink.refuseStalled();
    await h.runtime.advance(10);
    expect(h.metrics.epochDeaths).toBe(1);
    expect(h.metrics.creditReposted).toBe(7);
    expect(h.metrics.creditLost).toBe(0);
    const sent = batches(h, mark);
    const credits = sent.flatMap((b) => b.records).filter((r) => r.type === RecordType.CreditUpdate);
    expect(credits.map((r) => [r.slot, r.creditDelta])).toEqual([[sid(12, 4), 7]]);
    expect(sent[0]!.header!.epoch).toBeGreaterThan(oldEpoch);
    expect(sent[0]!.header!.batchSeq).toBe(0);
  });

  it('CTRL-08 (retire) a retiring batcher hands back the credit replies it still held, for its replacement', async () => {
    const h = egress({ flushPolicy: { kind: 'manual' }, replyLinger: 1000 });
    h.batcher.inbox.postReplyCredit(sid(12, 4), 4);
    await h.runtime.runMacrotasks(); // staged in the open batch
    h.batcher.inbox.postReplyCredit(sid(12, 4), 3); // still in the inbox
    const left = h.batcher.retire();
    const total = new Map<number, number>();
    for (let i = 0; i < left.credit.length; i += 2)
      total.set(left.credit[i]!, (total.get(left.credit[i]!) ?? 0) + left.credit[i + 1]!);
    expect(total).toEqual(new Map([[sid(12, 4), 7]]));
    expect(h.sink.sent).toEqual([]);
  });
});
