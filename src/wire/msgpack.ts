/**
 * MessagePack for every peer payload (hello, GOAWAY, unary bodies, error notices, tickets, and the
 * values of data records), with explicit limits.
 *
 * `@msgpack/msgpack` pre-allocates every array and map at the length its header declares, and its
 * `max*Length` limits apply to each container on its own. So the limits alone do not bound what a
 * peer can make us reserve: nested array16/map16 headers of 3 bytes each, each declaring thousands
 * of items, made a 256 KiB message reserve gigabytes. {@link decodeBounded} therefore first walks the
 * structure without allocating ({@link checkShape}): every declared item must still fit in the bytes
 * that remain (an item takes at least one byte), nesting is at most {@link MAX_DEPTH} deep, and the
 * value fills the input exactly. Only then does the decoder run, so it reserves at most one slot per
 * byte the peer actually sent: whatever the structure, the decoded value costs at most a few dozen
 * bytes of heap per input byte (the worst case is nested empty containers, one array object per
 * byte). Control payloads ({@link decodeBounded}) decode 64-bit integers as `bigint`
 * (`useBigInt64`), so u64 ids (worker, anchor, session) survive a round trip; smaller integers stay
 * numbers. Data-record values ({@link decodeBoundedItem}) decode a 64-bit integer as a `number`
 * when it is a safe integer and as a `bigint` otherwise (never rounded; docs/items.md), everything
 * else the way `@msgpack/msgpack`'s defaults do.
 *
 * Memory: decoders are cached only for inputs up to {@link CACHED_DECODE_LIMIT} bytes (a decoder
 * keeps a reference to the last input it decoded); larger inputs get a fresh decoder. The shared
 * encoder is dropped after producing a result over {@link SHARED_ENCODER_KEEP} bytes, so one large
 * body does not pin a large buffer for the life of the process.
 *
 * Never used for the `_stream_batch` envelope (a fixed binary layout); used per data record only
 * for values that are not a string or bytes (those have a hand-written path in `frame.ts`).
 *
 * @packageDocumentation
 */
import { Decoder, Encoder } from '@msgpack/msgpack';

/** Deepest container nesting {@link decodeBounded} accepts. */
export const MAX_DEPTH = 64;
/** Inputs up to this size reuse a cached decoder; larger ones get a fresh one that is then dropped. */
export const CACHED_DECODE_LIMIT = 64 * 1024;
/** The shared encoder is replaced after a result larger than this (its buffer only ever grows). */
export const SHARED_ENCODER_KEEP = 1024 * 1024;

let encoder: Encoder | undefined;
const decoders = new Map<number, Decoder>();
const itemDecoders = new Map<number, Decoder>();
const wideItemDecoders = new Map<number, Decoder>();
/** Items still to read per open container during {@link checkShape} (reused; never reallocated). */
const owedAt = new Float64Array(MAX_DEPTH + 1);

/**
 * Encode `value`. The result is a view of a shared buffer, valid only until the next call: callers
 * hand it straight to a `send`, which copies it.
 */
export function encodeShared(value: unknown): Uint8Array {
  encoder ??= new Encoder({ useBigInt64: true, ignoreUndefined: true });
  const out = encoder.encodeSharedRef(value);
  // The view stays valid (it keeps its buffer alive); the next call starts with a small buffer.
  if (out.byteLength > SHARED_ENCODER_KEEP) encoder = undefined;
  return out;
}

/** Encode `value` into a fresh buffer the caller owns. */
export function encodeOwned(value: unknown): Uint8Array {
  return encodeShared(value).slice();
}

/**
 * A lower bound of the encoded size of `value`, known without encoding it (0 when not cheaply
 * known). Lets callers refuse an oversized body before the encoder grows a buffer for it.
 */
export function minEncodedSize(value: unknown): number {
  if (value instanceof Uint8Array) return value.byteLength;
  // Every UTF-16 code unit encodes to at least one UTF-8 byte.
  if (typeof value === 'string') return value.length;
  return 0;
}

