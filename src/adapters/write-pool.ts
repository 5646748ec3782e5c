/**
 * Frame memory a socket reuses once it has written it: a lane batch (tens of KiB, made for each
 * batch) would otherwise be a fresh allocation every time, cold in cache and left to the garbage
 * collector. Power-of-two size classes from {@link WRITE_POOL_MIN} to {@link WRITE_POOL_MAX}; a frame
 * takes the class that holds it, so it never wastes more than half of its memory. Smaller and larger
 * frames are not pooled.
 *
 * What is kept free follows what the socket held in flight at its busiest (runtime/working-set.ts):
 * admission bounds that to about the high-water mark, 17 default batches, and a fixed 8 let a fast
 * sender at 16,384 streams allocate more than half its frames afresh. At least
 * {@link WRITE_POOL_KEEP} and at most {@link WRITE_POOL_KEEP_MAX} free per size class, back to the floor
 * once every frame of the class is written (the connection went quiet).
 *
 * @packageDocumentation
 */

import { WorkingSet } from '../runtime/working-set.ts';

/** Smallest pooled frame (smaller ones come from the runtime's own small-buffer pool). */
export const WRITE_POOL_MIN = 4096;
/** Largest pooled frame: a default lane batch (60 KiB) and its framing. */
export const WRITE_POOL_MAX = 65_536;
/** Free buffers kept per size class however quiet the socket is. */
export const WRITE_POOL_KEEP = 8;
/** Most buffers of a class, in flight and free together, the pool keeps room for (4 MiB of 64 KiB frames). */
export const WRITE_POOL_KEEP_MAX = 64;

const MIN_SHIFT = 12;
const CLASSES = 5; // 4, 8, 16, 32, 64 KiB

/** The size class of a pooled length (`WRITE_POOL_MIN..WRITE_POOL_MAX`). */
function classOf(bytes: number): number {
  // 32 − clz32(bytes − 1) is ⌈log2 bytes⌉.
  return 32 - Math.clz32(bytes - 1) - MIN_SHIFT;
}

export class WritePool {
  readonly #free: ArrayBuffer[][] = Array.from({ length: CLASSES }, () => []);
  #freeCount = 0;
  /** Per class: a batch's size sets its class, and a busy socket's batches keep to one or two. */
  readonly #kept = Array.from({ length: CLASSES }, () => new WorkingSet(WRITE_POOL_KEEP, WRITE_POOL_KEEP_MAX));

  /** Free buffers held (for tests). */
  get freeCount(): number {
    return this.#freeCount;
  }

  /** True if a frame of `bytes` is pooled. */
  pooled(bytes: number): boolean {
    return bytes >= WRITE_POOL_MIN && bytes <= WRITE_POOL_MAX;
  }

  /** Memory for a pooled frame of `bytes` (see {@link pooled}): a free buffer of its class, or a new one. */
  take(bytes: number): ArrayBuffer {
    const c = classOf(bytes);
    this.#kept[c]!.took();
    const ab = this.#free[c]!.pop();
    if (ab === undefined) return new ArrayBuffer(1 << (c + MIN_SHIFT));
    this.#freeCount--;
    return ab;
  }

  /**
   * The memory under `frame` if it is a pooled buffer (a view from its start, within a class's
   * size), else null. Anything written through the socket is the connection's own, so a buffer of
   * a class's exact size is free to reuse once written.
   */
  owner(frame: Uint8Array): ArrayBuffer | null {
    const n = frame.byteLength;
    if (n < WRITE_POOL_MIN || n > WRITE_POOL_MAX || frame.byteOffset !== 0) return null;
    const ab = frame.buffer;
    if (!(ab instanceof ArrayBuffer) || ab.byteLength !== 1 << (classOf(n) + MIN_SHIFT)) return null;
    return ab;
  }

  /** `ab` (from {@link take}) was written: keep it for a later frame, if the pool has room. */
  give(ab: ArrayBuffer): void {
    const c = classOf(ab.byteLength);
    const f = this.#free[c];
    if (f === undefined) return;
    const room = this.#kept[c]!.gave();
    // Fewer in flight than kept (the socket went quiet): let the surplus go.
    while (f.length > room) {
      f.pop();
      this.#freeCount--;
    }
    if (f.length < room) {
      f.push(ab);
      this.#freeCount++;
    }
  }
}
