/**
 * Serial-number arithmetic on u32 `batch_seq` (docs/protocol.md §10.1).
 * `a` is newer than `b` when `0 < (a − b) mod 2^32 < 2^31`; at exactly 2^31 each reads as older.
 */

/** `(a − b) mod 2^32`. */
export function seqDistance(a: number, b: number): number {
  return (a - b) >>> 0;
}

/** True when `a` is newer than `b`. */
export function seqNewer(a: number, b: number): boolean {
  const d = (a - b) >>> 0;
  return d !== 0 && d < 0x8000_0000;
}

/** True when `a` is older than `b`. */
export function seqOlder(a: number, b: number): boolean {
  // At a distance of exactly 2^31 both values read as older than each other.
  return (a - b) >>> 0 >= 0x8000_0000;
}

/** Gap = received − expected, wrapping (e.g. expected 0xFFFFFFFE, received 1 → 3). */
export function seqGap(received: number, expected: number): number {
  return (received - expected) >>> 0;
}

/** The next sequence number, wrapping at 2^32. */
export function seqNext(a: number): number {
  return (a + 1) >>> 0;
}
