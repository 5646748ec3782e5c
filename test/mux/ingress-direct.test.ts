/**
 * Direct delivery (docs/protocol.md §10.7): an `Item` for a push-mode reader that waits on an empty
 * slot buffer is handed over during the batch instead of being pushed and drained a step later. To
 * the credit laws it is buffered and taken at once, and its credit is reconciled with that batch.
 * The reader here is a stand-in for the anchor's `consume()` (its own rules: test/stream/consume-direct).
 */
import { describe, expect, it, vi } from 'vitest';
import type { IngressWindow } from '../../src/mux/ingress-window.ts';
import type { DirectReader, SlotBuffer } from '../../src/mux/slot-buffer.ts';
import type { Bind } from '../../src/mux/bind.ts';
import { CloseReason } from '../../src/wire/constants.ts';
import { IngressHarness, read, rec, sid } from './harness.ts';

/** A push-mode reader that takes what it is offered until it pauses (after `pauseAfter` items) or is told otherwise. */
class FakeReader implements DirectReader {
  readonly got: string[] = [];
  ready = true;
  pauseAfter = Number.POSITIVE_INFINITY;
  onItem: ((value: string) => void) | null = null;
  readonly asked: SlotBuffer[] = [];
  _direct(buffer: SlotBuffer, value: unknown): boolean {
    this.asked.push(buffer);
    if (!this.ready) return false;
    this.got.push(value as string);
    if (this.got.length >= this.pauseAfter) this.ready = false;
    this.onItem?.(value as string);
    return true;
  }
}

/** A peer window that counts what is held in it, and what it got back without holding. */
function countingWindow(): IngressWindow & { held: number; charged: number; passed: number } {
  return {
    held: 0,
    charged: 0,
    passed: 0,
    overruns: () => false,
    charge(bytes: number) {
      this.held += bytes;
      this.charged += bytes;
    },
    release(bytes: number) {
      this.held -= bytes;
    },
    dropped(bytes: number) {
      this.passed += bytes;
    },
  };
}

function setup(C = 4): { h: IngressHarness; b: Bind; id: number; r: FakeReader } {
  const h = new IngressHarness({ C });
  const b = h.bind();
  const id = sid(1, 0);
  h.open(id, b);
  const r = new FakeReader();
  b.buffer.direct = r;
  return { h, b, id, r };
}

