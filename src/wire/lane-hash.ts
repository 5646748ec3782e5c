/**
 * The splitmix64 finalizer used to place keyed streams on lanes (docs/protocol.md §10.6). Stable across
 * builds; u64 wrapping arithmetic done with bigint. Runs once per keyed bind, never per record.
 */

const MASK = 0xffff_ffff_ffff_ffffn;

/** splitmix64 of a u64 key. Golden: `hash(0) = 0xE220A8397B1DCDAF`, `hash(1) = 0x910A2DEC89025CC1`. */
export function splitmix64(key: bigint): bigint {
  let z = (BigInt.asUintN(64, key) + 0x9e37_79b9_7f4a_7c15n) & MASK;
  z = ((z ^ (z >> 30n)) * 0xbf58_476d_1ce4_e5b9n) & MASK;
  z = ((z ^ (z >> 27n)) * 0x94d0_49bb_1331_11ebn) & MASK;
  return z ^ (z >> 31n);
}

/** Lane for a keyed stream: `splitmix64(key) % lanes`. */
export function laneForKey(key: bigint, lanes: number): number {
  if (!Number.isInteger(lanes) || lanes < 1) return 0;
  return Number(splitmix64(key) % BigInt(lanes));
}
