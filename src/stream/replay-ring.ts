/**
 * A producer's replay ring (docs/protocol.md §8.3): the last records a resumable stream
 * handed to its slot, as the slot took them (an egress kind and its payload: the string, the bytes,
 * or the encoded body), numbered from 1 in send order, so that after a lost link the records the
 * consumer did not receive can be sent again. No copy is made of a value: a `Uint8Array` given to
 * `send()` must not be modified afterwards. Bounded by a per-stream and a node-wide byte cap; the
 * oldest records go first. One array made on first use and doubled while the byte cap allows (never
 * an object per record) holds each record as a pair: its payload, then one small integer for its
 * kind and its bytes (`bytes × 4 + kind`). A record stored or dropped touches one array, and
 * usually one cache line of it: with thousands of streams each token's ring is cold memory.
 */
import { REPLAY_RECORD_OVERHEAD } from '../mux/replay-log.ts';

/** The node-wide replay byte budget every ring of a node charges. */
export class ReplayBudget {
  readonly max: number;
  /** Bytes held by every ring and every lane's replay log. */
  used = 0;
  /**
   * Free another stream's ring when the budget is full (its owner sets it: the oldest finished
   * stream goes first); false when there is none to free.
   */
  evict: () => boolean = () => false;
  constructor(max: number) {
    this.max = max;
  }
}

export class ReplayRing {
  readonly #maxBytes: number;
  readonly #budget: ReplayBudget;
  readonly #initial: number;
  /** Per record, at `2i` its payload and at `2i + 1` its `bytes × 4 + kind` (exact for any byte count the caps allow). */
  #pairs: unknown[] = [];
  /** Records the ring has room for (0 until the first push; then a power of two). */
  #size = 0;
  #head = 0;
  #length = 0;
  #bytes = 0;
  /** Number of the oldest record held (the next one to push when the ring is empty). */
  #first = 1;

  /** `entries`: how many records the ring starts with (rounded up to a power of two). */
  constructor(entries: number, maxBytes: number, budget: ReplayBudget) {
    let n = 4;
    while (n < entries) n *= 2;
    this.#initial = n;
    this.#maxBytes = maxBytes;
    this.#budget = budget;
  }

  /** Number the next record pushed gets (records pushed so far + 1). */
  get next(): number {
    return this.#first + this.#length;
  }

  /** Number of the oldest record held. */
  get first(): number {
    return this.#first;
  }

  /** True if every record from `from` on is held. */
  holdsFrom(from: number): boolean {
    return from >= this.#first;
  }

  /** Bytes held. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Keep record `next`: `size` is its payload's length (a string's, or the bytes'). */
  push(kind: number, payload: unknown, size: number): void {
    const bytes = size + REPLAY_RECORD_OVERHEAD;
    const budget = this.#budget;
    // The common case: room in the ring and under both caps.
    if (this.#length < this.#size && this.#bytes + bytes <= this.#maxBytes && budget.used + bytes <= budget.max) {
      this.#store(kind, payload, bytes);
      return;
    }
    this.#pushSlow(kind, payload, bytes);
  }

  #store(kind: number, payload: unknown, bytes: number): void {
    const i = ((this.#head + this.#length) & (this.#size - 1)) << 1;
    const pairs = this.#pairs;
    pairs[i] = payload;
    pairs[i + 1] = bytes * 4 + kind;
    this.#length++;
    this.#bytes += bytes;
    this.#budget.used += bytes;
  }

  #pushSlow(kind: number, payload: unknown, bytes: number): void {
    const budget = this.#budget;
    if (this.#size === 0) this.#alloc(this.#initial);
    else if (this.#length === this.#size) {
      if (this.#bytes + bytes <= this.#maxBytes) this.#grow();
      else this.#dropOldest();
    }
    // A full node-wide budget takes finished streams' rings before this live one's records.
    while (budget.used + bytes > budget.max && budget.evict()) {}
    while (this.#length > 0 && (this.#bytes + bytes > this.#maxBytes || budget.used + bytes > budget.max))
      this.#dropOldest();
    if (bytes > this.#maxBytes || budget.used + bytes > budget.max) {
      // Too big to keep at all: the ring holds nothing from here back.
      this.#first++;
      return;
    }
    this.#store(kind, payload, bytes);
  }

  /** The kind of record `n` (held: see {@link holdsFrom}). */
  kindAt(n: number): number {
    return (this.#pairs[(((this.#head + n - this.#first) & (this.#size - 1)) << 1) + 1] as number) % 4;
  }

  /** The payload of record `n`. */
  payloadAt(n: number): unknown {
    return this.#pairs[((this.#head + n - this.#first) & (this.#size - 1)) << 1];
  }

  /**
   * Keep at most the last `n` records: older ones the consumer has for sure (in flight and
   * withheld records are all a lost link can take, and the caller counts them).
   */
  keepLast(n: number): void {
    if (this.#length > n) this.#drop(this.#length - n);
  }

  /** Number the records held so that the newest is `last` (a ring refilled from a lane's replay log). */
  renumber(last: number): void {
    this.#first = last + 1 - this.#length;
  }

  /** Records held. */
  get length(): number {
    return this.#length;
  }

  /** Forget records up to `n` (the consumer has them). */
  trim(n: number): void {
    if (this.#length > 0 && this.#first <= n) this.#drop(Math.min(this.#length, n - this.#first + 1));
    if (this.#length === 0 && this.#first <= n) this.#first = n + 1;
  }

  /** Let every record go (the stream is over). */
  clear(): void {
    this.trim(this.next - 1);
  }

  #dropOldest(): void {
    this.#drop(1);
  }

  /** Drop the oldest `count` records (1..length), the budget charged back once. */
  #drop(count: number): void {
    const pairs = this.#pairs;
    const mask = this.#size - 1;
    let i = this.#head;
    let b = 0;
    for (let k = 0; k < count; k++) {
      pairs[i << 1] = undefined;
      b += Math.floor((pairs[(i << 1) + 1] as number) / 4);
      i = (i + 1) & mask;
    }
    this.#bytes -= b;
    this.#budget.used -= b;
    this.#head = i;
    this.#length -= count;
    this.#first += count;
  }

  #alloc(n: number): void {
    // Holes-free from the start (fill), so the array keeps one elements kind as records come and go.
    this.#pairs = new Array<unknown>(2 * n).fill(undefined);
    this.#size = n;
    this.#head = 0;
  }

  #grow(): void {
    const pairs = this.#pairs;
    const size = this.#size;
    const head = this.#head;
    this.#alloc(size * 2);
    for (let k = 0; k < this.#length; k++) {
      const j = (head + k) & (size - 1);
      this.#pairs[k << 1] = pairs[j << 1];
      this.#pairs[(k << 1) + 1] = pairs[(j << 1) + 1];
    }
  }
}
