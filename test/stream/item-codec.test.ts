// The item codec (docs/items.md): a bigint travels as int64/uint64 both ways (a 64-bit integer
// arrives as a bigint only outside the safe range, never rounded); `send` refuses with
// ERR_INVALID_ITEM, before anything is staged, what would not arrive as sent (a Map used to arrive
// as {}, a bigint threw an uncoded "Unrecognized object"), and the stream goes on.
import { afterEach, describe, expect, it } from 'vitest';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { decodeFrame, encodeFrame } from '../../src/wire/frame.ts';
import { itemRefusal } from '../../src/wire/index.ts';
import { nodePair } from '../support/node-pair.ts';
import { readAll } from '../support/read-all.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

/** `81 a4 "Item"`: the prefix of every Item frame body. */
const ITEM = [0x81, 0xa4, 0x49, 0x74, 0x65, 0x6d];
/** The value of an Item frame body (fails the test for any other frame). */
function itemOf(body: Uint8Array): unknown {
  const f = decodeFrame(body);
  if (f.kind !== 'Item') throw new Error(`expected an Item frame, got ${f.kind}`);
  return f.value;
}
const roundTrip = (value: unknown): unknown => itemOf(encodeFrame({ kind: 'Item', value }));
const u64 = (v: bigint): number[] => [
  0xcf,
  ...Array.from({ length: 8 }, (_, i) => Number((v >> BigInt(56 - 8 * i)) & 0xffn)),
];

describe('item codec: 64-bit integers', () => {
  it('a bigint travels as uint64/int64 and arrives as a bigint outside the safe range, as a number inside it', () => {
    expect(roundTrip(2n ** 60n)).toBe(2n ** 60n);
    expect(roundTrip(2n ** 64n - 1n)).toBe(2n ** 64n - 1n);
    expect(roundTrip(-(2n ** 63n))).toBe(-(2n ** 63n));
    expect(roundTrip(2n ** 53n)).toBe(2n ** 53n);
    expect(roundTrip(5n)).toBe(5);
    expect(roundTrip(BigInt(-Number.MAX_SAFE_INTEGER))).toBe(-Number.MAX_SAFE_INTEGER);
    expect([...encodeFrame({ kind: 'Item', value: 2n ** 60n }).subarray(ITEM.length)]).toEqual(u64(2n ** 60n));
    expect(encodeFrame({ kind: 'Item', value: -1n })[ITEM.length]).toBe(0xd3);
  });

  it("a peer's uint64 above 2^53 arrives exact as a bigint, not rounded to a number (values and map keys)", () => {
    const big = 12_345_678_901_234_567_891n;
    expect(itemOf(Uint8Array.from([...ITEM, ...u64(big)]))).toBe(big);
    // A uint64 that fits a safe integer stays a number, as before.
    expect(itemOf(Uint8Array.from([...ITEM, ...u64(7n)]))).toBe(7);
    // [big, {big: 1}] as rmp-serde writes them.
    const nested = Uint8Array.from([...ITEM, 0x92, ...u64(big), 0x81, ...u64(big), 0x01]);
    expect(itemOf(nested)).toEqual([big, { [big.toString()]: 1 }]);
  });

  it('numbers next to a bigint keep their default encoding: a safe integer of 2^32 and up stays uint64, not float64', () => {
    const body = encodeFrame({ kind: 'Item', value: [2n ** 60n, 5e9, -5e9, 1.5] });
    const values = body.subarray(ITEM.length + 1);
    expect(values[9]).toBe(0xcf); // 5e9: uint64, the bytes `encode(5e9)` gives without a bigint beside it
    expect(values[18]).toBe(0xd3); // -5e9: int64
    expect(values[27]).toBe(0xcb); // 1.5: float64
    expect(roundTrip([2n ** 60n, 5e9, -5e9, 1.5])).toEqual([2n ** 60n, 5e9, -5e9, 1.5]);
  });

  it('other values arrive as docs/items.md says: -0 as 0, undefined properties omitted, array holes as null, Dates as Dates', () => {
    const date = new Date(1_700_000_000_123);
    expect(roundTrip({ a: undefined, b: [undefined, 1], d: date, f: NaN, g: -Infinity, z: -0 })).toEqual({
      b: [null, 1],
      d: date,
      f: NaN,
      g: -Infinity,
      z: 0,
    });
    expect(Object.is(roundTrip(-0), 0)).toBe(true);
    expect(roundTrip(undefined)).toBeNull();
    expect(roundTrip(Object.assign(Object.create(null) as object, { a: 1 }))).toEqual({ a: 1 });
  });
});