/**
 * Check that `bytes` is exactly one well-formed MessagePack value whose containers fit the input,
 * without allocating. Throws a `RangeError` saying why not. Every declared element must be present,
 * so a later decode reserves at most one slot per input byte.
 */
export function checkShape(bytes: Uint8Array): void {
  // The walk's state is module-level (the walk is synchronous), so a check allocates nothing: two
  // closures over it cost a context object per decoded message.
  n = bytes.byteLength;
  pos = 0;
  owed = 1;
  depth = 0;
  sawInt64 = false;
  owedAt[0] = 1;
  while (depth >= 0) {
    if ((owedAt[depth] as number) === 0) {
      depth--;
      continue;
    }
    owedAt[depth] = (owedAt[depth] as number) - 1;
    owed--;
    need(1);
    const h = bytes[pos - 1] as number;
    if (h <= 0x7f || h >= 0xe0 || h === 0xc0 || h === 0xc2 || h === 0xc3) continue;
    if (h <= 0x8f) {
      open(2 * (h & 0x0f));
      continue;
    }
    if (h <= 0x9f) {
      open(h & 0x0f);
      continue;
    }
    if (h <= 0xbf) {
      need(h & 0x1f);
      continue;
    }
    switch (h) {
      case 0xc4:
      case 0xd9:
        need(1);
        need(bytes[pos - 1] as number);
        break;
      case 0xc5:
      case 0xda:
        need(2);
        need(readU16(bytes, pos - 2));
        break;
      case 0xc6:
      case 0xdb:
        need(4);
        need(readU32(bytes, pos - 4));
        break;
      case 0xc7:
        need(1);
        need(1 + (bytes[pos - 1] as number));
        break;
      case 0xc8:
        need(2);
        need(1 + readU16(bytes, pos - 2));
        break;
      case 0xc9:
        need(4);
        need(1 + readU32(bytes, pos - 4));
        break;
      case 0xcc:
      case 0xd0:
        need(1);
        break;
      case 0xcd:
      case 0xd1:
      case 0xd4:
        need(2);
        break;
      case 0xd5:
        need(3);
        break;
      case 0xca:
      case 0xce:
      case 0xd2:
        need(4);
        break;
      case 0xd6:
        need(5);
        break;
      case 0xcf:
      case 0xd3:
        sawInt64 = true;
        need(8);
        break;
      case 0xcb:
        need(8);
        break;
      case 0xd7:
        need(9);
        break;
      case 0xd8:
        need(17);
        break;
      case 0xdc:
        need(2);
        open(readU16(bytes, pos - 2));
        break;
      case 0xdd:
        need(4);
        open(readU32(bytes, pos - 4));
        break;
      case 0xde:
        need(2);
        open(2 * readU16(bytes, pos - 2));
        break;
      case 0xdf:
        need(4);
        open(2 * readU32(bytes, pos - 4));
        break;
      default:
        throw new RangeError(`invalid MessagePack byte 0x${h.toString(16)} at ${pos - 1}`);
    }
  }
  if (pos !== n) throw new RangeError(`${n - pos} trailing bytes after a MessagePack value`);
}

/** State of the {@link checkShape} walk in progress. */
let n = 0;
let pos = 0;
/** Items still to read in all open containers, plus the top-level value. */
let owed = 0;
let depth = 0;
/** The last {@link checkShape} walk met a uint64 or int64 (0xcf, 0xd3). */
let sawInt64 = false;

function need(k: number): void {
  pos += k;
  if (pos > n) throw new RangeError(`truncated MessagePack (${n} bytes)`);
}

function open(items: number): void {
  if (items === 0) return;
  owed += items;
  if (owed > n - pos) {
    throw new RangeError(
      `MessagePack container declares ${items} items at byte ${pos}, more than the ${n - pos} bytes left in the message`,
    );
  }
  if (depth === MAX_DEPTH) throw new RangeError(`MessagePack nesting deeper than ${MAX_DEPTH}`);
  owedAt[++depth] = items;
}

