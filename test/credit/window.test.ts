import { describe, expect, it } from 'vitest';
import { CreditError, Window, batchFor } from '../../src/credit/index.ts';

describe('Window', () => {
  it('opened(w): remaining w, pending 0, batch max(1, ⌊w/2⌋)', () => {
    for (const [w, batch] of [
      [0, 1],
      [1, 1],
      [2, 1],
      [3, 1],
      [4, 2],
      [5, 2],
      [8, 4],
      [32, 16],
    ] as const) {
      const win = new Window(w);
      expect([win.remaining, win.pending, win.batch], `w=${w}`).toEqual([w, 0, batch]);
      expect(batchFor(w)).toBe(batch);
    }
  });

  it('follows the reference trace, window 4 (batch 2)', () => {
    const win = new Window(4);
    const table: Array<
      [op: 'arrive' | 'consume' | 'flush', violation: boolean, grant: number, remaining: number, pending: number]
    > = [
      ['arrive', false, 0, 3, 0],
      ['arrive', false, 0, 2, 0],
      ['consume', false, 0, 2, 1],
      ['consume', false, 2, 4, 0],
      ['arrive', false, 0, 3, 0],
      ['arrive', false, 0, 2, 0],
      ['arrive', false, 0, 1, 0],
      ['consume', false, 0, 1, 1],
      ['flush', false, 1, 2, 0],
      ['flush', false, 0, 2, 0],
    ];
    table.forEach(([op, violation, grant, remaining, pending], i) => {
      let gotViolation = false;
      let gotGrant = 0;
      if (op === 'arrive') gotViolation = win.arrive() === 'violation';
      else if (op === 'consume') gotGrant = win.consume();
      else gotGrant = win.flush();
      expect([gotViolation, gotGrant, win.remaining, win.pending], `row ${i} ${op}`).toEqual([
        violation,
        grant,
        remaining,
        pending,
      ]);
    });
  });

  it('edge: opened(1), then arrive, arrive → accepted (remaining 0), then violation (window unchanged)', () => {
    const win = new Window(1);
    expect(win.arrive()).toBe('accepted');
    expect(win.remaining).toBe(0);
    expect(win.arrive()).toBe('violation');
    expect([win.remaining, win.pending]).toEqual([0, 0]);
  });

  it('edge: opened(0), then arrive → violation', () => {
    expect(new Window(0).arrive()).toBe('violation');
  });

  it('edge: opened(4), then a continuation (arrive + continued) → grant 1; remaining 4, pending 0', () => {
    const win = new Window(4);
    expect(win.arrive()).toBe('accepted');
    expect(win.continued()).toBe(1);
    expect([win.remaining, win.pending]).toEqual([4, 0]);
  });

  it('a violation leaves pending untouched', () => {
    const win = new Window(1);
    win.arrive();
    win.consume(); // batch 1: granted at once
    expect(win.remaining).toBe(1);
    win.arrive();
    const pendingBefore = win.pending;
    expect(win.arrive()).toBe('violation');
    expect(win.pending).toBe(pendingBefore);
  });

  it('consume grants exactly at the threshold, all pending at once; remaining rises only when a grant is issued', () => {
    const win = new Window(32);
    for (let i = 0; i < 32; i++) win.arrive();
    for (let i = 1; i < 16; i++) {
      expect(win.consume()).toBe(0);
      expect(win.remaining).toBe(0);
    }
    expect(win.consume()).toBe(16);
    expect([win.remaining, win.pending]).toEqual([16, 0]);
  });

  it('a flush with nothing pending grants 0', () => {
    const win = new Window(8);
    expect(win.flush()).toBe(0);
    expect(win.remaining).toBe(8);
  });

  it('an item longer than the window finishes arriving only through continued()', () => {
    const win = new Window(2);
    expect(win.arrive()).toBe('accepted'); // the item's first chunk
    for (let i = 0; i < 10; i++) {
      expect(win.arrive()).toBe('accepted');
      expect(win.continued()).toBe(1);
    }
    expect(win.consume()).toBe(1);
    expect(win.remaining).toBe(2);
    // Without continued() the third chunk would already be a violation.
    const strict = new Window(2);
    strict.arrive();
    strict.arrive();
    expect(strict.arrive()).toBe('violation');
  });

  it('clone is independent and keeps the batch', () => {
    const win = new Window(8);
    win.arrive();
    win.consume();
    const copy = win.clone();
    expect([copy.remaining, copy.pending, copy.batch]).toEqual([7, 1, 4]);
    copy.flush();
    expect([win.remaining, win.pending]).toEqual([7, 1]);
  });

  it('refuses a window that is not a safe natural', () => {
    for (const bad of [-1, 0.5, Number.NaN]) expect(() => new Window(bad)).toThrow(CreditError);
  });
});
