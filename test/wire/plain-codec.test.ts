/**
 * The hand-written path for small control bodies must be invisible: what `writePlain` writes is
 * byte for byte what the general encoder writes, and what `readPlain` reads is what the general
 * decoder reads, for random values in and out of its subset and for damaged bytes. Anything it gives
 * up on is the general path's, errors included.
 */
import { inspect, isDeepStrictEqual } from 'node:util';
import { Decoder, Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { decodeBody, encodeBody } from '../../src/messenger/body-codec.ts';
import { decodeBounded } from '../../src/wire/msgpack.ts';
import { GIVE_UP, PLAIN_MAX_BYTES, readPlain, writePlain } from '../../src/wire/plain-codec.ts';
import { mulberry32Unit } from './helpers.ts';

const general = new Encoder({ useBigInt64: true, ignoreUndefined: true });
const generalDecode = (b: Uint8Array): unknown => new Decoder({ useBigInt64: true }).decode(b);
/** Deep equality that also holds for a map with a `constructor` key (which vitest compares as a type). */
const same = (a: unknown, b: unknown): void =>
  expect(isDeepStrictEqual(a, b), `${inspect(a)} vs ${inspect(b)}`).toBe(true);
const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

const STRINGS = [
  '',
  'a',
  'hi',
  'lo',
  '0x1f',
  'messenger-mux-v2',
  'k'.repeat(31),
  'k'.repeat(32),
  'e'.repeat(255),
  'e'.repeat(256),
  'é',
  '日本',
  '\u{1f600}',
  'é'.repeat(60),
  '日本'.repeat(40),
  'a\u{1f600}'.repeat(30),
  '\ud800',
  'a\udc00b',
  '\ud83d',
  '__proto__',
  'constructor',
  '0',
  '12',
];
/** Strings of the subset: any but a lone surrogate (the general encoder writes one two ways). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const inSubset = (s: string): boolean => !LONE_SURROGATE.test(s) && s !== '__proto__';
const NUMBERS = [
  0,
  -0,
  1,
  127,
  128,
  255,
  256,
  65535,
  65536,
  2 ** 32 - 1,
  2 ** 32,
  2 ** 53,
  -1,
  -33,
  1.5,
  NaN,
  Infinity,
];
const OTHERS: readonly unknown[] = [
  true,
  false,
  null,
  undefined,
  5n,
  2n ** 64n - 1n,
  new Date(0),
  new Uint8Array(3),
  new Map(),
  Symbol('s'),
];

/** A random value: mostly in the subset, sometimes not, nested up to six levels. */
function value(r: () => number, depth: number, plainOnly: boolean): unknown {
  const x = r();
  if (x < 0.25)
    return pick(
      r,
      STRINGS.filter((s) => !plainOnly || inSubset(s)),
    );
  if (x < 0.45)
    return pick(
      r,
      NUMBERS.filter((n) => !plainOnly || (Number.isInteger(n) && n >= 0 && n < 2 ** 32)),
    );
  if (x < 0.55) return plainOnly ? pick(r, [true, false, null]) : pick(r, OTHERS);
  if (depth >= (plainOnly ? 3 : 5)) return 'leaf';
  const n = Math.floor(r() * (plainOnly ? 6 : 17));
  if (x < 0.75) return Array.from({ length: n }, () => value(r, depth + 1, plainOnly));
  const o: Record<string, unknown> = r() < 0.05 && !plainOnly ? Object.create(null) : {};
  for (let i = 0; i < n; i++) {
    const k = r() < 0.8 ? pick(r, ['handle', 'hi', 'lo', 'lane', 'Ok', 'Err', 'reason', 'x', '7']) : pick(r, STRINGS);
    if (plainOnly && !inSubset(k)) continue;
    // An own data property, even for `__proto__` (an assignment would set the prototype).
    Object.defineProperty(o, k, {
      value: value(r, depth + 1, plainOnly),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return o;
}

const attachRequest = {
  handle: { hi: '0x1f2e3d4c5b6a7988', lo: '0x42' },
  supported_transport_keys: ['messenger-mux-v2'],
  lane_key: '0x7',
  attach_id: '0x9abcdef012345678',
};
const attachAnswer = {
  Ok: {
    streaming_transport_key: 'messenger-mux-v2',
    heartbeat_interval_ms: 5000,
    routing_session_id: '0x8000000000000001',
    initial_credit: 32,
    slot_byte_budget: 1_048_576,
    lane: 3,
  },
};

describe('plain control-body codec', () => {
  it('writes the attach request and answer by hand, to the bytes the general encoder writes', () => {
    for (const body of [attachRequest, attachAnswer, { Err: { reason: 'unknown or finished anchor' } }]) {
      const mine = writePlain(body);
      expect(mine).toBeDefined();
      expect([...mine!]).toEqual([...general.encode(body)]);
      same(readPlain(mine!), generalDecode(mine!));
    }
  });

  it('writes every value of its subset exactly as the general encoder does, and gives up on the rest', () => {
    const r = mulberry32Unit(21);
    let written = 0;
    for (let i = 0; i < 4000; i++) {
      const v = value(r, 0, i % 2 === 0);
      const mine = writePlain(v)?.slice();
      let theirs: Uint8Array;
      try {
        theirs = general.encode(v);
      } catch {
        expect(mine).toBeUndefined(); // a symbol: the general encoder's error
        continue;
      }
      if (i % 2 === 0 && theirs.byteLength <= PLAIN_MAX_BYTES) expect(mine, inspect(v)).toBeDefined();
      if (mine === undefined) continue;
      written++;
      expect([...mine]).toEqual([...theirs]);
    }
    expect(written).toBeGreaterThan(2000);
  });

  it('reads what the general decoder reads, value for value, or gives up', () => {
    const r = mulberry32Unit(22);
    let read = 0;
    for (let i = 0; i < 4000; i++) {
      const v = value(r, 0, i % 2 === 0);
      let bytes: Uint8Array;
      try {
        bytes = general.encode(v);
      } catch {
        continue; // a symbol: nothing to read
      }
      const mine = readPlain(bytes);
      if (i % 2 === 0 && bytes.byteLength <= PLAIN_MAX_BYTES) expect(mine).not.toBe(GIVE_UP);
      if (mine === GIVE_UP) continue;
      read++;
      same(mine, generalDecode(bytes));
    }
    expect(read).toBeGreaterThan(2000);
  });

  it('never accepts damaged bytes the general decoder refuses, nor reads them differently', () => {
    const r = mulberry32Unit(23);
    let accepted = 0;
    for (let i = 0; i < 6000; i++) {
      const bytes = general.encode(value(r, 0, true)).slice();
      const cut = r() < 0.3 ? bytes.subarray(0, Math.floor(r() * bytes.byteLength)) : bytes;
      const damaged = r() < 0.2 ? new Uint8Array([...cut, Math.floor(r() * 256)]) : cut.slice();
      for (let k = Math.floor(r() * 3); k > 0 && damaged.byteLength > 0; k--)
        damaged[Math.floor(r() * damaged.byteLength)] = Math.floor(r() * 256);
      const mine = readPlain(damaged);
      let theirs: unknown;
      let threw = false;
      try {
        theirs = generalDecode(damaged);
      } catch {
        threw = true;
      }
      if (mine === GIVE_UP) continue;
      accepted++;
      expect(threw, `accepted bytes the general decoder refuses: ${[...damaged].join(',')}`).toBe(false);
      same(mine, theirs);
    }
    expect(accepted).toBeGreaterThan(1000);
  });

  it('leaves a __proto__ key, and malformed input, to the general path and its errors', () => {
    const proto = new Uint8Array([0x81, 0xa9, ...new TextEncoder().encode('__proto__'), 0x01]);
    expect(readPlain(proto)).toBe(GIVE_UP);
    expect(() => decodeBounded(proto)).toThrow(/__proto__/);
    expect(readPlain(new Uint8Array([0x92, 0x01]))).toBe(GIVE_UP);
    expect(() => decodeBounded(new Uint8Array([0x92, 0x01]))).toThrow();
    expect(readPlain(new Uint8Array([0x01, 0x02]))).toBe(GIVE_UP);
  });

  it("the messenger's body codec takes the hand path for a plain body and the general one for the rest", () => {
    const r = mulberry32Unit(24);
    for (let i = 0; i < 1000; i++) {
      const v = value(r, 0, i % 3 !== 0);
      let expected: Uint8Array;
      try {
        expected = general.encode(v);
      } catch {
        expect(() => encodeBody(v)).toThrow();
        continue;
      }
      const bytes = encodeBody(v).slice();
      expect([...bytes]).toEqual([...expected]);
      let theirs: unknown;
      try {
        theirs = generalDecode(bytes);
      } catch {
        expect(() => decodeBody(bytes)).toThrow(); // a __proto__ key
        continue;
      }
      same(decodeBody(bytes), theirs);
    }
  });
  it('a write from inside a write (a getter sending again) leaves the outer body whole', () => {
    const v = {
      a: 'hello',
      get b(): number {
        // Another body written while this one is: it takes the general path, not the shared buffer.
        expect(writePlain({ zzzzzzzzzzzzzzzz: 'yyyyyyyyyyyyyyyy' })).toBeUndefined();
        encodeBody({ q: 'zzzzzzzzzzzz' });
        return 1;
      },
    };
    expect([...writePlain(v)!]).toEqual([...general.encode({ a: 'hello', b: 1 })]);
    expect([...encodeBody(v)]).toEqual([...general.encode({ a: 'hello', b: 1 })]);
  });

  it('leaves to the general path what it would write or read differently', () => {
    // A string over 200 bytes led by a byte order mark: the general decoder's TextDecoder drops the mark.
    const bom = general.encode({ s: `\ufeff${'x'.repeat(250)}` });
    expect(readPlain(bom)).toBe(GIVE_UP);
    same(decodeBody(bom), generalDecode(bom));
    const short = general.encode({ s: '\ufeffshort' });
    same(readPlain(short), generalDecode(short));
    // A typed array over another prototype, an array iterated differently: the general encoder's.
    expect(writePlain(Object.setPrototypeOf(new Uint8Array([1, 2]), null))).toBeUndefined();
    expect(writePlain(Object.setPrototypeOf(new DataView(new ArrayBuffer(2)), Object.prototype))).toBeUndefined();
    const odd = [1, 2];
    Object.defineProperty(odd, Symbol.iterator, {
      value: function* () {
        yield 7;
        yield 8;
      },
    });
    expect(writePlain(odd)).toBeUndefined();
    expect([...encodeBody(odd)]).toEqual([...general.encode(odd)]);
    // An own `__proto__` key is never written, whatever its value.
    expect(
      writePlain(Object.defineProperty({ a: 1 }, '__proto__', { value: undefined, enumerable: true })),
    ).toBeUndefined();
  });
});
