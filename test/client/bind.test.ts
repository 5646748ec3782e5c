// The page's credit law per slot (src/client/bind.ts), deterministically: what arrives spends, what is
// taken comes back once the producer may hold no more than half the window, and only a terminal may
// use the one reserve.
import { describe, expect, it } from 'vitest';
import { Bind } from '../../src/client/bind.ts';
import type { ClientStream } from '../../src/client/stream.ts';

const bind = (credit: number): Bind => {
  const b = new Bind({} as ClientStream, {
    session: 1n,
    credit,
    heartbeatMs: 5000,
    budget: 1 << 20,
    answered: false,
    now: 0,
  });
  b.state = 'live';
  return b;
};

describe('Bind: the credit law of one slot', () => {
  it('a stream read as fast as it arrives is granted about every C/2 records, never one per record', () => {
    const b = bind(32);
    let grants = 0;
    let granted = 0;
    for (let i = 0; i < 3200; i++) {
      expect(b.spend(false)).toBe(true);
      const d = b.take(1, false);
      if (d > 0) {
        grants++;
        granted += d;
      }
    }
    expect(grants).toBeGreaterThanOrEqual(3200 / 17);
    expect(grants).toBeLessThanOrEqual(3200 / 15);
    // Everything read was given back but what cannot be due yet (at most C/2).
    expect(3200 - granted).toBeLessThanOrEqual(16);
  });

  it('a record beyond the credit is refused; a terminal may use the one reserve', () => {
    const b = bind(2);
    expect(b.spend(false)).toBe(true);
    expect(b.spend(false)).toBe(true);
    expect(b.spend(false)).toBe(false);
    expect(b.spend(true)).toBe(true);
    expect(b.spend(true)).toBe(false);
  });

  it('credit taken while the producer still holds more than C/2 becomes due when an arrival lowers it', () => {
    const b = bind(4);
    b.spend(false);
    b.buffered = 1;
    expect(b.take(1, true)).toBe(0); // the producer may still hold 3 > 2
    b.spend(false);
    expect(b.due()).toBe(1); // now 2 ≤ 2: the grant of the record read is due
    expect(b.avail).toBe(3);
  });

  it('a bind that is not live grants nothing (its link is lost, or it ended)', () => {
    const b = bind(4);
    for (let i = 0; i < 4; i++) b.spend(false);
    b.state = 'lost';
    b.buffered = 4;
    expect(b.take(1, true)).toBe(0);
    b.state = 'done';
    expect(b.take(1, true)).toBe(0);
  });
});
