// Bounded MessagePack (src/wire/msgpack.ts): the shape pre-scan refuses container bombs before the
// decoder allocates, nesting is capped, and the shared encoder does not keep a huge buffer forever.
import { Decoder, encode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import {
  CACHED_DECODE_LIMIT,
  MAX_DEPTH,
  SHARED_ENCODER_KEEP,
  checkShape,
  decodeBounded,
  encodeShared,
} from '../../src/wire/msgpack.ts';

function nested(size: number, unit: readonly number[]): Uint8Array {
  const b = new Uint8Array(size);
  for (let i = 0; i + unit.length <= size; i += unit.length) b.set(unit, i);
  return b;
}

describe('MessagePack shape pre-scan and nesting bound', () => {
  it('refuses array16 and map16 nesting bombs quickly, before the decoder allocates', () => {
    for (const unit of [
      [0xdc, 0x3e, 0x80],
      [0xde, 0x3e, 0x80, 0x01],
      [0xdd, 0, 1, 0, 0],
    ]) {
      const b = nested(256 * 1024, unit);
      const heap = process.memoryUsage().heapUsed;
      const t0 = performance.now();
      expect(() => checkShape(b)).toThrow(
        /MessagePack container declares \d+ items at byte \d+, more than the \d+ bytes left/,
      );
      expect(() => decodeBounded(b)).toThrow(RangeError);
      expect(performance.now() - t0).toBeLessThan(200);
      expect(process.memoryUsage().heapUsed - heap).toBeLessThan(16 * 1024 * 1024);
    }
  });

  it(`bounds nesting at ${MAX_DEPTH}`, () => {
    let v: unknown = 1;
    for (let i = 0; i < MAX_DEPTH; i++) v = [v];
    expect(decodeBounded(encode(v))).toEqual(v);
    expect(() => decodeBounded(encode([v]))).toThrow(`MessagePack nesting deeper than ${MAX_DEPTH}`);
    // Nothing leaks between calls: a shallow value decodes right after a refusal.
    expect(decodeBounded(encode({ a: [1, [2]] }))).toEqual({ a: [1, [2]] });
  });

  it('accepts every valid encoding and refuses truncated, trailing and invalid input', () => {
    const samples: unknown[] = [
      null,
      true,
      false,
      0,
      1,
      -1,
      127,
      -33,
      2 ** 40,
      -(2 ** 40),
      1.5,
      '',
      'é',
      'x'.repeat(300),
      'y'.repeat(70_000),
      new Uint8Array(0),
      new Uint8Array(300),
      new Uint8Array(70_000),
      [],
      {},
      [[], {}, [[[]]]],
      { code: 'ERR_X', message: 'm', retryable: false },
      { a: [1, 2, { b: new Uint8Array(70) }], c: 'é' },
      Array.from({ length: 20 }, (_, i) => i),
      Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i])),
      2n ** 63n,
      -(2n ** 63n),
      new Date(1_700_000_000_123),
    ];
    for (const s of samples) {
      const bytes = encode(s, { useBigInt64: true });
      expect(() => checkShape(bytes)).not.toThrow();
      expect(decodeBounded(bytes)).toEqual(s);
    }
    for (const bad of [
      [],
      [0x91],
      [0x92, 1],
      [0xc4, 5, 1],
      [1, 2],
      [0xc1],
      [0xdd, 0xff, 0xff, 0xff, 0xff, 1],
      [0xcb, 0, 0],
    ]) {
      expect(() => checkShape(Uint8Array.from(bad)), JSON.stringify(bad)).toThrow(RangeError);
    }
  });

  it('never refuses what the decoder accepts (random short inputs)', () => {
    const bias = [0x90, 0x91, 0x92, 0x81, 0xa1, 0xc4, 0x01, 0x00, 0xdc, 0xc0, 0xd4, 0xc7];
    let seed = 12345;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x80000000;
    };
    const plain = new Decoder({ useBigInt64: true });
    for (let i = 0; i < 20_000; i++) {
      const b = new Uint8Array(1 + Math.floor(rnd() * 12));
      for (let j = 0; j < b.length; j++)
        b[j] = rnd() < 0.5 ? Math.floor(rnd() * 256) : (bias[Math.floor(rnd() * bias.length)] as number);
      let decodable = true;
      try {
        plain.decode(b);
      } catch {
        decodable = false;
      }
      if (decodable) expect(() => checkShape(b), Buffer.from(b).toString('hex')).not.toThrow();
    }
  });
});

describe('MessagePack buffers are not kept forever', () => {
  it('replaces the shared encoder after a result over the keep limit', () => {
    const big = encodeShared('x'.repeat(SHARED_ENCODER_KEEP + 10));
    expect(big.byteLength).toBeGreaterThan(SHARED_ENCODER_KEEP);
    const small = encodeShared(1);
    // Before the fix the small result was a view of the same (large) shared buffer.
    expect(small.buffer).not.toBe(big.buffer);
    expect(small.buffer.byteLength).toBeLessThan(SHARED_ENCODER_KEEP);
    expect(Array.from(small)).toEqual([1]);
    // Below the limit the encoder (and its buffer) is reused.
    const again = encodeShared(2);
    expect(again.buffer).toBe(encodeShared(3).buffer);
  });

  it('decodes inputs above the cached-decoder limit correctly (fresh decoder each time)', () => {
    const body = new Uint8Array(CACHED_DECODE_LIMIT * 2).fill(7);
    const bytes = encode({ body });
    expect(decodeBounded(bytes)).toEqual({ body });
    expect(decodeBounded(encode('small'))).toBe('small');
  });
});
