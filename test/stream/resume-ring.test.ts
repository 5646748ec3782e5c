// The producer's replay ring (docs/protocol.md §8.3): records numbered from 1 in send order, the
// oldest dropped first when a per-stream or the node-wide byte cap would be passed, and what was
// dropped is known (`holdsFrom`), so a resume that needs it fails "replay evicted" rather than
// sending a gap.
import { describe, expect, it } from 'vitest';
import { ReplayBudget, ReplayRing } from '../../src/stream/replay-ring.ts';

const payloads = (ring: ReplayRing, from: number): unknown[] => {
  const out: unknown[] = [];
  for (let n = from; n < ring.next; n++) out.push(ring.payloadAt(n));
  return out;
};

describe('replay ring', () => {
  it('numbers records from 1 and hands back every one it holds, in order, across growth and wrap-around', () => {
    const ring = new ReplayRing(2, 1 << 20, new ReplayBudget(1 << 30));
    for (let i = 1; i <= 10; i++) ring.push(0, `r${i}`, 2);
    ring.keepLast(6);
    for (let i = 11; i <= 25; i++) {
      ring.push(0, `r${i}`, 3);
      ring.keepLast(6);
    }
    expect(ring.next).toBe(26);
    expect(ring.holdsFrom(20)).toBe(true);
    expect(ring.holdsFrom(19)).toBe(false);
    expect(payloads(ring, 20)).toEqual(['r20', 'r21', 'r22', 'r23', 'r24', 'r25']);
  });

  it('drops the oldest records past the per-stream byte cap; trim forgets what the consumer has', () => {
    const ring = new ReplayRing(8, 3 * (16 + 4), new ReplayBudget(1 << 30));
    for (let i = 1; i <= 5; i++) ring.push(1, new Uint8Array(4), 4);
    expect(ring.length).toBe(3);
    expect(ring.holdsFrom(3)).toBe(true);
    expect(ring.holdsFrom(2)).toBe(false);
    ring.trim(4);
    expect(ring.length).toBe(1);
    expect(ring.first).toBe(5);
  });

  it('charges the node-wide budget and gives it back when records go', () => {
    const budget = new ReplayBudget(2 * (16 + 10));
    const a = new ReplayRing(4, 1 << 20, budget);
    const b = new ReplayRing(4, 1 << 20, budget);
    a.push(0, 'x'.repeat(10), 10);
    b.push(0, 'y'.repeat(10), 10);
    expect(budget.used).toBe(52);
    // No room left: b's own oldest record makes room for its newest.
    b.push(0, 'z'.repeat(10), 10);
    expect(b.holdsFrom(1)).toBe(false);
    expect(payloads(b, 2)).toEqual(['z'.repeat(10)]);
    a.clear();
    b.clear();
    expect(budget.used).toBe(0);
  });

  it('a record larger than the cap is not kept, and the ring says it holds nothing from before it', () => {
    const ring = new ReplayRing(4, 32, new ReplayBudget(1 << 30));
    ring.push(0, 'a', 1);
    ring.push(0, 'b'.repeat(100), 100);
    expect(ring.next).toBe(3);
    expect(ring.length).toBe(0);
    expect(ring.holdsFrom(3)).toBe(true);
    expect(ring.holdsFrom(2)).toBe(false);
  });

  it('drops many records at once (a trim, keepLast) giving back exactly their bytes, and keeps each kind', () => {
    const budget = new ReplayBudget(1 << 30);
    const ring = new ReplayRing(4, 1 << 20, budget);
    for (let i = 1; i <= 40; i++) ring.push(i % 4, `r${i}`, i);
    const bytesOf = (from: number, to: number): number => {
      let b = 0;
      for (let i = from; i <= to; i++) b += i + 16;
      return b;
    };
    expect(budget.used).toBe(bytesOf(1, 40));
    ring.keepLast(9);
    expect(ring.first).toBe(32);
    expect(ring.bytes).toBe(bytesOf(32, 40));
    expect(budget.used).toBe(bytesOf(32, 40));
    ring.trim(35);
    expect(ring.first).toBe(36);
    expect(budget.used).toBe(bytesOf(36, 40));
    for (let n = 36; n <= 40; n++) expect([ring.kindAt(n), ring.payloadAt(n)]).toEqual([n % 4, `r${n}`]);
  });

  it('charges and gives back a record of more than 4 GiB exactly (its size is not cut to 32 bits)', () => {
    const budget = new ReplayBudget(2 ** 40);
    const ring = new ReplayRing(4, 2 ** 36, budget);
    const huge = 2 ** 33 + 5;
    ring.push(1, 'stand-in', huge);
    ring.push(3, 'next', 1);
    expect(ring.bytes).toBe(huge + 16 + 17);
    expect(ring.kindAt(1)).toBe(1);
    expect(ring.kindAt(2)).toBe(3);
    ring.trim(1);
    expect(ring.bytes).toBe(17);
    expect(budget.used).toBe(17);
  });
});
