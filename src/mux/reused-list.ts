/**
 * A list refilled batch after batch (the slots a batch touched). It is emptied by its count, not by
 * `length = 0`: V8 frees the storage of an array truncated to nothing, so every batch grew it again
 * from a few elements, copying as it went (about 12 bytes of garbage per token on each side at 256
 * streams: `node bench/alloc.mjs`).
 * Emptying drops the references, so a closed slot is not kept alive by a stale entry.
 */
export class ReusedList<T> {
  readonly #items: Array<T | undefined> = [];
  /** Items in the list. */
  length = 0;

  push(item: T): void {
    this.#items[this.length++] = item;
  }

  /** Item `i` (`0 <= i < length`). */
  at(i: number): T {
    return this.#items[i] as T;
  }

  /** Empty the list, keeping its storage. */
  clear(): void {
    const items = this.#items;
    for (let i = 0; i < this.length; i++) items[i] = undefined;
    this.length = 0;
  }
}
