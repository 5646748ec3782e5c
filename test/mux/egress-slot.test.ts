/**
 * An owned slot's withheld FIFO and its pause, on the slot alone: a sender parked on a congested link
 * withholds a record per slot per pass and offers the next one while paused, so neither may cost an
 * allocation per record (bench/inproc.mjs --slots 16384 --window 8 showed both as most of the sender's
 * garbage).
 */
import { describe, expect, it } from 'vitest';
import { EgressKind, EgressSlot, type EgressSlotOwner, type SlotBatcher } from '../../src/mux/egress-slot.ts';
import { MuxError } from '../../src/mux/errors.ts';
import { PeerEgress } from '../../src/mux/peer-egress.ts';

const batcher: SlotBatcher = {
  lane: 0,
  offer: () => {
    throw new Error('not offered through the batcher here');
  },
  depart: () => {},
  heartbeat: () => {},
};

function owner(adopt = false): EgressSlotOwner & { adopted: number } {
  const o = {
    adopted: 0,
    onSlotClosed: () => {},
    onLifecycle: () => {},
    onRetired: () => {},
    adoptWaiters: (_e: unknown, waiters: Array<{ resolve: () => void }>) => {
      if (!adopt) return false;
      o.adopted += waiters.length;
      for (const w of waiters) w.resolve();
      return true;
    },
  };
  return o;
}

const slotWith = (o: EgressSlotOwner = owner()): EgressSlot =>
  new EgressSlot(batcher, 0x100, 1n, 2n, 4, o, 1024, new PeerEgress(1 << 20));

/** Whether `p` has settled, and how, after the microtasks queued so far have run. */
async function state(p: Promise<void>): Promise<'pending' | 'resolved' | 'rejected'> {
  let s: 'pending' | 'resolved' | 'rejected' = 'pending';
  p.then(
    () => (s = 'resolved'),
    () => (s = 'rejected'),
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return s;
}

describe('EgressSlot: the pause', () => {
  it('every producer waiting on one pause holds the same promise, settled once when the slot resumes', async () => {
    const slot = slotWith();
    slot.paused = true;
    const first = slot.waitWritable();
    expect(slot.waitWritable()).toBe(first);
    expect(slot.waitWritable()).toBe(first);
    expect(await state(first)).toBe('pending');
    slot.resume();
    expect(await state(first)).toBe('resolved');
    // A later pause is a new wait: the settled one cannot hold anybody back.
    slot.paused = true;
    const second = slot.waitWritable();
    expect(second).not.toBe(first);
    expect(await state(second)).toBe('pending');
    slot.resume();
    expect(await state(second)).toBe('resolved');
  });

  it('a slot that closes while paused rejects the one wait with the close error', async () => {
    const slot = slotWith();
    slot.paused = true;
    const wait = slot.waitWritable();
    const error = new MuxError('ERR_SLOT_CLOSED', 'closed under the producer');
    slot.closed = true;
    slot.closeError = error;
    slot.failWaiters(error);
    await expect(wait).rejects.toBe(error);
    await expect(slot.waitWritable()).rejects.toBe(error);
  });

  it('an owner that adopts the waiters of a lost slot takes the one wait over instead of its failing', async () => {
    const o = owner(true);
    const slot = slotWith(o);
    slot.paused = true;
    const wait = slot.waitWritable();
    slot.failWaiters(new MuxError('ERR_EPOCH_DEATH', 'link lost'));
    expect(o.adopted).toBe(1);
    expect(await state(wait)).toBe('resolved');
  });

  it('a slot that is not paused answers at once, without a wait to keep', async () => {
    const slot = slotWith();
    expect(await state(slot.waitWritable())).toBe('resolved');
    slot.paused = true;
    slot.resume();
    expect(await state(slot.waitWritable())).toBe('resolved');
  });
});

describe('EgressSlot: the withheld FIFO', () => {
  const drain = (slot: EgressSlot): unknown[] => {
    const out: unknown[] = [];
    while (slot.queued > 0) {
      out.push(slot.qValue[slot.qHead]);
      slot.shift();
    }
    return out;
  };

  it('drained and filled again, it keeps its arrays and its order, and its bytes return to 0', () => {
    const slot = slotWith();
    for (const v of ['a', 'b', 'c']) slot.enqueue(EgressKind.ItemString, v, 14);
    const [kinds, values, bytes] = [slot.qKind, slot.qValue, slot.qBytes];
    // A partial drain, records added behind it, then a full drain.
    slot.shift();
    slot.enqueue(EgressKind.ItemString, 'd', 14);
    expect(drain(slot)).toEqual(['b', 'c', 'd']);
    for (let round = 0; round < 3; round++) {
      for (const v of ['x', 'y']) slot.enqueue(EgressKind.ItemString, `${v}${round}`, 15);
      expect(drain(slot)).toEqual([`x${round}`, `y${round}`]);
      // The same arrays, still holding their room: the next records are stored, not pushed onto new storage.
      expect(slot.qKind).toBe(kinds);
      expect(slot.qValue).toBe(values);
      expect(slot.qBytes).toBe(bytes);
      expect(slot.qKind.length).toBeGreaterThanOrEqual(3);
    }
    expect(slot.withheldBytes).toBe(0);
    expect(slot.peerEgress.withheldBytes).toBe(0);
    // Nothing it let go of is still referenced from the kept arrays.
    expect(slot.qValue.every((v) => v === undefined)).toBe(true);
  });

  it('drained after a burst longer than it keeps, it lets its arrays go', () => {
    const slot = slotWith();
    for (let i = 0; i < 100; i++) slot.enqueue(EgressKind.ItemString, `r${i}`, 16);
    expect(drain(slot)).toEqual(Array.from({ length: 100 }, (_, i) => `r${i}`));
    expect(slot.qKind.length).toBe(0);
    expect(slot.qValue.length).toBe(0);
    slot.enqueue(EgressKind.ItemString, 'after', 18);
    expect(drain(slot)).toEqual(['after']);
  });

  it('cleared with records in it, it lets go of their values and starts again at the front', () => {
    const slot = slotWith();
    for (const v of ['a', 'b', 'c']) slot.enqueue(EgressKind.ItemString, v, 14);
    slot.shift();
    expect(slot.clearQueue()).toBe(2);
    expect(slot.queued).toBe(0);
    expect(slot.withheldBytes).toBe(0);
    expect(slot.peerEgress.withheldBytes).toBe(0);
    expect(slot.qValue.every((v) => v === undefined)).toBe(true);
    slot.enqueue(EgressKind.ItemString, 'd', 14);
    expect(drain(slot)).toEqual(['d']);
  });
});
