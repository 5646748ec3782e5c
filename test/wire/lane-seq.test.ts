/**
 * docs/protocol.md §10.6 (splitmix64 lane hash goldens) and §10.1 (serial batch_seq arithmetic laws).
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  MAX_LANES,
  laneForKey,
  seqDistance,
  seqGap,
  seqNewer,
  seqNext,
  seqOlder,
  splitmix64,
} from '../../src/wire/index.ts';

const MASK = 0xffff_ffff_ffff_ffffn;

/** splitmix64 written independently from docs/protocol.md §10.6 (mask after every add and multiply). */
function refSplitmix64(key: bigint): bigint {
  let z = (key + 0x9e37_79b9_7f4a_7c15n) & MASK;
  z = ((z ^ (z >> 30n)) * 0xbf58_476d_1ce4_e5b9n) & MASK;
  z = ((z ^ (z >> 27n)) * 0x94d0_49bb_1331_11ebn) & MASK;
  return z ^ (z >> 31n);
}

describe('splitmix64 lane hash (docs/protocol.md §10.6)', () => {
  it('hash(0) = 0xE220A8397B1DCDAF and hash(1) = 0x910A2DEC89025CC1', () => {
    expect(splitmix64(0n)).toBe(0xe220_a839_7b1d_cdafn);
    expect(splitmix64(1n)).toBe(0x910a_2dec_8902_5cc1n);
  });

  it('at 4 lanes, keys 0..7 map to lanes [3, 1, 2, 1, 2, 2, 0, 3]', () => {
    expect([0n, 1n, 2n, 3n, 4n, 5n, 6n, 7n].map((k) => laneForKey(k, 4))).toEqual([3, 1, 2, 1, 2, 2, 0, 3]);
  });

  it('matches an independent implementation on random u64 keys and stays a u64', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MASK }), (key) => {
        const h = splitmix64(key);
        expect(h).toBe(refSplitmix64(key));
        expect(h >= 0n && h <= MASK).toBe(true);
        for (const lanes of [1, 2, 3, 4, 7, 16]) expect(laneForKey(key, lanes)).toBe(Number(h % BigInt(lanes)));
      }),
      { numRuns: 1_000 },
    );
    expect(splitmix64(MASK)).toBe(refSplitmix64(MASK));
  });

  it('one lane (or an invalid lane count) always answers lane 0; lanes stay below the count', () => {
    for (let k = 0n; k < 64n; k++) {
      expect(laneForKey(k, 1)).toBe(0);
      expect(laneForKey(k, 0)).toBe(0);
      const l = laneForKey(k, MAX_LANES);
      expect(l).toBeGreaterThanOrEqual(0);
      expect(l).toBeLessThan(16);
    }
  });
});

const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
const HALF = 0x8000_0000;

describe('serial arithmetic laws (docs/protocol.md §10.1)', () => {
  it('seqNewer is irreflexive and antisymmetric except at distance 2^31, where neither is newer', () => {
    fc.assert(
      fc.property(u32, u32, (a, b) => {
        const d = (a - b) >>> 0;
        const ab = seqNewer(a, b);
        const ba = seqNewer(b, a);
        if (d === 0) {
          expect([ab, ba]).toEqual([false, false]);
        } else if (d === HALF) {
          expect([ab, ba]).toEqual([false, false]);
        } else {
          expect(ab).toBe(!ba);
          expect(ab).toBe(d < HALF);
        }
      }),
      { numRuns: 5_000 },
    );
    // The same at the exact 2^31 distance, for random bases.
    fc.assert(
      fc.property(u32, (a) => {
        const b = (a + HALF) >>> 0;
        expect(seqNewer(a, b)).toBe(false);
        expect(seqNewer(b, a)).toBe(false);
      }),
    );
  });

  it('seqOlder(a, b) equals seqNewer(b, a) away from distance 0 and 2^31', () => {
    fc.assert(
      fc.property(u32, u32, (a, b) => {
        const d = (a - b) >>> 0;
        fc.pre(d !== 0 && d !== HALF);
        expect(seqOlder(a, b)).toBe(seqNewer(b, a));
      }),
      { numRuns: 2_000 },
    );
  });

  it('seqNewer(a + k, a) for 0 < k < 2^31, and never for 2^31 ≤ k < 2^32', () => {
    fc.assert(
      fc.property(u32, fc.integer({ min: 1, max: HALF - 1 }), (a, k) => {
        expect(seqNewer((a + k) >>> 0, a)).toBe(true);
        expect(seqNewer(a, (a + k) >>> 0)).toBe(false);
      }),
      { numRuns: 2_000 },
    );
    fc.assert(
      fc.property(u32, fc.integer({ min: HALF, max: 0xffff_ffff }), (a, k) => {
        expect(seqNewer((a + k) >>> 0, a)).toBe(false);
      }),
      { numRuns: 2_000 },
    );
  });

  it('seqGap(received, expected) = (received − expected) mod 2^32, and seqGap(a + k, a) = k', () => {
    fc.assert(
      fc.property(u32, u32, (a, k) => {
        expect(seqGap((a + k) >>> 0, a)).toBe(k);
        const b = (a + k) >>> 0;
        expect((seqGap(a, b) + seqGap(b, a)) % 2 ** 32).toBe(0);
        expect(seqGap(b, a)).toBe(seqDistance(b, a));
        expect(seqGap(b, a)).toBeGreaterThanOrEqual(0);
        expect(seqGap(b, a)).toBeLessThanOrEqual(0xffff_ffff);
      }),
      { numRuns: 2_000 },
    );
  });

  it('seqNext wraps 0xFFFFFFFF to 0 and the successor is always newer', () => {
    expect(seqNext(0)).toBe(1);
    expect(seqNext(0xffff_fffe)).toBe(0xffff_ffff);
    expect(seqNext(0xffff_ffff)).toBe(0);
    fc.assert(
      fc.property(u32, (a) => {
        expect(seqNewer(seqNext(a), a)).toBe(true);
        expect(seqGap(seqNext(a), a)).toBe(1);
      }),
    );
  });
});
