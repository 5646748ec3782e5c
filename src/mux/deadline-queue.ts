/**
 * A FIFO of entries waiting for a deadline. One constant window per queue means deadlines arrive
 * in order, so the sweep expires from the head and never needs a timer per entry. Entries that no
 * longer wait (`waiting` false: a bind claimed or ended, an anchor that got a sender) are skipped
 * and compacted away, on the sweep and as entries are pushed, so the queue holds about what still
 * waits, not a whole window of finished entries. The mux keeps its accept windows here
 * (docs/protocol.md §8: an answered attach or a pre-bind waits for its OpenSlot), the node its
 * unattached anchors.
 */

/** Entries a queue may hold beyond twice what its last compaction kept before a push compacts it. */
const COMPACT_SLACK = 1024;

/** What a queue holds: anything with a deadline (runtime ms). */
export interface Deadlined {
  readonly deadline: number;
}

export class DeadlineQueue<E extends Deadlined> {
  /** Popped slots (before `#head`) are emptied: a finished entry is not kept until the next compaction. */
  #q: Array<E | undefined> = [];
  #head = 0;
  readonly #waiting: (entry: E) => boolean;
  /** Entries the last compaction kept: a push compacts once the queue holds twice that, plus the slack. */
  #kept = 0;

  /** `waiting(entry)`: the entry still waits for its deadline (false: skip it, it may be dropped). */
  constructor(waiting: (entry: E) => boolean) {
    this.#waiting = waiting;
  }

  /**
   * Queue an entry (its deadline is not before any queued one's). A queue past twice what its last
   * compaction kept drops the entries that no longer wait, so each compaction's cost is paid for by
   * the pushes since the last one: a node that opens and finishes streams faster than its window
   * holds about the entries still waiting, not a window's worth of finished ones.
   */
  push(entry: E): void {
    const q = this.#q;
    q.push(entry);
    if (q.length - this.#head > 2 * this.#kept + COMPACT_SLACK) this.#compact();
  }

  /** Entries held (waiting or not yet known to have stopped). */
  get size(): number {
    return this.#q.length - this.#head;
  }

  #compact(): void {
    this.#q = (this.#q.slice(this.#head) as E[]).filter(this.#waiting);
    this.#head = 0;
    this.#kept = this.#q.length;
  }

  /** True while some entry may still be waiting. */
  get pending(): boolean {
    return this.#head < this.#q.length;
  }

  /** The oldest entry not yet popped (waiting or not), if any: its deadline is the next to check. */
  peek(): E | undefined {
    return this.#head < this.#q.length ? this.#q[this.#head] : undefined;
  }

  /** Call `fn` on every entry still waiting, oldest first. */
  forEachWaiting(fn: (entry: E) => void): void {
    const q = this.#q as E[];
    const waiting = this.#waiting;
    for (let i = this.#head; i < q.length; i++) {
      const e = q[i]!;
      if (waiting(e)) fn(e);
    }
  }

  /**
   * Pop every entry whose deadline passed and that still waits, calling `expire` on each (entries
   * that no longer wait are popped as they reach the head). `live` bounds how much finished work
   * the queue may keep before it compacts.
   */
  expire(now: number, live: number, expire: (entry: E) => void): void {
    const waiting = this.#waiting;
    let q = this.#q;
    while (this.#head < q.length) {
      const e = q[this.#head]!;
      if (waiting(e) && e.deadline > now) break;
      q[this.#head++] = undefined;
      if (waiting(e)) expire(e);
      // `expire` may have cleared the queue, or compacted it by pushing: go on in what it holds now.
      q = this.#q;
    }
    if (this.#head > 1024 && this.#head * 2 > q.length) {
      q.splice(0, this.#head);
      this.#head = 0;
    }
    // Entries that no longer wait need no deadline: drop them so the queue does not keep a whole
    // window of finished streams alive.
    if (q.length - this.#head > 2 * live + COMPACT_SLACK) this.#compact();
  }

  /** Forget every entry. */
  clear(): void {
    this.#q = [];
    this.#head = 0;
    this.#kept = 0;
  }
}
