/**
 * Chunks replay logs copy encoded bodies into (replay-log.ts). A busy lane lets one go every
 * thousand records or so and needs another as often; a buffer fresh from the allocator costs its
 * zeroing and a page fault per 4 KiB on first touch, so the large ones (16, 32 or 64 KiB) are
 * recycled here, shared by every log of the process.
 *
 * How many free buffers are kept follows how many the logs use: a node sending fast to many peers
 * has a log per lane, each holding up to a PING's worth of chunks, freed a lane at a time as PINGs
 * are answered; with a fixed 16 kept, 16 lanes in the decode shape took three chunks in five fresh
 * from the allocator. So what is kept follows the logs' working set (runtime/working-set.ts): the
 * most lent out at once lately, less those still out, at least {@link REPLAY_BUFFERS_KEPT} and at
 * most {@link REPLAY_BUFFERS_KEPT_MAX}; it shrinks back as the logs go quiet.
 */

import { WorkingSet } from '../runtime/working-set.ts';

/** Free buffers kept however few the logs use (what an idle process keeps: 1 MiB of 64 KiB buffers at most). */
export const REPLAY_BUFFERS_KEPT = 16;
/** Most free buffers kept however busy the logs (16 MiB of 64 KiB buffers). */
export const REPLAY_BUFFERS_KEPT_MAX = 256;
/** Smallest buffer worth keeping. */
const KEPT_MIN = 16_384;
const KEPT_MAX = 65_536;

const free: Uint8Array[] = [];
const kept = new WorkingSet(REPLAY_BUFFERS_KEPT, REPLAY_BUFFERS_KEPT_MAX);

/** Powers of two only: an odd size would rarely be asked for again, and would hold a slot. */
function keptSize(n: number): boolean {
  return n >= KEPT_MIN && n <= KEPT_MAX && (n & (n - 1)) === 0;
}

/** A buffer of exactly `size` bytes: a kept one if there is one of that size, else a new one. */
export function takeBuffer(size: number): Uint8Array {
  if (!keptSize(size)) return new Uint8Array(size);
  kept.took();
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
  // Kept once (a buffer kept twice would be handed to two writers), and counted back once.
  if (!keptSize(buf.byteLength) || free.includes(buf)) return;
  const room = kept.gave();
  while (free.length > room) free.pop();
  if (free.length < room) free.push(buf);
}

/** Free buffers kept now (for tests). */
export function keptBuffers(): number {
  return free.length;
}
