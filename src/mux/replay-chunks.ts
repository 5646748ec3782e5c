/**
 * Chunks replay logs copy encoded bodies into (replay-log.ts). A busy lane lets one go every
 * thousand records or so and needs another as often; a buffer fresh from the allocator costs its
 * zeroing and a page fault per 4 KiB on first touch, so the large ones are recycled here, shared by
 * every log of the process and bounded: at most {@link REPLAY_BUFFERS_KEPT} free buffers of 16, 32
 * or 64 KiB (4 MiB).
 *
 * A node sending fast to many peers has a log per lane, each holding up to a PING's worth of chunks
 * (REPLAY_PING_BYTES), freed a lane at a time as the PINGs are answered: the list must hold what
 * several lanes give back at once, or their next chunks come fresh from the allocator again.
 */

/** Free buffers kept for reuse. */
export const REPLAY_BUFFERS_KEPT = 64;
/** Smallest buffer worth keeping. */
const KEPT_MIN = 16_384;
const KEPT_MAX = 65_536;

const free: Uint8Array[] = [];

/** A buffer of exactly `size` bytes: a kept one if there is one of that size, else a new one. */
export function takeBuffer(size: number): Uint8Array {
  for (let i = free.length - 1; i >= 0; i--) {
    const b = free[i]!;
    if (b.byteLength === size) {
      free[i] = free[free.length - 1]!;
      free.pop();
      return b;
    }
  }
  return new Uint8Array(size);
}

/** Nothing refers to `buf` any more: keep it for reuse if it is of a kept size and there is room. */
export function giveBuffer(buf: Uint8Array): void {
  const n = buf.byteLength;
  // Kept once: a buffer kept twice would be handed to two writers.
  // Powers of two only: an odd size would rarely be asked for again, and would hold a slot.
  if (n >= KEPT_MIN && n <= KEPT_MAX && (n & (n - 1)) === 0 && free.length < REPLAY_BUFFERS_KEPT && !free.includes(buf))
    free.push(buf);
}

/** Free buffers kept now (for tests). */
export function keptBuffers(): number {
  return free.length;
}
