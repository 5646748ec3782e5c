/**
 * The item codec's rules for values that are not a string or a `Uint8Array` (those two have a
 * hand-written path in `frame.ts`): which JavaScript values a stream carries (docs/items.md), the
 * check `send` runs before anything is staged, and the encoder.
 *
 * A value is sent only if it arrives as what was sent, so a `Map` is refused rather than arriving
 * as `{}`. Integers: a `number` travels as MessagePack does by default (safe integers as ints,
 * everything else as float64, exactly); a `bigint` travels as int64/uint64 and is refused outside
 * that range rather than wrapped. The decoder (`decodeBoundedItem`) gives back a 64-bit integer as a
 * `number` when it is a safe integer and as a `bigint` otherwise, so neither a peer's u64 above 2^53
 * nor a sent `bigint` is rounded.
 *
 * @packageDocumentation
 */
import { Encoder } from '@msgpack/msgpack';
import { WireError } from './errors.ts';
import { MAX_DEPTH, SHARED_ENCODER_KEEP } from './msgpack.ts';

const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

/**
 * Where a value sits inside the item: the container around it and its key there (null: the item
 * itself). One node per container walked into; the path text is made only for a refusal.
 */
interface Where {
  readonly up: Where | null;
  readonly key: string | number;
}

/** `item.tokens[3]`, bounded: a long path is cut. */
function pathOf(up: Where | null, key: string | number | null): string {
  const keys: Array<string | number> = [];
  if (key !== null) keys.push(key);
  for (let w = up; w !== null; w = w.up) keys.push(w.key);
  let path = 'item';
  for (let i = keys.length - 1; i >= 0; i--) {
    const k = keys[i]!;
    path += typeof k === 'number' ? `[${k}]` : /^[A-Za-z_$][\w$]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
    if (path.length > 120) return `${path.slice(0, 117)}...`;
  }
  return path;
}

/** A bigint for a message: its digits, cut in the middle when long. */
function short(v: bigint): string {
  const s = String(v);
  return s.length > 40 ? `${s.slice(0, 18)}…${s.slice(-18)} (${s.length} digits)` : s;
}

function refuse(up: Where | null, key: string | number | null, what: string, hint: string): WireError {
  return new WireError(
    'ERR_INVALID_ITEM',
    `${pathOf(up, key)} is ${what}, which an item cannot carry: ${hint} (see docs/items.md)`,
  );
}

/** The constructor's name, for messages (a hostile getter throws into itemRefusal's catch). */
function className(value: object): string {
  const name = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  return typeof name === 'string' && name !== '' ? name : 'an object with a custom prototype';
}

/**
 * Why `value` cannot be sent as a stream item (an `ERR_INVALID_ITEM` error naming where in the
 * value and what to send instead), or undefined when it round-trips. Strings and `Uint8Array`s are
 * always fine and need no check. Never throws: a hostile getter or proxy is reported, not rethrown.
 */
