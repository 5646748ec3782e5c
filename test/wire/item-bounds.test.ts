/**
 * Data-record values are decoded under the same bounds as control payloads: a peer's Item body
 * never makes the receiver reserve more than it sent. Before, nested array16 headers (3 bytes each,
 * each declaring 65,535 elements) made `@msgpack/msgpack` pre-allocate at every level: a 6 KB body
 * killed a consumer with a 512 MiB heap.
 */
import { describe, expect, it } from 'vitest';
import { encode as msgpackEncode } from '@msgpack/msgpack';
import { FrameKind, decodeFrame, decodeFrameAt } from '../../src/wire/frame.ts';
import type { DecodedFrame } from '../../src/wire/frame.ts';
import { WireError } from '../../src/wire/errors.ts';
import { AllocationGuard, concat, mulberry32 } from './helpers.ts';

/** `81 a4 "Item"`: the prefix of every Item body. */
const ITEM = Uint8Array.of(0x81, 0xa4, 0x49, 0x74, 0x65, 0x6d);

/** An Item whose value is `depth` nested array16 headers each declaring `count` elements. */
function nestedArrays(depth: number, count = 0xffff): Uint8Array {
  const body = new Uint8Array(ITEM.length + depth * 3);
  body.set(ITEM, 0);
  for (let i = 0; i < depth; i++) {
    body[ITEM.length + i * 3] = 0xdc;
    body[ITEM.length + i * 3 + 1] = count >>> 8;
    body[ITEM.length + i * 3 + 2] = count & 0xff;
  }
  return body;
}

/** map32 / array32 / str32 / bin32 headers that claim 2^32-1 entries or bytes. */
function wideHeaders(): Uint8Array[] {
  return [0xdd, 0xdf, 0xdb, 0xc6, 0xc9].map((h) =>
    concat(ITEM, Uint8Array.of(h, 0xff, 0xff, 0xff, 0xff), new Uint8Array(16)),
  );
}

const out: DecodedFrame = { kind: 0, value: undefined, terminal: false };

describe('bounded decoding of data-record values', () => {
  it('an Item of nested array16 headers (the 6 KB body that killed a consumer) is refused with ERR_DESERIALIZATION before anything is reserved', () => {
    const body = nestedArrays(2_000);
    expect(body.byteLength).toBeLessThan(6_100);
    const guard = new AllocationGuard();
    let thrown: unknown;
    guard.run(body.byteLength, () => {
      try {
        decodeFrame(body);
      } catch (e) {
        thrown = e;
      }
      decodeFrameAt(body, 0, body.byteLength, out);
    });
    expect(thrown).toBeInstanceOf(WireError);
    expect((thrown as WireError).code).toBe('ERR_DESERIALIZATION');
    expect(out.kind).toBe(FrameKind.Undecodable);
    expect(String(out.value)).toMatch(/not valid MessagePack/);
    expect(guard.violations).toEqual([]);
  });

  it('containers declaring 2^32-1 entries, strings or extensions over a few bytes are refused, never allocated', () => {
    const guard = new AllocationGuard();
    const kinds: number[] = [];
    guard.run(64, () => {
      for (const body of wideHeaders()) kinds.push(decodeFrameAt(body, 0, body.byteLength, out));
    });
    expect(kinds).toEqual(wideHeaders().map(() => FrameKind.Undecodable));
    expect(guard.violations).toEqual([]);
  });

  it('nesting deeper than 64 is refused; well-formed nested and wide values still round-trip', () => {
    const deep = concat(ITEM, new Uint8Array(70).fill(0x91), Uint8Array.of(0xc0));
    expect(decodeFrameAt(deep, 0, deep.byteLength, out)).toBe(FrameKind.Undecodable);
    const value = {
      a: [1, 2, [3, [4, { b: 'x'.repeat(300) }]]],
      wide: Array.from({ length: 2_000 }, (_, i) => i),
      m: { k: new Uint8Array([1, 2, 3]) },
    };
    const body = concat(ITEM, msgpackEncode(value));
    expect(decodeFrame(body)).toEqual({ kind: 'Item', value });
    expect(decodeFrameAt(body, 0, body.byteLength, out)).toBe(FrameKind.Item);
    expect(out.value).toEqual(value);
  });

  it('20,000 structure-aware mutations of nested and wide Item values: never a throw from decodeFrameAt, never a construction larger than the body', () => {
    const rand = mulberry32(0x5eed_17e5);
    const pick = (n: number): number => rand() % n;
    const headers = [
      0x90, 0x9f, 0x80, 0x8f, 0xdc, 0xdd, 0xde, 0xdf, 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb, 0xc7, 0xc8, 0xc9,
    ];
    const seeds = [
      msgpackEncode({ a: [1, [2, [3, [4]]]], b: 'text', c: new Uint8Array(8) }),
      msgpackEncode(Array.from({ length: 300 }, (_, i) => [i, { i }])),
      msgpackEncode(new Array(40).fill({ x: [[], {}, [[]]] })),
    ];
    const guard = new AllocationGuard();
    const counts = new Map<number, number>();
    for (let i = 0; i < 20_000; i++) {
      const value = seeds[pick(seeds.length)]!.slice();
      for (let m = 1 + pick(4); m > 0; m--) {
        const at = pick(value.byteLength);
        switch (pick(3)) {
          case 0: // a container or length header at a random place, with a random big count
            value[at] = headers[pick(headers.length)]!;
            if (at + 2 < value.byteLength) {
              value[at + 1] = pick(256);
              value[at + 2] = pick(256);
            }
            break;
          case 1:
            value[at] = pick(256);
            break;
          default:
            value[at] = value[at]! ^ (1 << pick(8));
        }
      }
      const body = concat(ITEM, value);
      guard.run(body.byteLength, () => {
        const kind = decodeFrameAt(body, 0, body.byteLength, out);
        counts.set(kind, (counts.get(kind) ?? 0) + 1);
      });
    }
    expect(guard.violations).toEqual([]);
    expect(counts.get(FrameKind.Undecodable) ?? 0).toBeGreaterThan(1_000);
    expect(counts.get(FrameKind.Item) ?? 0).toBeGreaterThan(100);
  });
});
