// The count behind the recyclers' free lists (replay chunks, the Node write pool): how many free
// buffers one keeps follows how many its users held at once.
import { describe, expect, it } from 'vitest';
import { WorkingSet } from '../../src/runtime/working-set.ts';

describe('WorkingSet', () => {
  it('leaves room for as many free buffers as were handed out at the busiest, less those still out', () => {
    const w = new WorkingSet(4, 100);
    for (let i = 0; i < 30; i++) w.took();
    // Ten come back while twenty are still out: room for all ten.
    let room = 0;
    for (let i = 0; i < 10; i++) room = w.gave();
    expect(w.lent).toBe(20);
    expect(room).toBe(10);
  });

  it('always leaves room for the floor, however many are out', () => {
    const w = new WorkingSet(4, 100);
    for (let i = 0; i < 3; i++) w.took();
    expect(w.gave()).toBe(4);
  });

  it('falls back to the floor once every buffer is back', () => {
    const w = new WorkingSet(4, 100);
    for (let i = 0; i < 30; i++) w.took();
    let room = 0;
    for (let i = 0; i < 30; i++) room = w.gave();
    expect(room).toBe(4);
    // The next busy moment is measured afresh.
    for (let i = 0; i < 6; i++) w.took();
    for (let i = 0; i < 3; i++) room = w.gave();
    expect(room).toBe(4);
  });

  it('never leaves room past its ceiling', () => {
    const w = new WorkingSet(4, 16);
    for (let i = 0; i < 50; i++) w.took();
    // 49 still out, past the ceiling of 16: the floor only.
    expect(w.gave()).toBe(4);
    let room = 0;
    for (let i = 0; i < 45; i++) {
      room = w.gave();
      expect(room).toBeLessThanOrEqual(16);
    }
    expect(w.lent).toBe(4);
  });

  it('forgets a busy moment as buffers come back while few are out, so users that keep a few for good let the rest go', () => {
    const w = new WorkingSet(4, 1000);
    for (let i = 0; i < 100; i++) w.took();
    let room = 0;
    for (let i = 0; i < 97; i++) room = w.gave();
    // Three stay out for good (a stream that never ends, a leaked log): the busy moment fades as the
    // rest of the traffic comes and goes.
    expect(room).toBeGreaterThan(4);
    for (let i = 0; i < 6000; i++) {
      w.took();
      room = w.gave();
    }
    expect(w.lent).toBe(3);
    expect(room).toBeLessThanOrEqual(8);
  });

  it('counts a buffer given back that was never out as back, so it never leaves more room than before', () => {
    const w = new WorkingSet(4, 100);
    w.took();
    expect(w.gave()).toBe(4);
    expect(w.gave()).toBe(4);
    expect(w.lent).toBe(0);
  });
});