/** Values `send` refuses, each with a fragment of the message it must give. */
const REFUSED: ReadonlyArray<readonly [string, unknown, string]> = [
  ['a Map', new Map([['k', 1]]), 'item is a Map'],
  ['a Set', new Set([1]), 'item is a Set'],
  [
    'a class instance',
    new (class Token {
      text = 'x';
    })(),
    'an instance of Token',
  ],
  ['a function', () => 1, 'item is a function'],
  ['a symbol', Symbol('s'), 'item is a symbol'],
  ['a bigint beyond 64 bits', 2n ** 64n, 'outside -2^63..2^64-1'],
  ['a typed array other than Uint8Array', new Float32Array(2), 'a Float32Array'],
  ['an ArrayBuffer', new ArrayBuffer(4), 'an ArrayBuffer'],
  ['an invalid Date', new Date(Number.NaN), 'an invalid Date'],
  [
    'an own __proto__ key',
    JSON.parse('{"ok": 1, "__proto__": 2}') as unknown,
    'item.__proto__ is an own "__proto__" key',
  ],
  ['symbol keys', { [Symbol('k')]: 1 }, 'symbol keys'],
  [
    'a cycle',
    (() => {
      const a: unknown[] = [];
      a.push(a);
      return a;
    })(),
    'nested deeper than 64 containers (or cyclic)',
  ],
  ['a Map deep inside', { tokens: [{ meta: new Map() }] }, 'item.tokens[0].meta is a Map'],
  ['an array subclass', new (class Tokens extends Array<number> {})(), 'an instance of Tokens'],
  ['an object over Array.prototype', Object.create(Array.prototype) as unknown, 'an instance of Array'],
  ['a bigint below -2^63', { n: [-(2n ** 63n) - 1n] }, 'item.n[0] is the bigint'],
  ['a function inside an array', [1, [2, () => 3]], 'item[1][1] is a function'],
  ['a Uint16Array inside an object', { a: { b: new Uint16Array(1) } }, 'item.a.b is a Uint16Array'],
];

describe('send refuses what would not arrive as sent', () => {
  it('with ERR_INVALID_ITEM naming where and what, staging nothing: the stream goes on and the consumer sees only the good items', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createAnchor<unknown>();
    const sender = await producer.attachAnchor<unknown>(anchor.handle);
    await sender.send('first');
    for (const [what, value, says] of REFUSED) {
      const sent = sender.send(value);
      await expect(sent, what).rejects.toMatchObject({
        code: 'ERR_INVALID_ITEM',
        message: expect.stringContaining(says),
      });
    }
    await sender.send({ fine: [1, 2n ** 60n] });
    await sender.finalize();
    expect(await readAll(anchor)).toEqual(['first', { fine: [1, 2n ** 60n] }]);
  });

  it('trySend throws the same ERR_INVALID_ITEM (false would read as "wait") and sends nothing', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createAnchor<unknown>();
    const sender = await producer.attachAnchor<unknown>(anchor.handle);
    for (const [what, value] of REFUSED)
      expect(() => sender.trySend(value), what).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ITEM' }));
    expect(sender.trySend('only')).toBe(true);
    await sender.finalize();
    expect(await readAll(anchor)).toEqual(['only']);
  });

  it('a same-node sender refuses the same values (the item never crosses a wire there)', async () => {
    const { consumer } = await nodePair(nodes);
    const anchor = consumer.createAnchor<unknown>();
    const sender = await consumer.attachAnchor<unknown>(anchor.handle);
    await expect(sender.send(new Map())).rejects.toMatchObject({ code: 'ERR_INVALID_ITEM' });
    await sender.send(1);
    await sender.finalize();
    expect(await readAll(anchor)).toEqual([1]);
  });

  it('itemRefusal (lanemux/wire) answers the same question without sending', () => {
    for (const [what, value, says] of REFUSED) expect(itemRefusal(value)?.message, what).toContain(says);
    expect(
      itemRefusal({ a: [1, 'x', null, true, new Uint8Array(1), new Date(0), 2n ** 63n, Number.NaN] }),
    ).toBeUndefined();
  });
});
