/**
 * Ingress behaviours (INGRESS-*) (C = 4, slot budget 256 B, peer budget 4,096 B).
 *
 * An IngressTable is driven directly with batches encoded by the real BatchEncoder; a fake host
 * records replies (credit, close, reject), owned-control forwards and doorbells, and serves binds.
 * The consumer side is the bind's C+1 buffer (`read()` takes records, which fires the drain signal).
 */
import { describe, expect, it, vi } from 'vitest';
import { CloseReason } from '../../src/wire/constants.ts';
import { FRAME_HEARTBEAT, FrameKind } from '../../src/wire/frame.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { IngressHarness, encodeBatch, muxPair, read, rec, sid } from './harness.ts';
import type { RecordingBindOwner } from './harness.ts';
import { hex } from '../wire/helpers.ts';

describe('C. Ingress (C = 4, slot budget 256 B, peer budget 4,096 B)', () => {
  it('INGRESS-01 an OpenSlot matching a registered bind claims it: opened 1, live 1, no reply', () => {
    const h = new IngressHarness();
    const b = h.bind();
    h.open(sid(3, 7), b);
    expect(b.claimed).toBe(true);
    expect(b.slot?.id).toBe(sid(3, 7));
    expect(h.host.claimed).toEqual([b]);
    expect((b.owner as RecordingBindOwner).claims).toBe(1);
    expect(h.table.liveSlots).toBe(1);
    expect(h.metrics.liveSlots).toBe(1);
    // No CreditUpdate (the sender already holds C), no reply of any kind.
    expect(h.host.replies).toEqual([]);
    expect(h.host.owned).toEqual([]);
  });

  it('INGRESS-02 an OpenSlot for an unregistered (anchor, session) gets exactly one RejectSlot{UnknownSlot}; the real bind stays claimable', () => {
    const h = new IngressHarness();
    const real = h.bind();
    const id = sid(5, 1);
    h.send(rec.open(id, real.anchorId, real.sessionId + 1n), rec.item(id, 1, 'lost'));
    expect(h.host.replies).toEqual([{ kind: 'reject', slot: id, value: CloseReason.UnknownSlot }]);
    expect(h.metrics.dropped('unknown_slot')).toBe(1);
    expect(h.table.liveSlots).toBe(0);
    expect(real.claimed).toBe(false);
    // The slot's records are discarded, and the real bind can still be claimed.
    h.open(id, real);
    expect(real.claimed).toBe(true);
    expect(h.table.liveSlots).toBe(1);
    expect(h.host.replies).toHaveLength(1);
  });

  it('INGRESS-03 an OpenSlot at index 65,536 gets RejectSlot{ProtocolError}; the table is untouched and the bind is not consumed', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(65_536, 0);
    h.open(id, b);
    expect(h.host.replies).toEqual([{ kind: 'reject', slot: id, value: CloseReason.ProtocolError }]);
    expect(h.table.liveSlots).toBe(0);
    expect(h.table.slotAt(65_536)).toBeUndefined();
    expect([...h.table.slots()]).toEqual([]);
    expect(b.claimed).toBe(false);
    expect(h.host.claimed).toEqual([]);
    // The last valid index (65,535) claims the same bind.
    h.open(sid(65_535, 0), b);
    expect(b.claimed).toBe(true);
    expect(h.host.replies).toHaveLength(1);
  });

  it('INGRESS-04 an OpenSlot at a live index with another generation gets RejectSlot{ProtocolError}; the incumbent and its held bytes are intact', () => {
    const h = new IngressHarness();
    const a = h.bind();
    const rival = h.bind();
    const inc = sid(9, 1);
    h.open(inc, a);
    h.send(rec.item(inc, 2, 'held')); // ahead of sequence: held bytes
    const incumbent = h.table.slotAt(9)!;
    const heldPeer = h.peerBudget.used;
    const heldSlot = incumbent.holdBudget.used;
    expect(heldPeer).toBeGreaterThan(0);

    h.open(sid(9, 2), rival);
    expect(h.host.replies).toEqual([{ kind: 'reject', slot: sid(9, 2), value: CloseReason.ProtocolError }]);
    expect(h.metrics.dropped('slot_collision')).toBe(1);
    expect(h.table.slotAt(9)).toBe(incumbent);
    expect(incumbent.closed).toBe(false);
    expect(h.peerBudget.used).toBe(heldPeer);
    expect(incumbent.holdBudget.used).toBe(heldSlot);
    expect(h.metrics.heldRecords).toBe(1);
    expect(rival.claimed).toBe(false);
    // The incumbent still delivers in order, and the rival's bind is still claimable elsewhere.
    h.send(rec.item(inc, 1, 'first'));
    expect(read(a)).toEqual(['first', 'held']);
    h.open(sid(10, 0), rival);
    expect(rival.claimed).toBe(true);
  });

  it('INGRESS-05 a duplicate OpenSlot with the incumbent SlotId but an unbound (anchor, session) gets RejectSlot{UnknownSlot}; the incumbent is undisturbed', () => {
    const h = new IngressHarness();
    const a = h.bind();
    const id = sid(9, 1);
    h.open(id, a);
    h.send(rec.item(id, 1, 'one'));
    const incumbent = h.table.slotAt(9)!;
    h.send(rec.open(id, 0x77n, 0x78n));
    expect(h.host.replies).toEqual([{ kind: 'reject', slot: id, value: CloseReason.UnknownSlot }]);
    expect(h.table.slotAt(9)).toBe(incumbent);
    expect(a.buffer.closed).toBe(false);
    h.send(rec.item(id, 2, 'two'));
    expect(read(a)).toEqual(['one', 'two']);
    expect(h.table.liveSlots).toBe(1);
  });

  it('INGRESS-06 a duplicate OpenSlot with the incumbent SlotId and another registered bind: opened 1, closed 1, old consumer gets Dropped, held bytes released', () => {
    const h = new IngressHarness();
    const oldBind = h.bind();
    const newBind = h.bind();
    const id = sid(9, 1);
    h.open(id, oldBind);
    h.send(rec.item(id, 2, 'held'));
    expect(h.peerBudget.used).toBeGreaterThan(0);
    const claimedBefore = h.host.claimed.length;

    h.send(rec.open(id, newBind.anchorId, newBind.sessionId));
    expect(h.host.claimed.length - claimedBefore).toBe(1); // opened 1
    expect(h.host.ended.map((e) => [e.bind, e.end])).toEqual([[oldBind, 'dropped']]); // closed 1
    expect(read(oldBind)).toEqual(['Dropped']);
    expect(oldBind.buffer.closed).toBe(true);
    expect(h.peerBudget.used).toBe(0);
    expect(h.metrics.heldRecords).toBe(0);
    expect(h.table.slotAt(9)?.bind).toBe(newBind);
    expect(h.table.liveSlots).toBe(1);
    expect(h.metrics.liveSlots).toBe(1);
    expect(h.host.replies).toEqual([]);
    h.send(rec.item(id, 1, 'fresh'));
    expect(read(newBind)).toEqual(['fresh']);
  });

  it('INGRESS-07 records for a slot that never opened are dropped, with no reply and nothing delivered', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(4, 0);
    h.send(rec.item(id, 1, 'x'), rec.fin(id, 2), rec.close(id, 3, CloseReason.TerminalSent));
    expect(h.host.replies).toEqual([]);
    expect(h.metrics.dropped('closed_slot')).toBe(3);
    expect(b.buffer.length).toBe(0);
    expect(h.table.liveSlots).toBe(0);
  });

  it('INGRESS-08 Data seqs 1..4 after OpenSlot seq 0 are delivered in frame_seq order', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 1, 'a'), rec.item(id, 2, 'b'));
    h.send(rec.item(id, 3, 'c'), rec.item(id, 4, 'd'));
    expect(read(b)).toEqual(['a', 'b', 'c', 'd']);
    expect(h.table.slotAt(1)?.nextSeq).toBe(5);
  });

  it('INGRESS-09 seqs 2 and 3 arriving before 1 are held; when 1 arrives, 1, 2, 3 are delivered in order', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 3, 'three'), rec.item(id, 2, 'two'));
    expect(read(b)).toEqual([]);
    expect(h.metrics.heldRecords).toBe(2);
    h.send(rec.item(id, 1, 'one'));
    expect(read(b)).toEqual(['one', 'two', 'three']);
    expect(h.metrics.heldRecords).toBe(0);
    expect(h.peerBudget.used).toBe(0);
  });

  it('INGRESS-10 a record below next_seq is a duplicate: dropped, no reply, the slot stays open', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 1, 'a'), rec.item(id, 2, 'b'));
    h.send(rec.item(id, 1, 'a-again'), rec.item(id, 2, 'b-again'));
    expect(h.metrics.dropped('duplicate')).toBe(2);
    expect(h.host.replies).toEqual([]);
    expect(h.table.liveSlots).toBe(1);
    expect(b.buffer.closed).toBe(false);
    h.send(rec.item(id, 3, 'c'));
    expect(read(b)).toEqual(['a', 'b', 'c']);
  });

  it('INGRESS-11 slot a gets seqs 2..6 with 1 missing: the hold overflows, CloseSlot{a, ProtocolError}, a gets Dropped; slot b keeps delivering', () => {
    const h = new IngressHarness();
    const ba = h.bind();
    const bb = h.bind();
    const a = sid(1, 0);
    const b = sid(2, 0);
    h.open(a, ba);
    h.open(b, bb);
    h.send(
      rec.item(a, 2, 'a2'),
      rec.item(b, 1, 'b1'),
      rec.item(a, 3, 'a3'),
      rec.item(a, 4, 'a4'),
      rec.item(b, 2, 'b2'),
      rec.item(a, 5, 'a5'),
      rec.item(a, 6, 'a6'),
    );
    expect(h.host.replies.filter((r) => r.kind !== 'credit')).toEqual([
      { kind: 'close', slot: a, value: CloseReason.ProtocolError },
    ]);
    expect(read(ba)).toEqual(['Dropped']);
    expect(ba.buffer.closed).toBe(true);
    expect(h.metrics.heldRecords).toBe(0);
    expect(h.peerBudget.used).toBe(0);
    // b is unaffected and goes on.
    h.send(rec.item(b, 3, 'b3'));
    expect(read(bb)).toEqual(['b1', 'b2', 'b3']);
    expect(h.table.liveSlots).toBe(1);
  });

  it('INGRESS-11 a hold that exceeds the credit counts hold_overflow_total ("hold exceeded the credit or byte budget")', () => {
    const h = new IngressHarness();
    const ba = h.bind();
    const a = sid(1, 0);
    h.open(a, ba);
    h.send(
      rec.item(a, 2, 'a2'),
      rec.item(a, 3, 'a3'),
      rec.item(a, 4, 'a4'),
      rec.item(a, 5, 'a5'),
      rec.item(a, 6, 'a6'),
    );
    expect(h.host.replies).toEqual([{ kind: 'close', slot: a, value: CloseReason.ProtocolError }]);
    expect(h.metrics.holdOverflow).toBe(1);
  });

  it('INGRESS-11 a hold that exceeds the 256 B slot hold budget closes the slot with ProtocolError and counts hold_overflow_total', () => {
    const h = new IngressHarness();
    const ba = h.bind();
    const bb = h.bind();
    const a = sid(1, 0);
    const b = sid(2, 0);
    h.open(a, ba);
    h.open(b, bb);
    const big = 'x'.repeat(100); // ~107-byte body: two fit in 256 B, the third does not
    h.send(rec.item(a, 2, big), rec.item(a, 3, big));
    expect(h.host.replies).toEqual([]);
    h.send(rec.item(a, 4, big), rec.item(b, 1, 'b1'));
    expect(h.host.replies).toEqual([{ kind: 'close', slot: a, value: CloseReason.ProtocolError }]);
    expect(h.metrics.holdOverflow).toBe(1);
    expect(read(ba)).toEqual(['Dropped']);
    expect(h.peerBudget.used).toBe(0);
    expect(read(bb)).toEqual(['b1']);
  });

  it('INGRESS-12 a record at a live index with the wrong generation is dropped, and generation_mismatch_total = 1', () => {
    const h = new IngressHarness();
    const b = h.bind();
    h.open(sid(3, 1), b);
    h.send(rec.item(sid(3, 2), 1, 'stale'));
    expect(h.metrics.generationMismatch).toBe(1);
    expect(h.metrics.dropped('generation')).toBe(1);
    expect(read(b)).toEqual([]);
    expect(h.host.replies).toEqual([]);
    expect(h.table.slotAt(3)?.nextSeq).toBe(1);
  });

  it('INGRESS-13 after a batch at epoch 5, a batch at epoch 4 carrying 2 records is discarded whole: records_dropped{stale_epoch} = 2', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.epoch = 5n;
    h.send(rec.open(id, b.anchorId, b.sessionId), rec.item(id, 1, 'e5'));
    h.epoch = 4n;
    h.send(rec.item(id, 2, 'old-a'), rec.item(id, 3, 'old-b'));
    expect(h.metrics.dropped('stale_epoch')).toBe(2);
    expect(read(b)).toEqual(['e5']);
    expect(h.table.liveSlots).toBe(1);
    h.epoch = 5n;
    h.send(rec.item(id, 2, 'e5-next'));
    expect(read(b)).toEqual(['e5-next']);
  });

  it('INGRESS-14 a batch at a newer epoch retires the old slots with exactly one Dropped each; a consumer with one item reads [item, Dropped]', () => {
    const h = new IngressHarness();
    const ba = h.bind();
    const bb = h.bind();
    h.open(sid(1, 0), ba);
    h.open(sid(2, 0), bb);
    const bc = h.bind();
    h.open(sid(3, 0), bc);
    h.send(rec.item(sid(1, 0), 1, 'item'), rec.fin(sid(3, 0), 1)); // slot 3 delivered its terminal; its close is still to come
    h.epoch = 2n;
    h.batchSeq = 0;
    h.send();
    expect(read(ba)).toEqual(['item', 'Dropped']);
    expect(read(bb)).toEqual(['Dropped']);
    expect(read(bc)).toEqual(['Finalized']); // a slot that saw its terminal gets no Dropped
    expect(ba.buffer.closed && bb.buffer.closed).toBe(true);
    expect(h.table.liveSlots).toBe(0);
    expect(h.metrics.liveSlots).toBe(0);
    // A further batch of the new epoch injects nothing more.
    h.send();
    expect(read(ba)).toEqual([]);
    expect(read(bb)).toEqual([]);
  });

  it('INGRESS-15 Finalized then CloseSlot{TerminalSent}: the consumer reads [Finalized], then the buffer reports closed; nothing is injected', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.fin(id, 1), rec.close(id, 2, CloseReason.TerminalSent));
    expect(read(b)).toEqual(['Finalized']);
    expect(b.buffer.closed).toBe(true);
    expect(read(b)).toEqual([]);
    expect(h.host.ended.map((e) => e.end)).toEqual(['terminal']);
    expect(h.host.replies).toEqual([]);
    expect(h.table.liveSlots).toBe(0);
  });

  it('INGRESS-16 with C = 1, an item (the only credit), Finalized (on the reserve) and the close are all accepted', () => {
    const h = new IngressHarness({ C: 1 });
    const b = h.bind();
    expect(b.buffer.capacity).toBe(2);
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 1, 'only'), rec.fin(id, 2), rec.close(id, 3, CloseReason.TerminalSent));
    expect(h.host.replies).toEqual([]);
    expect(h.metrics.readerStall).toBe(0);
    expect(read(b)).toEqual(['only', 'Finalized']);
    expect(b.buffer.closed).toBe(true);
  });

  it('INGRESS-17 with seq 1 missing, the terminal at seq 2 is held and its close at seq 3 waits; when seq 1 arrives the consumer reads item, Finalized, never Dropped', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.fin(id, 2), rec.close(id, 3, CloseReason.TerminalSent));
    expect(read(b)).toEqual([]);
    expect(b.buffer.closed).toBe(false);
    expect(h.table.liveSlots).toBe(1);
    h.send(rec.item(id, 1, 'late'));
    expect(read(b)).toEqual(['late', 'Finalized']);
    expect(b.buffer.closed).toBe(true);
    expect(h.host.replies).toEqual([]);
  });

  it('INGRESS-18 an arriving CloseSlot{UnknownSlot} goes to the batcher as a peer close; the ingress slot at the same index is untouched', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(6, 0);
    h.open(id, b);
    const s = h.table.slotAt(6)!;
    h.send(rec.close(id, 0, CloseReason.UnknownSlot), rec.close(id, 0, CloseReason.ProtocolError));
    expect(h.host.owned).toEqual([
      { kind: 'close', slot: id, value: CloseReason.UnknownSlot },
      { kind: 'close', slot: id, value: CloseReason.ProtocolError },
    ]);
    expect(h.table.slotAt(6)).toBe(s);
    expect(s.closed).toBe(false);
    expect(b.buffer.closed).toBe(false);
    h.send(rec.item(id, 1, 'still here'));
    expect(read(b)).toEqual(['still here']);
  });

  it('INGRESS-18 (whole mux) a CloseSlot{UnknownSlot} from the consumer closes the producer-owned slot, not the ingress slot at the same index', async () => {
    const p = muxPair({ initialCredit: 4 });
    const peerA = p.ma.self.id;
    const peerB = p.mb.self.id;
    const noop = { onClaimed: () => {}, onEnded: () => {} };
    // A produces toward B: B's consumer bound (0x11, sB); A owns slot (0, 0) on its batcher.
    const bindB = p.b.bind(0x11n, noop, peerA);
    const closedA: Array<{ code: string } | null> = [];
    const ownedA = await p.a.openSlot(peerB, 0, 0x11n, bindB.sessionId, 4, {
      onSlotClosed: (e) => closedA.push(e as { code: string } | null),
      onLifecycle: () => {},
      onRetired: () => {},
    });
    await p.runtime.runMacrotasks();
    expect(bindB.claimed).toBe(true);
    // B produces toward A on the same lane and the same dense index: A holds an ingress slot at index 0.
    const bindA = p.a.bind(0x42n, noop, peerB);
    const ownedB = await p.b.openSlot(peerA, 0, 0x42n, bindA.sessionId, 4, {
      onSlotClosed: () => {},
      onLifecycle: () => {},
      onRetired: () => {},
    });
    await p.runtime.runMacrotasks();
    expect(ownedB.id).toBe(ownedA.id);
    expect(bindA.claimed).toBe(true);
    // B's consumer goes away: B tells A CloseSlot{UnknownSlot} naming A's owned slot.
    p.b.releaseBind(bindB);
    await p.runtime.advance(5);
    expect(ownedA.closed).toBe(true);
    expect(closedA.map((e) => e?.code)).toEqual(['ERR_UNKNOWN_SLOT']);
    // A's ingress slot at index 0 is untouched.
    expect(bindA.slot?.closed).toBe(false);
    expect(bindA.buffer.closed).toBe(false);
    expect(p.a.liveSlots).toBe(1);
  });

  it('INGRESS-19 after the consumer drains 4 records, a sweep visit emits CreditUpdate{delta 4}', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 1, 'a'), rec.item(id, 2, 'b'), rec.item(id, 3, 'c'), rec.item(id, 4, 'd'));
    expect(h.host.replies).toEqual([]);
    expect(read(b)).toHaveLength(4);
    expect(h.host.replies).toEqual([]); // credit returns on a reconcile, not on the take itself
    h.table.sweep();
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 4 }]);
    h.table.sweep();
    expect(h.host.replies).toHaveLength(1);
  });

  it('INGRESS-20 with slot budget 1 byte, no grant is minted while the slot buffers ≥ 1 byte; after both records are drained a single grant of 2 flows', () => {
    const h = new IngressHarness({ slotBudget: 1 });
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 1, 'a'), rec.item(id, 2, 'b'));
    expect(read(b, 1)).toEqual(['a']);
    h.table.sweep();
    h.doorbell();
    expect(h.host.replies).toEqual([]);
    expect(read(b, 1)).toEqual(['b']);
    h.table.sweep();
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 2 }]);
  });

  it('INGRESS-21 with 1,000 open slots, a batch delivering into one slot reconciles exactly one slot', () => {
    const h = new IngressHarness();
    const binds = Array.from({ length: 1000 }, () => h.bind());
    h.send(...binds.map((b, i) => rec.open(sid(i, 0), b.anchorId, b.sessionId)));
    expect(h.table.liveSlots).toBe(1000);
    const spy = vi.spyOn(h.table, 'reconcile');
    // Two records bring the slot to half its window (C = 4), where a grant may be due: it is visited.
    h.send(rec.item(sid(517, 0), 1, 'one'), rec.item(sid(517, 0), 2, 'two'));
    expect(spy).toHaveBeenCalledTimes(1);
    expect(spy.mock.calls[0]![0].id).toBe(sid(517, 0));
  });

  it('INGRESS-22 the periodic sweep reconciles every slot: 1,000 visits for 1,000 slots', () => {
    const h = new IngressHarness();
    const binds = Array.from({ length: 1000 }, () => h.bind());
    h.send(...binds.map((b, i) => rec.open(sid(i, 0), b.anchorId, b.sessionId)));
    const spy = vi.spyOn(h.table, 'reconcile');
    expect(h.table.sweep()).toBe(1000);
    expect(spy).toHaveBeenCalledTimes(1000);
    expect(new Set(spy.mock.calls.map((c) => c[0].id)).size).toBe(1000);
  });

  it("INGRESS-23 a batch delivering into slot A also carries slot B's grant (2) when B drained, and the other way round", () => {
    for (const [into, drained] of [
      [0, 1],
      [1, 0],
    ] as const) {
      const h = new IngressHarness();
      const binds = [h.bind(), h.bind()];
      const ids = [sid(1, 0), sid(2, 0)];
      h.open(ids[0]!, binds[0]!);
      h.open(ids[1]!, binds[1]!);
      h.send(rec.item(ids[drained]!, 1, 'x'), rec.item(ids[drained]!, 2, 'y'));
      expect(read(binds[drained]!)).toEqual(['x', 'y']);
      expect(h.host.replies).toEqual([]);
      h.send(rec.item(ids[into]!, 1, 'z'));
      expect(h.host.replies).toEqual([{ kind: 'credit', slot: ids[drained]!, value: 2 }]);
    }
  });

  it('INGRESS-24 a doorbell visit reconciles only the slots that drained: 1 visit out of 1,000 slots', () => {
    const h = new IngressHarness();
    const binds = Array.from({ length: 1000 }, () => h.bind());
    h.send(...binds.map((b, i) => rec.open(sid(i, 0), b.anchorId, b.sessionId)));
    h.send(...binds.flatMap((_, i) => [rec.item(sid(i, 0), 1, `t${i}`), rec.item(sid(i, 0), 2, `u${i}`)]));
    // Two of C = 4 taken: the grant is due (the sender may hold no more than half the window).
    expect(read(binds[321]!)).toEqual(['t321', 'u321']);
    expect(h.host.doorbells).toBe(1);
    const spy = vi.spyOn(h.table, 'reconcile');
    h.doorbell();
    expect(spy).toHaveBeenCalledTimes(1);
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: sid(321, 0), value: 2 }]);
  });

  it('INGRESS-24 (whole mux) a consumer drain rings the doorbell once and its grant rides the next reply batch', async () => {
    const p = muxPair({ initialCredit: 4, drainVisitFloor: 2 });
    const peerB = p.mb.self.id;
    const binds = Array.from({ length: 50 }, (_, i) =>
      p.a.bind(BigInt(0x100 + i), { onClaimed: () => {}, onEnded: () => {} }, peerB),
    );
    p.mb.sendBatch(
      p.ma.self.id,
      0,
      encodeBatch(
        3n,
        0,
        binds.map((b, i) => rec.open(sid(i, 0), b.anchorId, b.sessionId)),
      ),
    );
    p.mb.sendBatch(
      p.ma.self.id,
      0,
      encodeBatch(
        3n,
        1,
        binds.flatMap((_, i) => [rec.item(sid(i, 0), 1, `t${i}`), rec.item(sid(i, 0), 2, `u${i}`)]),
      ),
    );
    await p.runtime.runMacrotasks();
    const sentBefore = p.ma.sent.length;
    expect(read(binds[7]!)).toEqual(['t7', 'u7']);
    await p.runtime.advance(10);
    expect(p.metricsA.drainVisits).toBe(1);
    const replies = p.ma.sent.slice(sentBefore).flatMap((s) => (s.payload.byteLength > 16 ? [s.payload] : []));
    const recs = replies.flatMap((pl) => decodeBatch(pl).records);
    expect(recs.map((r) => [r.type, r.slot, r.creditDelta])).toEqual([[3, sid(7, 0), 2]]);
  });

  it('INGRESS-25 the grant equals the records the consumer took (2), even when the slot buffer holds an extra record', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 1, 'a'), rec.item(id, 3, 'c'));
    h.send(rec.item(id, 2, 'b')); // releases seq 3 from the hold: it arrived by another path
    expect(b.buffer.length).toBe(3);
    expect(read(b, 2)).toEqual(['a', 'b']);
    h.table.sweep();
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 2 }]);
    expect(b.buffer.length).toBe(1);
  });

  it('INGRESS-26 a drain whose dirty-set listing was lost still gets its credit back on the next periodic walk', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 1, 'a'), rec.item(id, 2, 'b'));
    expect(read(b)).toEqual(['a', 'b']);
    h.table.dirty = []; // the listing is lost
    h.doorbell();
    expect(h.host.replies).toEqual([]);
    h.table.sweep();
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 2 }]);
  });

  it('INGRESS-27 a held record earns credit only when the consumer takes it, not when it leaves the hold', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 2, 'two'));
    h.send(rec.item(id, 1, 'one')); // seq 2 leaves the hold here
    h.table.sweep();
    expect(h.host.replies).toEqual([]);
    expect(read(b, 1)).toEqual(['one']);
    h.table.sweep();
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 1 }]);
    expect(read(b, 1)).toEqual(['two']);
    h.table.sweep();
    // Taken, so owed, but not yet due: the sender may still hold 3 of C = 4.
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 1 }]);
    // The next arrival leaves the sender at most 2 (half of C): the owed credit rides it.
    h.send(rec.item(id, 3, 'three'));
    expect(h.host.replies).toEqual([
      { kind: 'credit', slot: id, value: 1 },
      { kind: 'credit', slot: id, value: 1 },
    ]);
  });

  it('INGRESS-28 when a batch touches one of two drained slots the grants total exactly a: 2 and b: 2 (none lost, none counted twice)', () => {
    const h = new IngressHarness();
    const ba = h.bind();
    const bb = h.bind();
    const a = sid(1, 0);
    const b = sid(2, 0);
    h.open(a, ba);
    h.open(b, bb);
    h.send(rec.item(a, 1, 'a1'), rec.item(a, 2, 'a2'), rec.item(b, 1, 'b1'), rec.item(b, 2, 'b2'));
    expect(read(ba)).toHaveLength(2);
    expect(read(bb)).toHaveLength(2);
    h.send(rec.item(a, 3, 'a3'));
    h.doorbell();
    h.table.sweep();
    expect(h.host.grants()).toEqual(
      new Map([
        [a, 2],
        [b, 2],
      ]),
    );
    expect(h.host.replies.filter((r) => r.kind === 'credit')).toHaveLength(2);
  });

  it('INGRESS-29 a slot with held records counts as touched; the batch that releases them reconciles the slot in the same pass', () => {
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 1, 'one'));
    expect(read(b)).toEqual(['one']);
    h.table.dirty = []; // only "touched" can name the slot now
    const spy = vi.spyOn(h.table, 'reconcile');
    h.send(rec.item(id, 3, 'three')); // held only
    expect(spy).toHaveBeenCalledTimes(1);
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 1 }]);
    spy.mockClear();
    h.send(rec.item(id, 2, 'two')); // releases 2 and 3
    expect(spy).toHaveBeenCalledTimes(1);
    expect(spy.mock.calls[0]![0].id).toBe(id);
    expect(read(b)).toEqual(['two', 'three']);
  });

  it('INGRESS-30 shutdown() retires every slot (1 for one live slot) and the consumer gets Dropped', () => {
    // lanemux names the table's shutdown `retireAll()` (Mux.close() calls it on every table).
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.item(id, 1, 'a'));
    expect(h.table.retireAll()).toBe(1);
    expect(read(b)).toEqual(['a', 'Dropped']);
    expect(b.buffer.closed).toBe(true);
    expect(h.table.liveSlots).toBe(0);
    expect(h.metrics.liveSlots).toBe(0);
    expect(h.table.retireAll()).toBe(0);
  });

  it('INGRESS-31 a SlotHeartbeat reaches the consumer as the Heartbeat frame (a9 48 65 61 72 74 62 65 61 74) and spends data credit', () => {
    // lanemux's slot buffer holds decoded frames (kind + value), not bodies: a SlotHeartbeat is
    // delivered as FrameKind.Heartbeat, exactly what a Data record carrying the Heartbeat bytes gives.
    expect(hex(FRAME_HEARTBEAT)).toBe('a9 48 65 61 72 74 62 65 61 74');
    const h = new IngressHarness();
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    h.send(rec.hb(id, 1), rec.data(id, 2, FRAME_HEARTBEAT));
    expect(b.buffer.take()).toBe(true);
    expect(b.buffer.kind).toBe(FrameKind.Heartbeat);
    expect(b.buffer.take()).toBe(true);
    expect(b.buffer.kind).toBe(FrameKind.Heartbeat);
    // Data class: the two taken heartbeats are granted back (2), then with C = 4 a fifth
    // un-taken heartbeat is an overspend.
    h.table.sweep();
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 2 }]);
    h.send(rec.hb(id, 3), rec.hb(id, 4), rec.hb(id, 5), rec.hb(id, 6));
    expect(h.host.replies.filter((r) => r.kind === 'close')).toEqual([]);
    h.send(rec.hb(id, 7));
    expect(h.host.replies.filter((r) => r.kind === 'close')).toEqual([
      { kind: 'close', slot: id, value: CloseReason.ProtocolError },
    ]);
  });
});

describe('a record ahead of sequence arriving twice', () => {
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
