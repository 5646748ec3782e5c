/**
 * The mux-owned per-slot buffer the consumer reads directly (seed chapter, "Credit against a
 * mux-owned buffer"): C+1 deep (C data records plus one terminal reserve). Ingress only pushes into
 * space that credit already reserved, so a push never fails in a correct run; the consumer's take
 * is the drain signal that returns credit. Frames are held as a `FrameKind` number and a value.
 */

import { isTerminalKind } from '../wire/frame.ts';

/** Called when the consumer takes a record: `bytes` is the record's body size. */
export type DrainListener = (bytes: number, isData: boolean) => void;

/** A bounded ring of decoded frames with one waiting reader. */
export class SlotBuffer {
  readonly capacity: number;
  // Plain arrays that start empty: a ring writes its slots in index order (the next write index is
  // never past the highest written + 1), so they grow by appending, to the depth the stream really
  // uses. Most streams carry a handful of frames; typed arrays of C+1 per slot were a measurable
  // share of a stream's setup cost (two backing stores per stream to allocate and sweep).
  readonly #kinds: number[] = [];
  readonly #values: unknown[] = [];
  readonly #sizes: number[] = [];
  #head = 0;
  #length = 0;
  #closed = false;
  /** The usual single reader's waker; further concurrent readers wait in `#more`. */
  #waker: (() => void) | null = null;
  #more: Array<() => void> | null = null;
  /** Drain signal: set by ingress when the slot is live. */
  onDrain: DrainListener | null = null;
  /** Frames of the current take (valid until the next take). */
  kind = 0;
  value: unknown = undefined;

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  get length(): number {
    return this.#length;
  }
  /** No more frames will be pushed (the slot closed). */
  get closed(): boolean {
    return this.#closed;
  }

  /** Push a frame. Returns false when full (a credit invariant break: `reader_stall_total`). */
  push(kind: number, value: unknown, bytes: number): boolean {
    if (this.#closed || this.#length >= this.capacity) return false;
    const i = (this.#head + this.#length) % this.capacity;
    this.#kinds[i] = kind;
    this.#values[i] = value;
    this.#sizes[i] = bytes;
    this.#length++;
    this.#signal();
    return true;
  }

  /** Push a terminal even into a full buffer, for injected `Dropped` (the reserve is unspent). */
  pushForced(kind: number, value: unknown): void {
    if (this.#closed) return;
    if (this.#length >= this.capacity) {
      // Drop the newest to make room: only reachable after a protocol fault.
      this.#length--;
    }
    const i = (this.#head + this.#length) % this.capacity;
    this.#kinds[i] = kind;
    this.#values[i] = value;
    this.#sizes[i] = 0;
    this.#length++;
    this.#signal();
  }

  /** Discard every unread frame (no drain signal: their credit is moot once the slot ends). */
  clear(): void {
    for (let k = 0; k < this.#length; k++) this.#values[(this.#head + k) % this.capacity] = undefined;
    this.#head = 0;
    this.#length = 0;
  }

  /** No more pushes; a waiting reader wakes and sees the end once the buffer is empty. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#signal();
  }

  /**
   * Take the oldest frame into `kind`/`value`. Returns false when empty. Fires the drain signal,
   * which is what returns credit to the sender.
   */
  take(): boolean {
    if (this.#length === 0) return false;
    const i = this.#head;
    this.kind = this.#kinds[i]!;
    this.value = this.#values[i];
    this.#values[i] = undefined;
    const bytes = this.#sizes[i]!;
    this.#head = (i + 1) % this.capacity;
    this.#length--;
    this.onDrain?.(bytes, !isTerminalKind(this.kind));
    return true;
  }

  /** Resolves when a frame is available or the buffer closes. One promise per wait, not per frame; any number of waiters. */
  waitReadable(): Promise<void> {
    if (this.#length > 0 || this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.#waker === null) this.#waker = resolve;
      else (this.#more ??= []).push(resolve);
    });
  }

  /**
   * {@link waitReadable} without a promise, for push-mode readers: `wake` runs once, at the next
   * push or close (synchronously, inside ingress — so it must only schedule work, never read), or
   * at once when a frame or the end is already here.
   */
  notifyReadable(wake: () => void): void {
    if (this.#length > 0 || this.#closed) {
      wake();
      return;
    }
    if (this.#waker === null) this.#waker = wake;
    else (this.#more ??= []).push(wake);
  }

  #signal(): void {
    // Every waiter re-checks after waking, so concurrent readers never lose a wakeup.
    const w = this.#waker;
    if (w === null) return;
    this.#waker = null;
    w();
    const more = this.#more;
    if (more !== null) {
      this.#more = null;
      for (const f of more) f();
    }
  }

}