describe('direct delivery to a waiting push-mode reader', () => {
  it('hands each item over during its batch: nothing enters the slot buffer and no doorbell rings', () => {
    const { h, b, id, r } = setup();
    h.send(rec.item(id, 1, 'a'), rec.item(id, 2, 'b'));
    expect(r.got).toEqual(['a', 'b']);
    expect(r.asked).toEqual([b.buffer, b.buffer]);
    expect(b.buffer.length).toBe(0);
    expect(h.host.doorbells).toBe(0);
  });

  it('counts a direct item as buffered then taken: exact account, and the grant rides the same batch', () => {
    const { h, b, id, r } = setup(4);
    const w = countingWindow();
    h.table.window = w;
    // A slot opened after the window was set charges it (the slot keeps its link's window).
    const b2 = h.bind();
    const id2 = sid(2, 0);
    h.open(id2, b2);
    b2.buffer.direct = r;
    h.send(rec.item(id2, 1, 'a'), rec.item(id2, 2, 'b'));
    const a = b2.slot!.account;
    expect(r.got).toEqual(['a', 'b']);
    expect(a.dataOutstanding).toBe(0);
    expect(a.bufferedBytes).toBe(0);
    expect(a.ungranted).toBe(0);
    expect(a.remaining).toBe(4);
    // Two of C = 4 taken: the grant is due, and goes out with this arrival, not at a doorbell.
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id2, value: 2 }]);
    // Taken at once: never held, the window gets the bytes back as for a record not kept.
    expect(w.passed).toBeGreaterThan(0);
    expect(w.charged).toBe(0);
    expect(w.held).toBe(0);
    expect(h.table.slotAt(2)!.arrivals).toBe(2);
    // The slot goes on at the next frame_seq: a duplicate of seq 2 is dropped, seq 3 delivered.
    h.send(rec.item(id2, 2, 'b again'), rec.item(id2, 3, 'c'));
    expect(r.got).toEqual(['a', 'b', 'c']);
    expect(h.metrics.dropped('duplicate')).toBe(1);
    expect(read(b)).toEqual([]);
    void id;
  });

  it('skips the visit of a batch that leaves its slot above half its window; the batch that reaches half grants every record taken since', () => {
    const { h, b, id, r } = setup(4);
    const spy = vi.spyOn(h.table, 'reconcile');
    h.send(rec.item(id, 1, 'a'));
    // One of C = 4 taken: no grant can be due (remaining 3 > 2), so the batch does not visit the slot.
    expect(r.got).toEqual(['a']);
    expect(spy).not.toHaveBeenCalled();
    expect(h.host.replies).toEqual([]);
    expect(h.table.slotAt(1)!.drained).toBe(1);
    h.send(rec.item(id, 2, 'b'));
    // The second brings remaining to C/2: one visit, which counts both records and grants them.
    expect(spy).toHaveBeenCalledTimes(1);
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 2 }]);
    const a = b.slot!.account;
    expect(a.dataOutstanding).toBe(0);
    expect(a.bufferedBytes).toBe(0);
    expect(a.remaining).toBe(4);
  });

  it('records a later reader takes inside the same batch are granted with that batch', () => {
    const { h, id, r } = setup(4);
    const other = h.bind();
    const otherId = sid(2, 0);
    h.open(otherId, other);
    // The other slot has no waiting reader: its two records are buffered (they bring what its sender may still send
    // to C/2, so it is listed for the reconcile after the batch). Slot 1's reader takes them from inside its
    // callback, before that reconcile, which must count the take.
    const taken: string[] = [];
    r.onItem = () => taken.push(...read(other));
    h.send(rec.item(otherId, 1, 'x'), rec.item(otherId, 2, 'y'), rec.item(id, 1, 'a'));
    expect(taken).toEqual(['x', 'y']);
    // Their credit goes out with this batch, not at a later doorbell visit.
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: otherId, value: 2 }]);
    expect(other.slot!.account.remaining).toBe(4);
  });

  it('with auto-tuned credit, skipped visits lose no credit: over 64 records none is admitted beyond the grants, and each is granted, ungranted or waiting to be counted', () => {
    let t = 0;
    const h = new IngressHarness({ C: 8, autoCredit: () => t });
    const b = h.bind();
    const id = sid(1, 0);
    h.open(id, b);
    const r = new FakeReader();
    b.buffer.direct = r;
    const spy = vi.spyOn(h.table, 'reconcile');
    let granted = 0;
    for (let seq = 1; seq <= 64; seq++) {
      t += 1;
      h.send(rec.item(id, seq, `t${seq}`));
      granted = h.host.replies.filter((x) => x.kind === 'credit').reduce((n, x) => n + x.value, 0);
      // Never more in flight than the window: admitted records never exceed what was granted.
      expect(seq).toBeLessThanOrEqual(8 + granted);
    }
    expect(r.got).toHaveLength(64);
    // Tuning was on and visits were skipped: fewer visits than batches.
    expect(spy.mock.calls.length).toBeLessThan(64);
    const s = h.table.slotAt(1)!;
    // What was not granted yet is either ungranted or still waiting in `drained` for the next visit.
    expect(granted + s.account.ungranted + s.drained).toBe(64 + (s.account.limit - 8));
  });

  it('asks a reader that is not waiting once per record, then buffers the record', () => {
    const { h, b, id, r } = setup();
    r.ready = false;
    h.send(rec.item(id, 1, 'a'), rec.item(id, 2, 'b'));
    // Asked for 'a' only: 'b' arrives behind a buffered record, so no reader is asked for it.
    expect(r.asked).toEqual([b.buffer]);
    expect(read(b)).toEqual(['a', 'b']);
  });

  it('keeps order: an item behind one already buffered is buffered too', () => {
    const { h, b, id, r } = setup();
    r.ready = false;
    h.send(rec.item(id, 1, 'a'));
    r.ready = true;
    h.send(rec.item(id, 2, 'b'));
    expect(r.got).toEqual([]);
    expect(read(b)).toEqual(['a', 'b']);
    // Buffer empty again: the next one goes direct.
    h.send(rec.item(id, 3, 'c'));
    expect(r.got).toEqual(['c']);
  });

  it('a reader that pauses mid-batch gets the rest of the batch through the buffer; credit holds them', () => {
    const { h, b, id, r } = setup(4);
    r.pauseAfter = 1;
    h.send(rec.item(id, 1, 'a'), rec.item(id, 2, 'b'), rec.item(id, 3, 'c'));
    expect(r.got).toEqual(['a']);
    expect(b.buffer.length).toBe(2);
    const a = b.slot!.account;
    expect(a.dataOutstanding).toBe(2);
    // One taken: remaining 4 - 2 - 1 = 1 ≤ 2, so its credit is granted with the batch.
    expect(h.host.replies).toEqual([{ kind: 'credit', slot: id, value: 1 }]);
    expect(read(b)).toEqual(['b', 'c']);
    h.doorbell();
    expect(h.host.replies).toEqual([
      { kind: 'credit', slot: id, value: 1 },
      { kind: 'credit', slot: id, value: 2 },
    ]);
    expect(a.dataOutstanding).toBe(0);
    expect(a.remaining).toBe(4);
  });

  it('records released from the hold by a gap fill go direct, in frame_seq order', () => {
    const { h, id, r } = setup();
    h.send(rec.item(id, 3, 'c'), rec.item(id, 2, 'b'));
    expect(r.got).toEqual([]);
    h.send(rec.item(id, 1, 'a'));
    expect(r.got).toEqual(['a', 'b', 'c']);
    expect(h.metrics.heldRecords).toBe(0);
  });

  it('never hands over a terminal: Finalized waits in the buffer for the reader to see the end', () => {
    const { h, b, id, r } = setup();
    h.send(rec.item(id, 1, 'a'), rec.fin(id, 2));
    expect(r.got).toEqual(['a']);
    expect(read(b)).toEqual(['Finalized']);
  });

  it('a reader that cancels inside its item retires the slot; the rest of the batch is dropped as stragglers', () => {
    const { h, b, id, r } = setup();
    r.onItem = () => h.table.consumerGone(b.slot!);
    h.send(rec.item(id, 1, 'a'), rec.item(id, 2, 'b'));
    expect(r.got).toEqual(['a']);
    expect(h.table.liveSlots).toBe(0);
    expect(h.host.replies).toEqual([{ kind: 'close', slot: id, value: CloseReason.UnknownSlot }]);
  });
});
