import { describe, expect, it } from 'vitest';
import { SlotTable } from '../../src/mux/slot-table.ts';
import { slotGeneration, slotId, slotIndex } from '../../src/wire/slot-id.ts';

const entry = (id: number) => ({ id });

describe('SlotTable', () => {
  it('allocates fresh indexes at generation 0, then reuses the last freed index (LIFO) at its next generation', () => {
    const t = new SlotTable<{ id: number }>();
    const a = entry(t.allocate());
    const b = entry(t.allocate());
    const c = entry(t.allocate());
    for (const e of [a, b, c]) t.put(e);
    expect([a.id, b.id, c.id]).toEqual([slotId(0, 0), slotId(1, 0), slotId(2, 0)]);
    expect(t.release(a)).toBe(true);
    expect(t.release(c)).toBe(true);
    expect(t.release(c)).toBe(false);
    expect(t.allocate()).toBe(slotId(2, 1));
    expect(t.allocate()).toBe(slotId(0, 1));
    expect(t.allocate()).toBe(slotId(3, 0));
  });

  it('is ABA-safe: a stale id naming a reused index finds nothing', () => {
    const t = new SlotTable<{ id: number }>();
    const old = entry(t.allocate());
    t.put(old);
    t.release(old);
    const now = entry(t.allocate());
    t.put(now);
    expect(slotIndex(now.id)).toBe(slotIndex(old.id));
    expect(t.get(old.id)).toBeUndefined();
    expect(t.get(now.id)).toBe(now);
    expect(t.at(slotIndex(old.id))).toBe(now);
  });

  it('wraps the generation 255 → 0', () => {
    const t = new SlotTable<{ id: number }>();
    let e = entry(t.allocate());
    for (let i = 0; i < 256; i++) {
      t.put(e);
      t.release(e);
      e = entry(t.allocate());
    }
    expect(slotGeneration(e.id)).toBe(0);
    expect(slotIndex(e.id)).toBe(0);
  });

  it('a table replacing a retired one gives out none of its ids: every index it used starts one generation on', () => {
    const old = new SlotTable<{ id: number }>();
    const a = entry(old.allocate());
    const b = entry(old.allocate());
    old.put(a);
    old.put(b);
    old.release(a);
    const fresh = new SlotTable<{ id: number }>();
    fresh.continueFrom(old);
    const given = [fresh.allocate(), fresh.allocate(), fresh.allocate()];
    for (const id of given) expect([a.id, b.id]).not.toContain(id);
    expect(given.map((id) => [slotIndex(id), slotGeneration(id)])).toEqual([
      [0, 2],
      [1, 1],
      [2, 0],
    ]);
  });

  it("receiving side: put at the peer's ids, remove only the entry held, values by index", () => {
    const t = new SlotTable<{ id: number }>();
    const x = entry(slotId(5, 7));
    const y = entry(slotId(2, 9));
    t.put(x);
    t.put(y);
    expect([...t.values()]).toEqual([y, x]);
    expect(t.length).toBe(6);
    expect(t.remove(entry(slotId(5, 7)))).toBe(false);
    expect(t.remove(x)).toBe(true);
    t.clearAt(2);
    expect([...t.values()]).toEqual([]);
  });
});
