/**
 * The control inbox (INBOX-*) (coalesced state, not a queue).
 *
 * Most lines are pinned on a standalone ControlInbox; where the statement is about what the
 * batcher does with a drained entry, the test drives a Batcher and reads the wire.
 */
import { describe, expect, it } from 'vitest';
import { MAX_CREDIT } from '../../src/credit/constants.ts';
import { ControlInbox, MAX_PENDING_REJECTS } from '../../src/mux/control-inbox.ts';
import { CloseReason } from '../../src/wire/constants.ts';
import {
  RecordType,
  egress,
  grant,
  muxPair,
  offerFinalized,
  offerItems,
  openSlot,
  openSlots,
  records,
  sid,
  tokens,
  wire,
} from './harness.ts';

/** A standalone inbox that counts its notify permits. */
function inbox(): { box: ControlInbox; notes: () => number } {
  const box = new ControlInbox();
  let n = 0;
  box.onNotify = () => {
    n++;
  };
  return { box, notes: () => n };
}

describe('J. Control inbox', () => {
  it('INBOX-01 after an index is reused at a new generation, a lifecycle signal with the old session is ignored; for one session, cancel beats stop', async () => {
    const h = egress();
    const first = await openSlot(h, 0, 0xa1n, 0x5001n);
    offerFinalized(h, first.slot);
    await h.runtime.runMacrotasks();
    const second = await openSlot(h, 0, 0xa2n, 0x5002n);
    expect(second.slot.id).toBe(sid(first.slot.index, 1));
    // The old SlotId (stale generation) and the new SlotId with the old session: both ignored.
    expect(h.batcher.inbox.postLifecycle(first.slot.id, 0x5001n, true)).toBe(true);
    expect(h.batcher.inbox.postLifecycle(second.slot.id, 0x5001n, true)).toBe(true);
    await h.runtime.runMacrotasks();
    expect(second.owner.lifecycle).toEqual([]);
    // Reuse the index until its u8 generation wraps: the SlotId is the first one again, and a
    // signal carrying the first session is still ignored.
    offerFinalized(h, second.slot);
    await h.runtime.runMacrotasks();
    let last = second;
    for (let g = 2; g <= 256; g++) {
      last = await openSlot(h, 0, 0xb0n + BigInt(g), 0x6000n + BigInt(g));
      if (g < 256) {
        offerFinalized(h, last.slot);
        await h.runtime.runMacrotasks();
      }
    }
    expect(last.slot.id).toBe(first.slot.id);
    h.batcher.inbox.postLifecycle(last.slot.id, 0x5001n, true);
    await h.runtime.runMacrotasks();
    expect(last.owner.lifecycle).toEqual([]);
    // One session: stop, cancel, stop → one cancel.
    const session = last.slot.sessionId;
    h.batcher.inbox.postLifecycle(last.slot.id, session, false);
    h.batcher.inbox.postLifecycle(last.slot.id, session, true);
    h.batcher.inbox.postLifecycle(last.slot.id, session, false);
    await h.runtime.runMacrotasks();
    expect(last.owner.lifecycle).toEqual([true]);
  });

  it('INBOX-02 lifecycle replies (11: stop, 12: stop, 11: cancel, 11: stop) coalesce to {11: cancel, 12: stop}', async () => {
    const { box } = inbox();
    const s = 0x77n;
    box.postReplyLifecycle(sid(11), s, false);
    box.postReplyLifecycle(sid(12), s, false);
    box.postReplyLifecycle(sid(11), s, true);
    box.postReplyLifecycle(sid(11), s, false);
    expect([...box.drain().lifecycleReplies.values()]).toEqual([
      { slot: sid(11), session: s, cancel: true },
      { slot: sid(12), session: s, cancel: false },
    ]);
    // On the wire, through a batcher.
    const h = egress();
    h.batcher.inbox.postReplyLifecycle(sid(11), s, false);
    h.batcher.inbox.postReplyLifecycle(sid(12), s, false);
    h.batcher.inbox.postReplyLifecycle(sid(11), s, true);
    h.batcher.inbox.postReplyLifecycle(sid(11), s, false);
    await h.runtime.runMacrotasks();
    expect(wire(h, 0, true)).toEqual([['11.0:Cancel', '12.0:Stop']]);
    expect(records(h).every((r) => r.sessionId === s && r.frameSeq === 0)).toBe(true);
  });

  it('INBOX-03 10,000 grants to one slot coalesce into one entry of 10,000', () => {
    const { box, notes } = inbox();
    box.publish(0, 0);
    for (let i = 0; i < 10_000; i++) expect(box.postCredit(sid(0), 1)).toBe(true);
    expect(box.size).toBe(1);
    expect(notes()).toBe(1);
    const d = box.drain();
    expect([...d.owned.entries()]).toEqual([
      [sid(0), { slot: sid(0), credit: 10_000, close: -1, resolution: 0, resolutionError: '', resolutionId: 0 }],
    ]);
  });

  it('INBOX-04 coalesced credit saturates at the wire limit: (2^32−2) + 2 → 2^32−1, for owned slots and for replies', async () => {
    const { box } = inbox();
    box.publish(1, 0);
    box.postCredit(sid(1), MAX_CREDIT - 1);
    box.postCredit(sid(1), 2);
    box.postReplyCredit(sid(2), MAX_CREDIT - 1);
    box.postReplyCredit(sid(2), 2);
    const d = box.drain();
    expect(d.owned.get(sid(1))?.credit).toBe(0xffff_ffff);
    expect(d.replies.get(sid(2))?.credit).toBe(0xffff_ffff);
    // The reply goes on the wire as a u32 at the limit, never wrapped.
    const h = egress({ replyLinger: 0 });
    h.batcher.inbox.postReplyCredit(sid(2), MAX_CREDIT - 1);
    h.batcher.inbox.postReplyCredit(sid(2), 2);
    await h.runtime.runMacrotasks();
    expect(records(h).map((r) => r.creditDelta)).toEqual([0xffff_ffff]);
  });

  it('INBOX-05 a close dominates and the first reason wins: after UnknownSlot then ProtocolError the entry keeps UnknownSlot; its credit total (10) is still recorded', async () => {
    const { box } = inbox();
    box.publish(2, 0);
    box.postCredit(sid(2), 4);
    box.postClose(sid(2), CloseReason.UnknownSlot);
    box.postCredit(sid(2), 6);
    box.postClose(sid(2), CloseReason.ProtocolError);
    const e = box.drain().owned.get(sid(2));
    expect(e?.close).toBe(CloseReason.UnknownSlot);
    expect(e?.credit).toBe(10);
    // The batcher applies the close, not the credit: nothing withheld is released.
    const h = egress();
    const { slot, owner } = await openSlot(h);
    const mark = h.sink.sent.length;
    offerItems(h, slot, tokens(3));
    grant(h, slot, 4);
    h.batcher.inbox.postClose(slot.id, CloseReason.UnknownSlot);
    grant(h, slot, 6);
    h.batcher.inbox.postClose(slot.id, CloseReason.ProtocolError);
    await h.runtime.runMacrotasks();
    expect(owner.closed.map((x) => x?.code)).toEqual(['ERR_UNKNOWN_SLOT']);
    expect(records(h, mark).filter((r) => r.type === RecordType.Data)).toEqual([]);
  });

  it('INBOX-06 a failed singleton resolution survives later successful ones: the entry reads failure, with its error text', () => {
    const { box } = inbox();
    box.publish(3, 0);
    box.postResolution(sid(3), false, 'first failure');
    box.postResolution(sid(3), true);
    box.postResolution(sid(3), false, 'second failure');
    box.postResolution(sid(3), true);
    const e = box.drain().owned.get(sid(3));
    expect(e?.resolution).toBe(2);
    expect(e?.resolutionError).toBe('first failure');
  });

  it('INBOX-07 a stale-generation key is dropped and never credits the live entry', async () => {
    const { box, notes } = inbox();
    box.publish(4, 1);
    expect(box.postCredit(sid(4, 0), 5)).toBe(true); // dropped silently
    expect(box.refused).toBe(0);
    expect(notes()).toBe(0);
    box.postCredit(sid(4, 1), 2);
    const d = box.drain();
    expect([...d.owned.keys()]).toEqual([sid(4, 1)]);
    expect(d.owned.get(sid(4, 1))?.credit).toBe(2);
    // Through the batcher: the live slot's ledger gets only the live grant.
    const h = egress();
    const a = await openSlot(h);
    offerFinalized(h, a.slot);
    await h.runtime.runMacrotasks();
    const b = await openSlot(h);
    expect(b.slot.index).toBe(a.slot.index);
    h.batcher.inbox.postCredit(a.slot.id, 5);
    h.batcher.inbox.postCredit(b.slot.id, 2);
    await h.runtime.runMacrotasks();
    expect(b.slot.ledger.dataAvailable).toBe(2);
  });

  it('INBOX-08 a grant for a slot that closed but has not been reopened is accepted', async () => {
    const h = egress();
    const { slot } = await openSlot(h);
    offerFinalized(h, slot);
    await h.runtime.runMacrotasks();
    expect(slot.closed).toBe(true);
    expect(h.batcher.inbox.postCredit(slot.id, 3)).toBe(true);
    expect(h.batcher.inbox.refused).toBe(0);
    const before = h.sink.sent.length;
    await h.runtime.runMacrotasks();
    expect(h.sink.sent.length).toBe(before);
    expect(h.metrics.epochDeaths).toBe(0);
  });

  it('INBOX-09 grants for an index never allocated are refused (refused = 2); grants to an allocated key merge: 41 + 1 = 42', async () => {
    const { box } = inbox();
    box.publish(0, 0);
    expect(box.postCredit(sid(5), 1)).toBe(false);
    expect(box.postCredit(sid(6), 1)).toBe(false);
    expect(box.refused).toBe(2);
    expect(box.postCredit(sid(0), 41)).toBe(true);
    expect(box.postCredit(sid(0), 1)).toBe(true);
    expect(box.drain().owned.get(sid(0))?.credit).toBe(42);
    // Through the mux, a refused grant is counted in control_refused_total.
    const p = muxPair();
    p.a.batcherFor(p.mb.self.id, 0);
    p.a.ownedCredit(p.mb.self.id, 0, sid(5), 1);
    p.a.ownedCredit(p.mb.self.id, 0, sid(6), 1);
    expect(p.metricsA.controlRefused).toBe(2);
  });

  it('INBOX-10 a peer with 5,000 live slots loses no grant: 5,000 grants, 0 refused', async () => {
    const h = egress();
    const opened = await openSlots(h, 5_000);
    for (const { slot } of opened) expect(grant(h, slot, 1)).toBe(true);
    expect(h.batcher.inbox.refused).toBe(0);
    await h.runtime.runMacrotasks();
    expect(opened.every(({ slot }) => slot.ledger.dataAvailable === 1)).toBe(true);
  });

  it("INBOX-11 replies for slots this side's ingress holds are never refused: 10,000 replies, 0 refused", async () => {
    const { box } = inbox();
    for (let i = 0; i < 10_000; i++) expect(box.postReplyCredit(sid(i, i & 0xff), 1)).toBe(true);
    expect(box.refused).toBe(0);
    expect(box.drain().replies.size).toBe(10_000);
    const h = egress({ replyLinger: 0 });
    for (let i = 0; i < 10_000; i++) h.batcher.inbox.postReplyCredit(sid(i), 1);
    await h.runtime.runMacrotasks();
    const credits = records(h).filter((r) => r.type === RecordType.CreditUpdate);
    expect(credits).toHaveLength(10_000);
    expect(new Set(credits.map((r) => r.slot)).size).toBe(10_000);
  });

  it('INBOX-12 one index reopened through all 256 generations leaves 256 separate reply entries', () => {
    const { box } = inbox();
    for (let g = 0; g < 256; g++) {
      box.postReplyCredit(sid(9, g), g + 1);
      box.postReplyClose(sid(9, g), CloseReason.UnknownSlot);
    }
    const d = box.drain();
    expect(d.replies.size).toBe(256);
    for (let g = 0; g < 256; g++)
      expect(d.replies.get(sid(9, g))).toEqual({ slot: sid(9, g), credit: g + 1, close: CloseReason.UnknownSlot });
  });

  it('INBOX-13 a flood of bogus open rejections is capped: 8,192 pending and 10,000 refused; a repeat of a pending key is not counted; grants are unaffected', () => {
    const { box } = inbox();
    box.publish(0, 0);
    let accepted = 0;
    for (let i = 0; i < 18_192; i++) if (box.postReject(sid(65_536 + i), CloseReason.ProtocolError)) accepted++;
    expect(MAX_PENDING_REJECTS).toBe(8_192);
    expect(accepted).toBe(8_192);
    expect(box.pendingRejects).toBe(8_192);
    expect(box.refused).toBe(10_000);
    expect(box.postReject(sid(65_536), CloseReason.ProtocolError)).toBe(true);
    expect(box.refused).toBe(10_000);
    expect(box.postCredit(sid(0), 3)).toBe(true);
    expect(box.postReplyCredit(sid(1), 3)).toBe(true);
    expect(box.postReplyClose(sid(2), CloseReason.UnknownSlot)).toBe(true);
    expect(box.refused).toBe(10_000);
    const d = box.drain();
    expect(d.rejects.size).toBe(8_192);
    expect(d.owned.get(sid(0))?.credit).toBe(3);
  });

  it('INBOX-14 a singleton resolution is never refused, even at the reject cap', () => {
    const { box } = inbox();
    box.publish(0, 0);
    for (let i = 0; i < 9_000; i++) box.postReject(sid(65_536 + i), CloseReason.ProtocolError);
    const refused = box.refused;
    expect(box.postResolution(sid(0), true)).toBe(true);
    expect(box.postResolution(sid(0), false, 'boom')).toBe(true);
    expect(box.refused).toBe(refused);
    expect(box.drain().owned.get(sid(0))?.resolution).toBe(2);
  });

  it('INBOX-15 resolutions alone never exhaust the grant lane', () => {
    const { box } = inbox();
    for (let i = 0; i < 100; i++) box.publish(i, 0);
    for (let k = 0; k < 10_000; k++) expect(box.postResolution(sid(k % 100), true)).toBe(true);
    for (let i = 0; i < 100; i++) expect(box.postCredit(sid(i), 1)).toBe(true);
    expect(box.refused).toBe(0);
    const d = box.drain();
    for (let i = 0; i < 100; i++) expect(d.owned.get(sid(i))).toMatchObject({ credit: 1, resolution: 1 });
  });

  it('INBOX-16 a thousand flush kicks are one bit', async () => {
    const { box, notes } = inbox();
    for (let i = 0; i < 1000; i++) box.kick();
    expect(notes()).toBe(1);
    expect(box.size).toBe(0);
    expect(box.drain().kicked).toBe(true);
    expect(box.drain().kicked).toBe(false);
    // A batcher under Manual: a thousand kicks write one batch.
    const h = egress({ flushPolicy: { kind: 'manual' } });
    const { slot } = await openSlot(h, 10);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['a', 'b']);
    for (let i = 0; i < 1000; i++) h.batcher.inbox.kick();
    await h.runtime.advance(10);
    expect(wire(h, mark)).toEqual([['"a"@1', '"b"@2']]);
  });

  it('INBOX-17 a flush kick wakes a parked batcher', async () => {
    // Parked waiting for work: the inbox kick alone wakes it and the staged batch is written.
    const h = egress({ flushPolicy: { kind: 'manual' } });
    const { slot } = await openSlot(h, 10);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['a']);
    await h.runtime.advance(100);
    expect(h.sink.sent.length).toBe(mark);
    h.batcher.inbox.kick();
    await h.runtime.runMacrotasks();
    expect(wire(h, mark)).toEqual([['"a"@1']]);
    // Parked on admission: a kick posted meanwhile is served once the admission resolves.
    const g = egress({ flushPolicy: { kind: 'manual' } });
    const s = await openSlot(g, 10);
    const m2 = g.sink.sent.length;
    g.sink.mode = 'stall';
    offerItems(g, s.slot, ['x']);
    g.batcher.kick();
    expect(g.batcher.parked).toBe(true);
    offerItems(g, s.slot, ['y', 'z']);
    g.batcher.inbox.kick();
    await g.runtime.advance(100);
    expect(g.sink.sent.length).toBe(m2 + 1);
    g.sink.release();
    await g.runtime.runMacrotasks();
    expect(wire(g, m2)).toEqual([['"x"@1'], ['"y"@2', '"z"@3']]);
  });

  it('INBOX-18 waiting returns at once for a change made before the wait began (no lost wakeup)', async () => {
    const { box } = inbox();
    box.publish(0, 0);
    box.postCredit(sid(0), 1);
    let woke = false;
    void box.wait().then(() => (woke = true));
    await Promise.resolve();
    expect(woke).toBe(true);
    // With nothing pending the wait blocks until the next post.
    box.drain();
    let later = false;
    void box.wait().then(() => (later = true));
    await Promise.resolve();
    await Promise.resolve();
    expect(later).toBe(false);
    box.kick();
    await Promise.resolve();
    expect(later).toBe(true);
  });

  it('INBOX-19 closing the inbox hands back everything that landed before the close and refuses everything after', async () => {
    const { box } = inbox();
    box.publish(0, 0);
    box.postCredit(sid(0), 7);
    box.postLifecycle(sid(0), 1n, true);
    box.postReplyCredit(sid(1), 2);
    box.postReplyClose(sid(2), CloseReason.UnknownSlot);
    box.postReplyLifecycle(sid(3), 9n, false);
    box.postReject(sid(70_000), CloseReason.ProtocolError);
    box.kick();
    let waiterWoke = false;
    const d = box.close();
    expect(d.kicked).toBe(true);
    expect(d.owned.get(sid(0))?.credit).toBe(7);
    expect([...d.ownedLifecycle.values()]).toEqual([{ slot: sid(0), session: 1n, cancel: true }]);
    expect(d.replies.get(sid(1))).toEqual({ slot: sid(1), credit: 2, close: -1 });
    expect(d.replies.get(sid(2))).toEqual({ slot: sid(2), credit: 0, close: CloseReason.UnknownSlot });
    expect([...d.lifecycleReplies.values()]).toEqual([{ slot: sid(3), session: 9n, cancel: false }]);
    expect([...d.rejects.entries()]).toEqual([[sid(70_000), CloseReason.ProtocolError]]);
    expect(box.closed).toBe(true);
    expect(box.postCredit(sid(0), 1)).toBe(false);
    expect(box.postClose(sid(0), CloseReason.UnknownSlot)).toBe(false);
    expect(box.postLifecycle(sid(0), 1n, false)).toBe(false);
    expect(box.postResolution(sid(0), true)).toBe(false);
    expect(box.postReplyCredit(sid(1), 1)).toBe(false);
    expect(box.postReplyClose(sid(1), CloseReason.UnknownSlot)).toBe(false);
    expect(box.postReplyLifecycle(sid(1), 1n, true)).toBe(false);
    expect(box.postReject(sid(70_001), CloseReason.ProtocolError)).toBe(false);
    box.kick();
    box.postRetire();
    expect(box.pending).toBe(false);
    expect(box.size).toBe(0);
    void box.wait().then(() => (waiterWoke = true));
    await Promise.resolve();
    expect(waiterWoke).toBe(true);
  });
});
