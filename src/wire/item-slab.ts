/**
 * Where a received `Item(bytes)` is copied to. A byte item is copied out of its batch so that an
 * item the consumer keeps does not keep the whole batch alive. A copy of its own costs an
 * `ArrayBuffer` above V8's on-heap typed-array size (64 bytes): a backing store allocated, tracked
 * and swept, 1–3 µs each on Node 20, twelve times the whole rest of the receive path for a 128-byte
 * item. A slab copies items of one stream side by side into one larger buffer and hands out views:
 * one allocation per many items.
 *
 * One slab per stream, so what a stream's items pin is that stream's own recent items. A slot's
 * buffered items are a run at the end of its stream, so the slabs they reach into are the current
 * one and those just before it; the tail a slab leaves unused is smaller than the next item, which
 * is buffered too. Beyond the bytes the credit laws count, a stream's slabs hold at most as much
 * again plus two slabs (2 × {@link SLAB_MAX_BYTES}). Slabs start at four items and double, so a
 * stream that receives one item holds a small slab, not the largest.
 */

/** V8 keeps a typed array of at most this many bytes on its heap, where a copy is a cheap allocation. */
export const ON_HEAP_BYTES = 64;
/** The largest slab; items above a quarter of it get an exact copy of their own. */
export const SLAB_MAX_BYTES = 8192;
const POOLED_MAX = SLAB_MAX_BYTES / 4;

const EMPTY = new Uint8Array(0);

/** A plain `Uint8Array` copy of `[start, end)`, whatever the source's species (a Node `Buffer`'s own `slice` is a view). */
export function copyBytes(buf: Uint8Array, start = 0, end = buf.byteLength): Uint8Array {
  if (buf.constructor === Uint8Array) return buf.slice(start, end);
  const out = new Uint8Array(end - start);
  out.set(buf.subarray(start, end));
  return out;
}

/** Copies one stream's received byte items into shared slabs (see the file's comment). */
export class ItemSlab {
  #slab: Uint8Array = EMPTY;
  #used = 0;

  /** A copy of `buf[start, end)` that does not alias `buf`: a view into this slab, or a buffer of its own. */
  copy(buf: Uint8Array, start: number, end: number): Uint8Array {
    const n = end - start;
    if (n <= ON_HEAP_BYTES || n > POOLED_MAX) return copyBytes(buf, start, end);
    let slab = this.#slab;
    let at = this.#used;
    if (at + n > slab.byteLength) {
      // Four items' worth at first, then double: a stream that gets few items holds a small slab.
      slab = this.#slab = new Uint8Array(Math.min(SLAB_MAX_BYTES, Math.max(4 * n, 2 * slab.byteLength)));
      at = 0;
    }
    slab.set(buf.subarray(start, end), at);
    this.#used = at + n;
    return slab.subarray(at, at + n);
  }
}
