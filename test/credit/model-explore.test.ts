import { describe, expect, it } from 'vitest';
import { brokenProperties, enabled, explore, initial, apply } from './model-system.ts';
import type { SystemState } from './model-system.ts';

const PAIRS: ReadonlyArray<readonly [number, number]> = [
  [1, 1],
  [2, 2],
  [3, 3],
  [4, 4],
  [5, 5],
  [2, 8],
  [4, 32],
  [3, 7],
];

describe('the closed credit system: exhaustive exploration, up to 12 chunks', () => {
  for (const [ws, wr] of PAIRS) {
    it(`(Ws, Wr) = (${ws}, ${wr}): every reachable state keeps conserved, never_overruns, buffer_bounded, blocked_sender_is_waited_for`, () => {
      for (const policy of ['any', 'never', 'before-block'] as const) {
        const result = explore(ws, wr, policy);
        if (policy === 'any') expect(result.states, policy).toBeGreaterThan(12);
        expect(result.broken, policy).toEqual([]);
        expect(result.violations, policy).toBe(0);
      }
    });

    it(`(Ws, Wr) = (${ws}, ${wr}): with flush-before-block no deadlock is reachable and every run can complete`, () => {
      const result = explore(ws, wr, 'before-block');
      expect(result.deadlocks).toEqual([]);
      expect(result.completed).toBe(true);
    });
  }

  it('the checker is not vacuous: a state that leaks a credit breaks conserved and blocked_sender_is_waited_for', () => {
    let s: SystemState = initial(2, 2);
    s = apply(s, { kind: 'send' }).next;
    s = apply(s, { kind: 'send' }).next; // sender blocked at 0, 2 chunks in flight
    expect(brokenProperties(s)).toEqual([]);
    const leaked: SystemState = { ...s, c: 1 }; // one chunk vanished in flight
    expect(brokenProperties(leaked)).toEqual(
      expect.arrayContaining(['conserved', 'conserved (with buffer)', 'blocked_sender_is_waited_for']),
    );
    s = apply(s, { kind: 'arrive' }).next;
    s = apply(s, { kind: 'arrive' }).next; // the receiver's window is now used up
    expect(brokenProperties(s)).toEqual([]);
    const overrun: SystemState = { ...s, c: 1 }; // a chunk the gate never allowed
    expect(brokenProperties(overrun)).toContain('never_overruns');
  });
});

describe('the closed credit system: flush-before-block is what prevents deadlock', () => {
  for (const [ws, wr] of [
    [2, 8],
    [4, 32],
  ] as const) {
    it(`Ws = ${ws} against Wr = ${wr}: a receiver that never flushes deadlocks holding ${ws} pending below its batch`, () => {
      const result = explore(ws, wr, 'never');
      expect(result.deadlocks.length).toBeGreaterThan(0);
      const dead = result.deadlocks[0] as SystemState;
      // The sender waits, nothing is in flight or buffered, and the receiver sits on sub-batch credit.
      expect(dead.gate.clone().acquire(1)).toBe('wait');
      expect(dead.c).toBe(0);
      expect(dead.q).toEqual([]);
      expect(dead.b).toBe(0);
      expect(dead.win.pending).toBe(ws);
      expect(dead.win.pending).toBeLessThan(dead.win.batch);
      expect(dead.win.batch).toBe(wr / 2);
      // Every deadlock of this receiver has the same shape.
      for (const d of result.deadlocks) {
        expect([d.gate.available, d.c, d.q.length, d.b, d.win.pending]).toEqual([0, 0, 0, 0, ws]);
      }
      // The flush that flush-before-block would run is exactly what unblocks it.
      expect(enabled(dead, 'before-block', 12).map((step) => step.kind)).toEqual(['flush']);
      expect(dead.win.clone().flush()).toBe(ws);
    });

    it(`Ws = ${ws} against Wr = ${wr}: with flush-before-block no deadlock state is reachable`, () => {
      const result = explore(ws, wr, 'before-block');
      expect(result.deadlocks).toEqual([]);
      expect(result.completed).toBe(true);
    });
  }

  it('equal windows cannot deadlock even without flushes (pending would reach the batch first)', () => {
    for (let w = 1; w <= 5; w++) expect(explore(w, w, 'never').deadlocks).toEqual([]);
  });
});
