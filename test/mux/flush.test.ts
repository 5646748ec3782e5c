/**
 * Flush policy (FLUSH-*) (C = 4,096: slots open holding 4,096 credits).
 */
import { describe, expect, it } from 'vitest';
import type { MuxConfig } from '../../src/mux/config.ts';
import { CloseReason } from '../../src/wire/constants.ts';
import {
  EgressKind,
  Offer,
  RecordType,
  batches,
  dataOf,
  egress,
  label,
  offerFinalized,
  offerItems,
  openSlot,
  openSlots,
  records,
  sid,
  tokens,
  wire,
} from './harness.ts';

const C = 4096;
const MANUAL: MuxConfig = { flushPolicy: { kind: 'manual' } };

describe('F. Flush policy (C = 4,096)', () => {
  it('FLUSH-01 Manual, 16 slots × 1 record: nothing is written for 200 ms; one flush_batch() writes exactly one batch of 16 and staged_records returns to 0', async () => {
    const h = egress(MANUAL);
    const opened = await openSlots(h, 16, C);
    const mark = h.sink.sent.length;
    for (const { slot } of opened) offerItems(h, slot, [`s${slot.index}`]);
    await h.runtime.advance(200);
    expect(h.sink.sent.length).toBe(mark);
    expect(h.batcher.staged).toBe(16);
    const gaugeBefore = h.metrics.stagedRecords;
    h.batcher.kick();
    const sent = batches(h, mark);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.records).toHaveLength(16);
    expect(new Set(sent[0]!.records.map((r) => r.slot)).size).toBe(16);
    expect(h.batcher.staged).toBe(0);
    await h.runtime.advance(200);
    expect(h.sink.sent.length).toBe(mark + 1);
    // The staged_records gauge read 16 while the records waited and returns to 0.
    expect([gaugeBefore, h.metrics.stagedRecords]).toEqual([16, 0]);
  });

  it("FLUSH-02 a record queued between the batcher's drain and the kick still goes in that batch, which carries both A and B", async () => {
    // Manual: the batcher's wake has drained A before B arrives; the kick writes both.
    const h = egress(MANUAL);
    const a = await openSlot(h, C);
    const b = await openSlot(h, C);
    const mark = h.sink.sent.length;
    offerItems(h, a.slot, ['A']);
    await h.runtime.runMacrotasks(); // the wake that drained A
    offerItems(h, b.slot, ['B']);
    h.batcher.kick();
    expect(wire(h, mark)).toEqual([['"A"@1', '"B"@1']]);
    // Auto: B lands after A's wake was scheduled but before it ran; the kick takes both, and the
    // scheduled wake then finds nothing to write.
    const g = egress();
    const ga = await openSlot(g, C);
    const gb = await openSlot(g, C);
    const m2 = g.sink.sent.length;
    offerItems(g, ga.slot, ['A']);
    offerItems(g, gb.slot, ['B']);
    g.batcher.kick();
    await g.runtime.advance(10);
    expect(wire(g, m2)).toEqual([['"A"@1', '"B"@1']]);
  });

  it('FLUSH-03 Manual has no timer: 4 staged records stay unwritten for 1 s, and staged_records = 4', async () => {
    const h = egress(MANUAL);
    const { slot } = await openSlot(h, C);
    const mark = h.sink.sent.length;
    offerItems(h, slot, tokens(4));
    await h.runtime.advance(1000);
    expect(h.sink.sent.length).toBe(mark);
    expect(h.batcher.staged).toBe(4);
    expect(h.runtime.timerCount).toBe(0);
    expect(h.metrics.stagedRecords).toBe(4);
  });

  it('FLUSH-04 ten kicks with nothing staged write no batch', async () => {
    const h = egress(MANUAL);
    await openSlot(h, C);
    const mark = h.sink.sent.length;
    const seq = h.batcher.batchSeq;
    for (let i = 0; i < 10; i++) {
      h.batcher.kick();
      h.batcher.inbox.kick();
      await h.runtime.runMacrotasks();
    }
    await h.runtime.advance(100);
    expect(h.sink.sent.length).toBe(mark);
    expect(h.batcher.batchSeq).toBe(seq);
    expect(h.metrics.batchesSent).toBe(mark);
  });

  it('FLUSH-05 Manual with reply_linger 50 ms: CreditUpdate{(7, 0), 32} is written within 200 ms without a kick', async () => {
    const h = egress({ ...MANUAL, replyLinger: 50 });
    h.batcher.inbox.postReplyCredit(sid(7, 0), 32);
    await h.runtime.advance(200);
    expect(h.sink.sent).toHaveLength(1);
    expect(h.sink.sent[0]!.at).toBe(50);
    expect(h.sink.sent[0]!.decoded.records.map((r) => [r.type, r.slot, r.frameSeq, r.creditDelta])).toEqual([
      [RecordType.CreditUpdate, sid(7, 0), 0, 32],
    ]);
  });

  it('FLUSH-06 Manual: a credit reply that joins staged data keeps its window, and both go out when the window ends', async () => {
    const h = egress({ ...MANUAL, replyLinger: 50 });
    const { slot } = await openSlot(h, C);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['data']);
    await h.runtime.advance(10);
    h.batcher.inbox.postReplyCredit(sid(7, 0), 5);
    await h.runtime.advance(49); // t = 59
    expect(h.sink.sent.length).toBe(mark);
    await h.runtime.advance(1); // t = 60: the reply's window ends
    expect(wire(h, mark, true)).toEqual([['0.0:"data"@1', '7.0:Credit+5']]);
    expect(h.sink.sent[mark]!.at).toBe(60);
  });

  it('FLUSH-07 Manual: a close reply is written without a kick', async () => {
    const h = egress(MANUAL);
    h.batcher.inbox.postReplyClose(sid(3, 2), CloseReason.UnknownSlot);
    await h.runtime.runMacrotasks();
    expect(wire(h, 0, true)).toEqual([['3.2:Close(UnknownSlot)@0']]);
    expect(h.sink.sent[0]!.at).toBe(0);
  });

  it('FLUSH-08 Manual: a terminal and its close are written without a kick, in one batch [Data, Data(Finalized), CloseSlot]', async () => {
    const h = egress(MANUAL);
    const { slot } = await openSlot(h, C);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['last']);
    await h.runtime.runMacrotasks();
    expect(h.sink.sent.length).toBe(mark);
    offerFinalized(h, slot);
    await h.runtime.runMacrotasks();
    expect(wire(h, mark)).toEqual([['"last"@1', 'Finalized@2', 'Close(TerminalSent)@3']]);
  });

  it('FLUSH-09 Manual, cap 1,024 bytes, 256 records: the first batch (≤ 1,024 bytes) is written unasked; the rest goes on the flush', async () => {
    const h = egress({ ...MANUAL, maxBatchBytes: 1024 });
    const { slot } = await openSlot(h, C);
    const mark = h.sink.sent.length;
    const items = tokens(256, 'r');
    offerItems(h, slot, items);
    await h.runtime.advance(100);
    const unasked = h.sink.sent.slice(mark);
    expect(unasked.length).toBeGreaterThanOrEqual(1);
    for (const b of unasked) {
      expect(b.payload.byteLength).toBeLessThanOrEqual(1024);
      // Cut at the clamp: the fit check reserves an upper bound of the next string item's UTF-8
      // length (6 + 5 + 3 × chars = 23 bytes here), so a batch may close up to that much early.
      expect(b.payload.byteLength).toBeGreaterThan(1024 - 13 - 23);
    }
    expect(h.batcher.staged).toBeGreaterThan(0);
    const before = h.sink.sent.length;
    h.batcher.kick();
    expect(h.sink.sent.length).toBe(before + 1);
    expect(h.sink.sent[before]!.payload.byteLength).toBeLessThanOrEqual(1024);
    expect(dataOf(h, slot.id, mark).map((r) => r.frameSeq)).toEqual(Array.from({ length: 256 }, (_, i) => i + 1));
    expect(h.batcher.staged).toBe(0);
  });

  it('FLUSH-10 Auto{on_admission: false, max_linger: 30 s}: a kick writes the batch before the window elapses', async () => {
    const h = egress({ flushPolicy: { kind: 'auto', onAdmission: false, maxLinger: 30_000 } });
    const { slot } = await openSlot(h, C);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['a', 'b']);
    await h.runtime.advance(100);
    expect(h.sink.sent.length).toBe(mark);
    h.batcher.kick();
    expect(wire(h, mark)).toEqual([['"a"@1', '"b"@2']]);
    expect(h.sink.sent[mark]!.at).toBe(100);
  });

  it('FLUSH-11 Auto with max_linger 50 ms writes a batch of 3 without a kick', async () => {
    const h = egress({ flushPolicy: { kind: 'auto', onAdmission: false, maxLinger: 50 } });
    const { slot } = await openSlot(h, C);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['a', 'b', 'c']);
    await h.runtime.advance(49);
    expect(h.sink.sent.length).toBe(mark);
    await h.runtime.advance(1);
    expect(wire(h, mark)).toEqual([['"a"@1', '"b"@2', '"c"@3']]);
    expect(h.sink.sent[mark]!.at).toBe(50);
  });

  it('FLUSH-12 120 records and repeated kicks while parked on admission: the wire carries frame_seqs exactly 1..120, no early batch, duplicate or reordering', async () => {
    const h = egress(MANUAL);
    const { slot } = await openSlot(h, C);
    const mark = h.sink.sent.length;
    h.sink.mode = 'stall';
    const items = tokens(120);
    let done = false;
    const producer = (async () => {
      for (let i = 0; i < items.length; i++) {
        const r = h.batcher.offer(slot, EgressKind.ItemString, items[i]!);
        if (r === Offer.Closed) throw new Error('closed');
        if (i % 10 === 9) h.batcher.kick();
        if (r === Offer.Wait) await slot.waitWritable();
      }
      h.batcher.kick();
      done = true;
    })();
    // No early batch: the first write is exactly the first kick's ten records.
    const first = h.sink.sent[mark]!.decoded.records.map((r) => r.frameSeq);
    expect(first).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    for (
      let round = 0;
      round < 200 && !(done && h.batcher.staged === 0 && !h.batcher.parked && slot.queued === 0);
      round++
    ) {
      await h.runtime.runMacrotasks();
      h.batcher.kick(); // kicks while parked
      h.batcher.kick();
      h.sink.admitStalled();
      await h.runtime.runMacrotasks();
    }
    h.sink.release();
    await producer;
    h.batcher.kick();
    await h.runtime.advance(10);
    const seqs = records(h, mark).map((r) => r.frameSeq);
    expect(seqs).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
    expect(records(h, mark).map((r) => label(r))).toEqual(items.map((t, i) => `"${t}"@${i + 1}`));
  });

  it('FLUSH-13 Auto with on_complete writes once every live slot has a record in the batch: a slot counts once however many it stages, and each batch counts afresh', async () => {
    const h = egress({ flushPolicy: { kind: 'auto', onAdmission: false, maxLinger: 50, onComplete: true } });
    const [a, b] = await openSlots(h, 2, C);
    for (const batch of [1, 2]) {
      // The linger since the last write has passed, so only the slots with data hold the batch back.
      await h.runtime.advance(60);
      const mark = h.sink.sent.length;
      offerItems(h, a!.slot, [`A${batch}a`, `A${batch}b`]);
      await h.runtime.runMacrotasks();
      expect(wire(h, mark)).toEqual([]);
      offerItems(h, b!.slot, [`B${batch}`]);
      await h.runtime.runMacrotasks();
      const s = 2 * batch - 1;
      expect(wire(h, mark)).toEqual([[`"A${batch}a"@${s}`, `"A${batch}b"@${s + 1}`, `"B${batch}"@${batch}`]]);
    }
  });
});