/** Big-endian u16 at `p` (MessagePack lengths). */
export function readU16(b: Uint8Array, p: number): number {
  return (b[p]! << 8) | b[p + 1]!;
}

/** Big-endian u32 at `p` (MessagePack lengths, envelope ids). */
export function readU32(b: Uint8Array, p: number): number {
  return ((b[p]! << 24) | (b[p + 1]! << 16) | (b[p + 2]! << 8) | b[p + 3]!) >>> 0;
}

/**
 * Decode one MessagePack value that fills `bytes` exactly. Throws on malformed, truncated, trailing,
 * too deeply nested input, or input whose containers declare more items than it holds — all before
 * the decoder allocates anything. 64-bit integers decode as `bigint`.
 */
export function decodeBounded(bytes: Uint8Array): unknown {
  return boundedDecode(bytes, decoders, true);
}

/**
 * {@link decodeBounded} for the value of a data record (`Item`): the same checks before anything is
 * allocated. A uint64/int64 decodes as a `number` when it is a safe integer and as a `bigint`
 * otherwise (the default decoder would round it to a number); a value without one takes the default
 * decoder and no extra pass. A 64-bit map key becomes its decimal string (object keys are strings).
 */
export function decodeBoundedItem(bytes: Uint8Array): unknown {
  checkShape(bytes);
  if (!sawInt64) return decodeChecked(bytes, itemDecoders, false, true);
  return narrow(decodeChecked(bytes, wideItemDecoders, true, true), 0);
}

/** Turn the bigints a `useBigInt64` decode made of safe integers back into numbers, in place. */
function narrow(v: unknown, level: number): unknown {
  if (typeof v === 'bigint') return v >= -MAX_SAFE && v <= MAX_SAFE ? Number(v) : v;
  // Only arrays and the decoder's plain objects hold values; depth is bounded by checkShape.
  if (typeof v !== 'object' || v === null || level > MAX_DEPTH || v instanceof Uint8Array || v instanceof Date)
    return v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = narrow(v[i], level + 1);
    return v;
  }
  if (Object.getPrototypeOf(v) !== Object.prototype) return v;
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) o[k] = narrow(o[k], level + 1);
  return o;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** Object keys are strings: a 64-bit key (a bigint under `useBigInt64`) keeps all its digits. */
function mapKey(key: unknown): string | number {
  if (typeof key === 'string' || typeof key === 'number') return key;
  if (typeof key === 'bigint') return String(key);
  throw new RangeError(`a MessagePack map key must be a string or a number, not ${typeof key}`);
}

function boundedDecode(bytes: Uint8Array, cache: Map<number, Decoder>, bigInt: boolean): unknown {
  checkShape(bytes);
  return decodeChecked(bytes, cache, bigInt, false);
}

/** Decode `bytes` that {@link checkShape} accepted. `item`: a data-record value (64-bit map keys kept as strings). */
function decodeChecked(bytes: Uint8Array, cache: Map<number, Decoder>, bigInt: boolean, item: boolean): unknown {
  let limit = 16;
  while (limit < bytes.byteLength) limit *= 2;
  if (limit > CACHED_DECODE_LIMIT) return makeDecoder(limit, bigInt, item).decode(bytes);
  let decoder = cache.get(limit);
  if (decoder === undefined) {
    decoder = makeDecoder(limit, bigInt, item);
    cache.set(limit, decoder);
  }
  return decoder.decode(bytes);
}

/** A decoder whose per-container limits are `limit` (redundant after {@link checkShape}; kept as a second guard). */
function makeDecoder(limit: number, bigInt: boolean, item: boolean): Decoder {
  return new Decoder({
    useBigInt64: bigInt,
    ...(item ? { mapKeyConverter: mapKey } : {}),
    maxStrLength: limit,
    maxBinLength: limit,
    maxArrayLength: limit,
    maxMapLength: limit,
    maxExtLength: limit,
  });
}
