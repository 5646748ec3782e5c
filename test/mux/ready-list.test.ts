import { describe, expect, it } from 'vitest';
import { ReadyList } from '../../src/mux/ready-list.ts';

const item = (id: number) => ({ id, ready: false });

describe('ReadyList', () => {
  it('lists a slot once, and hands slots back in the order they were listed', () => {
    const list = new ReadyList<ReturnType<typeof item>>();
    const [a, b, c] = [item(1), item(2), item(3)];
    list.add(a);
    list.add(b);
    list.add(a);
    list.add(c);
    expect(list.size).toBe(3);
    expect([list.shift().id, list.shift().id]).toEqual([1, 2]);
    expect(a.ready).toBe(false);
    // A slot taken off may be listed again, behind those still listed.
    list.add(a);
    expect([list.shift().id, list.shift().id]).toEqual([3, 1]);
    expect(list.size).toBe(0);
  });

  it('keeps FIFO order through the move-down of a list that never empties', () => {
    const list = new ReadyList<ReturnType<typeof item>>();
    const all = Array.from({ length: 5000 }, (_, i) => item(i));
    const out: number[] = [];
    let next = 0;
    // Three in, two out, over and over: the head passes 1,024 with the list still non-empty.
    while (next < all.length) {
      for (let k = 0; k < 3 && next < all.length; k++) list.add(all[next++]!);
      for (let k = 0; k < 2 && list.size > 0; k++) out.push(list.shift().id);
    }
    while (list.size > 0) out.push(list.shift().id);
    expect(out).toEqual(all.map((x) => x.id));
    expect(all.every((x) => !x.ready)).toBe(true);
  });

  it('clear unlists every slot, so each can be listed again', () => {
    const list = new ReadyList<ReturnType<typeof item>>();
    const [a, b] = [item(1), item(2)];
    list.add(a);
    list.add(b);
    list.shift();
    list.clear();
    expect(list.size).toBe(0);
    expect(b.ready).toBe(false);
    list.add(b);
    expect(list.shift()).toBe(b);
  });
});
