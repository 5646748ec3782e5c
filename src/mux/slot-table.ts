/**
 * The slot table of one (peer, lane), used by both sides: the batcher's owned slots and the
 * ingress's received ones. Entries sit at their SlotId's index (a plain array: the lookup per record
 * is one load and one compare); the key is the whole SlotId, so a stale id naming an index that has
 * since been reused at another generation finds nothing (ABA-safe, docs/protocol.md §10.2).
 *
 * Only the owning side allocates: {@link SlotTable.allocate} reuses the most recently freed index
 * (LIFO) at its next generation. The receiving side never allocates; it places and removes entries
 * at the ids the peer chose.
 */
import { slotIndex, type SlotId } from '../wire/slot-id.ts';

/** What a table holds: anything that knows its own SlotId. */
export interface SlotEntry {
  readonly id: SlotId;
}

export class SlotTable<T extends SlotEntry> {
  /** Entry per index; `undefined` for a free or never-used index. */
  readonly #entries: Array<T | undefined> = [];
  /** Next generation per index (owning side only; grown on allocation). */
  #generations = new Uint8Array(64);
  /** Freed indexes, most recent last. */
  readonly #free: number[] = [];
  /** Lowest index never allocated. */
  #nextIndex = 0;

  /** One past the highest index ever used: bound of an {@link at} walk. */
  get length(): number {
    return this.#entries.length;
  }

  /** The entry at `index` (any generation), if any. */
  at(index: number): T | undefined {
    return this.#entries[index];
  }

  /** The entry whose id is exactly `id` (index and generation), if any. */
  get(id: SlotId): T | undefined {
    const e = this.#entries[slotIndex(id)];
    return e !== undefined && e.id === id ? e : undefined;
  }

  /** Place `entry` at its index, replacing whatever was there. */
  put(entry: T): void {
    this.#entries[slotIndex(entry.id)] = entry;
  }

  /** Clear `entry`'s index if `entry` is what it holds; true when it was. The index is not reused. */
  remove(entry: T): boolean {
    const index = slotIndex(entry.id);
    if (this.#entries[index] !== entry) return false;
    this.#entries[index] = undefined;
    return true;
  }

  /** Clear the index outright (the receiving side, when a reused index displaces its entry). */
  clearAt(index: number): void {
    this.#entries[index] = undefined;
  }

  /**
   * Owning side: the SlotId for a new entry (the last freed index at its next generation, else a
   * fresh index at generation 0). The caller {@link put}s the entry made with it.
   */
  allocate(): SlotId {
    const index = this.#free.length > 0 ? this.#free.pop()! : this.#nextIndex++;
    if (index >= this.#generations.length) {
      const g = new Uint8Array(Math.max(index + 1, this.#generations.length * 2));
      g.set(this.#generations);
      this.#generations = g;
    }
    return ((index << 8) | this.#generations[index]!) >>> 0;
  }

  /**
   * Owning side: remove `entry` and free its index for reuse at the next generation (255 wraps to 0).
   * True when `entry` was the live one.
   */
  release(entry: T): boolean {
    const index = slotIndex(entry.id);
    if (this.#entries[index] !== entry) return false;
    this.#entries[index] = undefined;
    this.#generations[index] = (this.#generations[index]! + 1) & 0xff;
    this.#free.push(index);
    return true;
  }

  /**
   * Owning side, a fresh table replacing `prev` for the same (peer, lane) (a retired batcher): every
   * index `prev` ever used starts one generation on, so no id of `prev`'s — which the peer may still
   * name in a late credit or close — is given out again.
   */
  continueFrom(prev: SlotTable<SlotEntry>): void {
    const used = prev.#nextIndex;
    const g = new Uint8Array(Math.max(64, prev.#generations.length));
    for (let i = 0; i < used; i++) g[i] = (prev.#generations[i]! + 1) & 0xff;
    this.#generations = g;
  }

  /** Every live entry, by index. */
  *values(): IterableIterator<T> {
    for (const e of this.#entries) if (e !== undefined) yield e;
  }
}
