import { describe, expect, it } from 'vitest';
import { ReusedList } from '../../src/mux/reused-list.ts';

describe('ReusedList', () => {
  it('holds what was pushed in order, and after clear() starts again from nothing', () => {
    const list = new ReusedList<{ n: number }>();
    for (let n = 0; n < 5; n++) list.push({ n });
    expect(list.length).toBe(5);
    expect(Array.from({ length: list.length }, (_, i) => list.at(i).n)).toEqual([0, 1, 2, 3, 4]);
    list.clear();
    expect(list.length).toBe(0);
    list.push({ n: 9 });
    expect(list.length).toBe(1);
    expect(list.at(0).n).toBe(9);
  });

  it('takes items pushed while it is walked (a reconcile that touches another slot)', () => {
    const list = new ReusedList<number>();
    list.push(1);
    const seen: number[] = [];
    for (let i = 0; i < list.length; i++) {
      seen.push(list.at(i));
      if (list.at(i) < 3) list.push(list.at(i) + 1);
    }
    expect(seen).toEqual([1, 2, 3]);
  });

  it('keeps no reference to an item once cleared', () => {
    const list = new ReusedList<object>();
    list.push({});
    list.clear();
    // The storage is kept, but its entry no longer names the item.
    expect(list.at(0)).toBeUndefined();
  });
});
