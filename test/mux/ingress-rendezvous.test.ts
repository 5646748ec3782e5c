// Ingress rules for rendezvous records (docs/protocol.md §8.1: ordering is per slot, "a record refused for
// its size"): records ahead of a singleton wait in the hold; an index reused while the old slot
// waits (its close already here) moves the old slot aside; a generation that wraps onto a slot
// still aside is a collision that fails both; a refusal names (epoch, slot, session) and ends only
// that stream, even after its terminal overtook the refused record.
import { describe, expect, it } from 'vitest';
import { CloseReason } from '../../src/wire/constants.ts';
import { DropReason } from '../../src/metrics/mux-metrics.ts';
import { IngressHarness, encodeBatch, read, rec, sid } from './harness.ts';

describe('ingress and rendezvous singletons', () => {
  it('the old slot moves aside when its index is reused after its close arrived, and ends in order when the singleton lands', () => {
    const h = new IngressHarness({ C: 8, slotBudget: 4096, peerBudget: 1 << 20 });
    const old = h.bind();
    h.open(sid(3, 0), old);
    h.send(rec.item(sid(3, 0), 1, 'a'));
    // Seq 2 is the singleton, still being pulled: its batch_seq is taken now, delivered later.
    const singletonSeq = h.batchSeq++;
    h.send(rec.item(sid(3, 0), 3, 'c'), rec.fin(sid(3, 0), 4), rec.close(sid(3, 0), 5, CloseReason.TerminalSent));
    // The sender freed index 3 (LIFO) and opened the next stream there.
    const next = h.bind();
    h.open(sid(3, 1), next);
    h.send(rec.item(sid(3, 1), 1, 'new'));
    expect(h.metrics.recordsDropped[DropReason.slot_collision]).toBe(0);
    expect(read(next)).toEqual(['new']);
    expect(read(old)).toEqual(['a']);
    h.deliver(encodeBatch(h.epoch, singletonSeq, [rec.item(sid(3, 0), 2, 'BIG')]));
    expect(read(old)).toEqual(['BIG', 'c', 'Finalized']);
    expect(old.buffer.closed).toBe(true);
    expect(h.table.liveSlots).toBe(1);
  });

  it('without the old slot’s close, an OpenSlot on its index is still a slot_collision ProtocolError', () => {
    const h = new IngressHarness({ C: 8, slotBudget: 4096, peerBudget: 1 << 20 });
    const old = h.bind();
    h.open(sid(3, 0), old);
    h.send(rec.item(sid(3, 0), 2, 'ahead'));
    h.open(sid(3, 1), h.bind());
    expect(h.metrics.recordsDropped[DropReason.slot_collision]).toBe(1);
    expect(
      h.host.replies.some((r) => r.kind === 'reject' && r.slot === sid(3, 1) && r.value === CloseReason.ProtocolError),
    ).toBe(true);
  });

  it('a generation that wraps onto a slot still aside is a collision: the new slot is refused and the old one fails', () => {
    const h = new IngressHarness({ C: 8, slotBudget: 4096, peerBudget: 1 << 20 });
    const old = h.bind();
    h.open(sid(5, 7), old);
    h.send(rec.fin(sid(5, 7), 2), rec.close(sid(5, 7), 3, CloseReason.TerminalSent));
    const mid = h.bind();
    h.open(sid(5, 8), mid); // old moves aside
    h.send(rec.fin(sid(5, 8), 1), rec.close(sid(5, 8), 2, CloseReason.TerminalSent));
    const wrapped = h.bind();
    h.open(sid(5, 7), wrapped); // 256 generations later: the same full id as the slot aside
    expect(h.metrics.recordsDropped[DropReason.slot_collision]).toBe(1);
    expect(read(old)).toEqual(['Dropped']);
    expect(wrapped.claimed).toBe(false);
  });

  it('a refusal naming (epoch, slot, session) ends that stream with a TransportError even when its terminal waits in the hold; a stale one does nothing', () => {
    const h = new IngressHarness({ C: 8, slotBudget: 4096, peerBudget: 1 << 20 });
    const victim = h.bind();
    const other = h.bind();
    h.open(sid(1, 0), victim);
    h.open(sid(2, 0), other);
    h.send(rec.item(sid(1, 0), 1, 'a'), rec.fin(sid(1, 0), 3), rec.item(sid(2, 0), 1, 'x'));
    expect(h.metrics.heldRecords).toBe(1);
    // Wrong session or epoch: no effect.
    expect(h.table.refuseStaged(h.epoch, sid(1, 0), victim.sessionId + 1n, 'nope')).toBe(false);
    expect(h.table.refuseStaged(h.epoch + 1n, sid(1, 0), victim.sessionId, 'nope')).toBe(false);
    expect(h.table.refuseStaged(h.epoch, sid(1, 0), victim.sessionId, 'too big: 9 > 4')).toBe(true);
    expect(read(victim)).toEqual(['a', 'TransportError(too big: 9 > 4)']);
    expect(h.metrics.heldRecords).toBe(0);
    expect(h.peerBudget.used).toBe(0);
    expect(read(other)).toEqual(['x']);
    expect(h.table.liveSlots).toBe(1);
  });
});
