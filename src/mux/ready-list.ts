/**
 * The slots of a batcher whose withheld records may move, in the order they became ready: a FIFO
 * with a moving head, each slot listed at most once (its `ready` flag).
 *
 * A wake releases slots from the head until a full batch parks the batcher on admission; those it
 * did not reach stay listed, in order, for the wake after the unpark. With 16,384 streams a pass is
 * some twenty parked writes: re-listing the rest one by one at each of them, or walking every slot
 * at each unpark, cost O(streams) per write, so the cost per token grew with the number of streams.
 * The storage is kept, as {@link ReusedList}'s is.
 */
export class ReadyList<T extends { ready: boolean }> {
  readonly #items: Array<T | undefined> = [];
  #head = 0;
  #tail = 0;

  /** Slots listed. */
  get size(): number {
    return this.#tail - this.#head;
  }

  /** List `item` at the tail, unless it is listed. */
  add(item: T): void {
    if (item.ready) return;
    item.ready = true;
    this.#items[this.#tail++] = item;
  }

  /** Unlist the head slot and return it (the list must not be empty). */
  shift(): T {
    const items = this.#items;
    const head = this.#head;
    const item = items[head] as T;
    items[head] = undefined;
    item.ready = false;
    if (head + 1 === this.#tail) {
      this.#head = this.#tail = 0;
    } else {
      this.#head = head + 1;
      // A list that never empties (every wake parks before its end) is moved down now and then.
      if (head >= 1024 && 2 * head >= this.#tail) this.#compact();
    }
    return item;
  }

  /** Unlist every slot. */
  clear(): void {
    const items = this.#items;
    for (let i = this.#head; i < this.#tail; i++) {
      (items[i] as T).ready = false;
      items[i] = undefined;
    }
    this.#head = this.#tail = 0;
  }

  #compact(): void {
    const items = this.#items;
    const n = this.#tail - this.#head;
    for (let i = 0; i < n; i++) {
      items[i] = items[this.#head + i];
      items[this.#head + i] = undefined;
    }
    this.#head = 0;
    this.#tail = n;
  }
}