export function itemRefusal(value: unknown): WireError | undefined {
  try {
    return check(value, null, null, 0);
  } catch (cause) {
    return new WireError(
      'ERR_INVALID_ITEM',
      `the item could not be inspected: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
}

/** `depth`: non-empty containers around `value`, counted as the receiver's bounded reader does. */
function check(value: unknown, up: Where | null, key: string | number | null, depth: number): WireError | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'number':
    case 'undefined':
      return undefined;
    case 'bigint':
      return value < INT64_MIN || value > UINT64_MAX
        ? refuse(
            up,
            key,
            `the bigint ${short(value)}, outside -2^63..2^64-1`,
            'MessagePack integers are int64 or uint64; send a string of its digits',
          )
        : undefined;
    case 'function':
      return refuse(up, key, 'a function', 'send data, not code');
    case 'symbol':
      return refuse(up, key, 'a symbol', 'send a string');
  }
  if (value === null || value instanceof Uint8Array) return undefined;
  const o = value as object;
  if (Array.isArray(o)) {
    if (Object.getPrototypeOf(o) !== Array.prototype)
      return refuse(up, key, `an instance of ${className(o)}`, 'send a plain array');
    if (o.length === 0) return undefined;
    if (depth + 1 > MAX_DEPTH)
      return refuse(up, key, `nested deeper than ${MAX_DEPTH} containers (or cyclic)`, 'flatten it');
    const here: Where | null = key === null ? null : { up, key };
    for (let i = 0; i < o.length; i++) {
      const bad = check(o[i], here, i, depth + 1);
      if (bad !== undefined) return bad;
    }
    return undefined;
  }
  if (o instanceof Date) {
    return Number.isNaN(o.getTime()) ? refuse(up, key, 'an invalid Date', 'send a valid Date or null') : undefined;
  }
  if (o instanceof Map)
    return refuse(up, key, 'a Map', 'it would arrive as {}; send Object.fromEntries(map) or [...map]');
  if (o instanceof Set) return refuse(up, key, 'a Set', 'it would arrive as {}; send [...set]');
  if (ArrayBuffer.isView(o)) {
    return refuse(
      up,
      key,
      `a ${className(o)}`,
      'only Uint8Array arrives as itself; send new Uint8Array(v.buffer, v.byteOffset, v.byteLength)',
    );
  }
  if (o instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && o instanceof SharedArrayBuffer)) {
    return refuse(up, key, `an ${className(o)}`, 'send a Uint8Array over it');
  }
  const proto: unknown = Object.getPrototypeOf(o);
  if (proto !== Object.prototype && proto !== null) {
    return refuse(
      up,
      key,
      `an instance of ${className(o)}`,
      'it would arrive as a plain object without its class; send a plain object',
    );
  }
  if (Object.getOwnPropertySymbols(o).length > 0)
    return refuse(up, key, 'an object with symbol keys', 'symbol-keyed properties are not sent; use string keys');
  const keys = Object.keys(o);
  if (keys.length === 0) return undefined;
  if (depth + 1 > MAX_DEPTH)
    return refuse(up, key, `nested deeper than ${MAX_DEPTH} containers (or cyclic)`, 'flatten it');
  // The item itself is the root of every path: a node only for the containers inside it.
  const here: Where | null = key === null ? null : { up, key };
  for (const k of keys) {
    // The receiving decoder refuses the key outright (prototype pollution), ending the stream.
    if (k === '__proto__') return refuse(here, k, 'an own "__proto__" key', 'rename the key');
    const bad = check((o as Record<string, unknown>)[k], here, k, depth + 1);
    if (bad !== undefined) return bad;
  }
  return undefined;
}

// ───────────────────────── encoding ─────────────────────────

// `ignoreUndefined`: `{ a: undefined }` travels as `{}`, so `a` reads back `undefined` (as JSON does).
let plain: Encoder | undefined;
let wide: Encoder | undefined;

/**
 * MessagePack of an item value that {@link itemRefusal} accepted. The result is a view of a shared
 * buffer, valid until the next call: copy it before encoding anything else.
 *
 * Values without a `bigint` use `@msgpack/msgpack`'s default integer encoding. `useBigInt64` would
 * encode a safe integer ≥ 2^32 as float64, which a typed consumer (rmp-serde's `u64`) refuses, so a
 * value with a bigint is encoded from a copy whose 64-bit-wide numbers are bigints: the same bytes
 * (uint64/int64) the default encoder writes for them.
 */
export function encodeItemValue(value: unknown): Uint8Array {
  plain ??= new Encoder({ ignoreUndefined: true });
  let out: Uint8Array;
  try {
    out = plain.encodeSharedRef(value);
  } catch (e) {
    // The default encoder refuses a bigint when it meets one; anything else is a real error.
    if (!hasBigInt(value, 0)) throw e;
    wide ??= new Encoder({ ignoreUndefined: true, useBigInt64: true });
    out = wide.encodeSharedRef(widen(value, 0));
    if (out.byteLength > SHARED_ENCODER_KEEP) wide = undefined;
    return out;
  }
  // The encoder's buffer only grows: do not keep a large one for the life of the process.
  if (out.byteLength > SHARED_ENCODER_KEEP) plain = undefined;
  return out;
}

function hasBigInt(v: unknown, depth: number): boolean {
  if (typeof v === 'bigint') return true;
  if (typeof v !== 'object' || v === null || depth > MAX_DEPTH || v instanceof Uint8Array || v instanceof Date)
    return false;
  if (Array.isArray(v)) return v.some((x) => hasBigInt(x, depth + 1));
  return Object.values(v).some((x) => hasBigInt(x, depth + 1));
}

/** A copy of `v` in which each number the default encoder writes as int64/uint64 is a bigint. */
function widen(v: unknown, depth: number): unknown {
  if (typeof v === 'number') return Number.isSafeInteger(v) && (v >= 2 ** 32 || v < -(2 ** 31)) ? BigInt(v) : v;
  if (typeof v !== 'object' || v === null || depth > MAX_DEPTH || v instanceof Uint8Array || v instanceof Date)
    return v;
  if (Array.isArray(v)) return v.map((x) => widen(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = widen(x, depth + 1);
  return out;
}
