/**
 * The mux-owned per-slot buffer the consumer reads directly (docs/protocol.md §10.7):
 * C+1 deep (C data records plus one terminal reserve). Ingress only pushes into
 * space that credit already reserved, so a push never fails in a correct run; the consumer's take
 * is the drain signal that returns credit. Frames are held as a `FrameKind` number and a value.
 */

import { FrameKind, isTerminalKind } from '../wire/frame.ts';

/** Called when the consumer takes a record: `bytes` is the record's body size. */
export type DrainListener = (bytes: number, isData: boolean) => void;

/** The peer window a mux slot buffer's records are charged to (ingress's per-peer account). */
export interface WindowSink {
  /** `bytes` of a charged record left the buffer (taken or discarded). */
  release(bytes: number): void;
}

/**
 * A push-mode reader that may take an item straight from ingress, bypassing the ring, while it waits
 * on an empty buffer (the anchor's `consume()`).
 */
export interface DirectReader {
  /**
   * Take `value`, an `Item` for `buffer`, and deliver it now, if it is the next value this reader
   * delivers (true); else do nothing (false). The delivery may pause, cancel or end the reader; it never throws.
   */
  _direct(buffer: SlotBuffer, value: unknown): boolean;
}

/** Set on a stored kind when the record is charged to the peer window (kinds are < 0x80). */
const CHARGED = 0x80;

/** Entries a ring starts with. */
const INITIAL_ENTRIES = 4;

/** A bounded ring of decoded frames with one waiting reader. */
export class SlotBuffer {
  /** The push-mode reader of this buffer, if any (set by the anchor; ingress may hand it items directly). */
  direct: DirectReader | null = null;
  // Read with `direct` for every record ingress hands over (V8 lays fields out as declared).
  #length = 0;
  /** Frames it holds at most (a tuned credit window raises it: {@link SlotBuffer.grow}). */
  capacity: number;
  // The ring starts small and doubles up to `capacity` (exactly, at the last step): most streams
  // carry a handful of frames, so setup allocates four entries, while a stalled stream at its full
  // window costs what a ring of C+1 costs (typed arrays, no per-entry boxing or growth slack).
  #kinds: Uint8Array;
  #values: unknown[];
  #sizes: Uint32Array;
  #size: number;
  #head = 0;
  #closed = false;
  /** The usual single reader's waker; further concurrent readers wait in `#more`. */
  #waker: (() => void) | null = null;
  #more: Array<() => void> | null = null;
  /** Drain signal: set by ingress when the slot is live. */
  onDrain: DrainListener | null = null;
  /**
   * The peer window charged records release into (set by ingress at claim; null for local and
   * per-stream buffers). It outlives the slot: unread records of a retired slot stay charged until
   * the consumer takes or discards them.
   */
  window: WindowSink | null = null;
  /** Bytes of charged records in the buffer. */
  windowBytes = 0;
  /** Frames of the current take (valid until the next take). */
  kind = 0;
  value: unknown = undefined;

  /** Raise the capacity to `capacity` (never lowers it: frames already admitted stay admissible). */
  grow(capacity: number): void {
    if (capacity > this.capacity) this.capacity = capacity;
  }

  constructor(capacity: number) {
    this.capacity = capacity;
    const n = Math.min(capacity, INITIAL_ENTRIES);
    this.#size = n;
    this.#kinds = new Uint8Array(n);
    this.#values = new Array<unknown>(n).fill(undefined);
    this.#sizes = new Uint32Array(n);
  }

  get length(): number {
    return this.#length;
  }
  /** No more frames will be pushed (the slot closed). */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Push a frame. Returns false when full (a credit invariant break: `reader_stall_total`). With
   * `charged`, the record counts against {@link window} until it is taken or discarded.
   */
  push(kind: number, value: unknown, bytes: number, charged = false): boolean {
    if (this.#closed || this.#length >= this.capacity) return false;
    if (this.#length === this.#size) this.#grow();
    const i = (this.#head + this.#length) % this.#size;
    if (charged) {
      this.#kinds[i] = kind | CHARGED;
      this.windowBytes += bytes;
    } else this.#kinds[i] = kind;
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
      const j = (this.#head + this.#length) % this.#size;
      if (this.#kinds[j]! >= CHARGED) this.#uncharge(this.#sizes[j]!);
    } else if (this.#length === this.#size) {
      this.#grow();
    }
    const i = (this.#head + this.#length) % this.#size;
    this.#kinds[i] = kind;
    this.#values[i] = value;
    this.#sizes[i] = 0;
    this.#length++;
    this.#signal();
  }

  /** Double the ring (up to `capacity`), unwrapping it so the oldest frame is at 0. */
  #grow(): void {
    const size = this.#size;
    const next = Math.min(this.capacity, Math.max(INITIAL_ENTRIES, size * 2));
    const kinds = new Uint8Array(next);
    const values = new Array<unknown>(next).fill(undefined);
    const sizes = new Uint32Array(next);
    for (let k = 0; k < this.#length; k++) {
      const i = (this.#head + k) % size;
      kinds[k] = this.#kinds[i]!;
      values[k] = this.#values[i];
      sizes[k] = this.#sizes[i]!;
    }
    this.#kinds = kinds;
    this.#values = values;
    this.#sizes = sizes;
    this.#size = next;
    this.#head = 0;
  }

  /**
   * Discard every unread frame (no drain signal: their credit is moot once the slot ends). Their
   * bytes go back to the peer window.
   */
  clear(): void {
    for (let k = 0; k < this.#length; k++) this.#values[(this.#head + k) % this.#size] = undefined;
    this.#head = 0;
    this.#length = 0;
    if (this.windowBytes > 0) this.#uncharge(this.windowBytes);
  }

  #uncharge(bytes: number): void {
    this.windowBytes -= bytes;
    this.window?.release(bytes);
  }

  /** Unread `Item` and `SenderError` records: what a resume counts as received and not yet read (docs/protocol.md §8.3). */
  dataRecords(): number {
    let n = 0;
    for (let k = 0; k < this.#length; k++) {
      const kind = this.#kinds[(this.#head + k) % this.#size]! & ~CHARGED;
      if (kind === FrameKind.Item || kind === FrameKind.SenderError) n++;
    }
    return n;
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
    const kind = this.#kinds[i]!;
    this.value = this.#values[i];
    this.#values[i] = undefined;
    const bytes = this.#sizes[i]!;
    this.#head = (i + 1) % this.#size;
    this.#length--;
    if (kind >= CHARGED) {
      this.kind = kind & ~CHARGED;
      this.#uncharge(bytes);
    } else this.kind = kind;
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
