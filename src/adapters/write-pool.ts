/**
 * Frame memory a socket reuses once it has written it: a lane batch (tens of KiB, made for each
 * batch) would otherwise be a fresh allocation every time, cold in cache and left to the garbage
 * collector. Power-of-two size classes from {@link WRITE_POOL_MIN} to {@link WRITE_POOL_MAX}; a frame
 * takes the class that holds it, so it never wastes more than half of its memory, and each class
 * keeps at most {@link WRITE_POOL_KEEP} free buffers (what the socket holds in flight is bounded by
 * admission; what is kept free is bounded here). Smaller and larger frames are not pooled.
 *
 * @packageDocumentation
 */

/** Smallest pooled frame (smaller ones come from the runtime's own small-buffer pool). */
export const WRITE_POOL_MIN = 4096;
/** Largest pooled frame: a default lane batch (60 KiB) and its framing. */
export const WRITE_POOL_MAX = 65_536;
/** Free buffers kept per size class. */
export const WRITE_POOL_KEEP = 8;

const MIN_SHIFT = 12;
const CLASSES = 5; // 4, 8, 16, 32, 64 KiB

/** The size class of a pooled length (`WRITE_POOL_MIN..WRITE_POOL_MAX`). */
function classOf(bytes: number): number {
  // 32 − clz32(bytes − 1) is ⌈log2 bytes⌉.
  return 32 - Math.clz32(bytes - 1) - MIN_SHIFT;
}

export class WritePool {
  readonly #free: ArrayBuffer[][] = Array.from({ length: CLASSES }, () => []);

  /** Free buffers held (for tests). */
  get freeCount(): number {
    let n = 0;
    for (const f of this.#free) n += f.length;
    return n;
  }

  /** True if a frame of `bytes` is pooled. */
  pooled(bytes: number): boolean {
    return bytes >= WRITE_POOL_MIN && bytes <= WRITE_POOL_MAX;
  }

  /** Memory for a pooled frame of `bytes` (see {@link pooled}): a free buffer of its class, or a new one. */
  take(bytes: number): ArrayBuffer {
    const c = classOf(bytes);
    return this.#free[c]!.pop() ?? new ArrayBuffer(1 << (c + MIN_SHIFT));
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

  /** `ab` was written: keep it for a later frame (unless its class holds enough). */
  give(ab: ArrayBuffer): void {
    const f = this.#free[classOf(ab.byteLength)];
    if (f !== undefined && f.length < WRITE_POOL_KEEP) f.push(ab);
  }
}
