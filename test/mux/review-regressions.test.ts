// Regressions from the code review of the mux: each test failed on the code before its fix.
import { describe, expect, it } from 'vitest';
import { MuxError } from '../../src/mux/errors.ts';
import { CloseReason } from '../../src/wire/constants.ts';
import { IngressHarness, RecordType, egress, label, openSlot, read, rec, records, sid } from './harness.ts';

const noop = { onSlotClosed() {}, onLifecycle() {}, onRetired() {} };

describe('review regressions: egress batcher', () => {
  it('a post made to the inbox from an owner callback during a wake is still written', async () => {
    const h = egress({ replyLinger: 1 });
    const a = await openSlot(h, 4);
    // The producer's cancel listener cancels a consumer anchor fed by the same peer and lane:
    // its CloseSlot reply goes to this very batcher, during its wake.
    a.owner.onSlotClosed = () => {
      h.batcher.inbox.postReplyClose(sid(77, 0), CloseReason.UnknownSlot);
    };
    h.batcher.inbox.postClose(a.slot.id, CloseReason.UnknownSlot);
    await h.runtime.advance(100);
    h.batcher.inbox.postReplyCredit(sid(78, 0), 5);
    await h.runtime.advance(100);
    const wire = records(h).filter((r) => r.type !== RecordType.OpenSlot).map((r) => label(r, true));
    expect(wire).toEqual(['77.0:Close(UnknownSlot)@0', '78.0:Credit+5']);
    expect(h.batcher.inbox.pending).toBe(false);
  });

  it('replies posted while parked are written after the parked batch is refused (epoch death re-wakes)', async () => {
    const h = egress({ replyLinger: 0 });
    h.sink.mode = 'stall';
    h.batcher.inbox.postReplyCredit(sid(1, 0), 1);
    await h.runtime.advance(1);
    expect(h.sink.stalledCount).toBe(1);
    h.batcher.inbox.postReplyCredit(sid(2, 0), 2);
    await h.runtime.advance(1);
    h.sink.mode = 'open';
    h.sink.refuseStalled();
    await h.runtime.advance(10);
    const later = records(h, 1).map((r) => label(r, true)).sort();
    expect(later).toEqual(['1.0:Credit+1', '2.0:Credit+2']);
    expect(h.metrics.creditLost).toBe(0);
    expect(h.metrics.creditReposted).toBe(1);
  });

  it('an open made from an owner callback during epoch death does not leave the batcher parked', async () => {
    const h = egress();
    const a = await openSlot(h, 4);
    let reopened: Promise<unknown> | null = null;
    a.owner.onSlotClosed = () => {
      reopened ??= h.batcher.openSlot(99n, 199n, 4, noop);
    };
    h.sink.mode = 'stall';
    h.batcher.epochDeath(new MuxError('ERR_EPOCH_DEATH', 'test'));
    h.sink.release();
    await h.runtime.advance(100);
    await expect(reopened).resolves.toBeDefined();
    expect(h.batcher.parked).toBe(false);
    let acked = false;
    void h.batcher.openSlot(100n, 200n, 4, noop).then(() => (acked = true));
    await h.runtime.advance(100);
    expect(acked).toBe(true);
  });

  it('2,200 opens queued behind a parked write all go out (in batches that fit) and all ack', async () => {
    const h = egress();
    h.sink.mode = 'stall';
    const acks = Array.from({ length: 2200 }, (_, i) => h.batcher.openSlot(BigInt(1000 + i), BigInt(5000 + i), 4, noop));
    h.sink.release();
    await h.runtime.advance(100);
    const slots = await Promise.all(acks);
    expect(slots).toHaveLength(2200);
    expect(h.batcher.liveSlots).toBe(2200);
    expect(records(h).filter((r) => r.type === RecordType.OpenSlot)).toHaveLength(2200);
    for (const p of h.sink.sent) expect(p.payload.byteLength).toBeLessThanOrEqual(h.batcher.cap);
  });

  it('replies overflowing a batch while parked never put a second batch in flight', async () => {
    const h = egress({ maxBatchBytes: 128, replyLinger: 0 });
    h.sink.mode = 'stall';
    for (let i = 0; i < 20; i++) h.batcher.inbox.postReplyCredit(sid(10 + i, 0), 1);
    await h.runtime.advance(10);
    expect(h.sink.stalledCount).toBe(1);
    h.sink.release();
    await h.runtime.advance(10);
    const credited = records(h).filter((r) => r.type === RecordType.CreditUpdate).map((r) => r.slot);
    expect(new Set(credited)).toEqual(new Set(Array.from({ length: 20 }, (_, i) => sid(10 + i, 0))));
  });
});

describe('review regressions: ingress', () => {
  it('a duplicate ahead-of-sequence record is dropped as a duplicate, not admitted twice', () => {
    const h = new IngressHarness({ C: 4, slotBudget: 256, peerBudget: 4096 });
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 2, 'a'.repeat(40)));
    h.send(rec.item(id, 2, 'b'.repeat(40)));
    h.send(rec.item(id, 1, 'x'));
    expect(read(b)).toEqual(['x', 'a'.repeat(40)]);
    expect(h.peerBudget.used).toBe(0);
    expect(h.metrics.heldRecords).toBe(0);
    expect(h.metrics.recordsDropped[7]).toBe(1); // duplicate
    h.table.sweep(); // reconcile: both taken records return their credit
    expect(b.slot!.account.dataOutstanding).toBe(0);
    expect(b.slot!.account.remaining).toBe(4);
  });
});

describe('open queue depth', () => {
  it('at most 64 opens wait behind a parked write; later opens wait for room, then all ack in order', async () => {
    const { OPEN_QUEUE_DEPTH } = await import('../../src/mux/batcher.ts');
    const h = egress();
    h.sink.mode = 'stall';
    const first = h.batcher.openSlot(1n, 1n, 4, noop); // parks on its own OpenSlot batch
    const acks = Array.from({ length: 200 }, (_, i) => h.batcher.openSlot(BigInt(10 + i), BigInt(10 + i), 4, noop));
    await h.runtime.runMacrotasks();
    expect(h.batcher.liveSlots).toBe(1 + OPEN_QUEUE_DEPTH); // the rest did not allocate yet
    h.sink.release();
    await h.runtime.advance(100);
    const slots = await Promise.all([first, ...acks]);
    expect(slots).toHaveLength(201);
    const opened = records(h).filter((r) => r.type === RecordType.OpenSlot).map((r) => r.slot);
    expect(new Set(opened)).toEqual(new Set(slots.map((s) => s.id)));
  });
});
