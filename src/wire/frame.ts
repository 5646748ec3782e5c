/**
 * `StreamFrame` bodies (docs/protocol.md §10.5), encoded as the reference's rmp-serde does: unit variants
 * as the variant-name string, newtype variants as a one-entry map `{ "<Variant>": value }`.
 *
 * The shapes a token stream sends all the time (`Item` carrying a string or bytes, and the unit
 * sentinels) are written and read by hand; everything else goes through `@msgpack/msgpack`, read
 * under the bounds of `msgpack.ts` (a peer's body never makes us reserve more than it sent).
 */
import { WireError } from './errors.ts';
import { decodeBoundedItem } from './msgpack.ts';
import { encodeItemValue } from './item.ts';
import { type ItemSlab, ON_HEAP_BYTES, copyBytes } from './item-slab.ts';
import { utf8Decode, utf8DecodeAt, utf8Length, utf8Write } from './utf8.ts';

/** A frame on a stream: the user's items plus the sender's lifecycle signals. */
export type StreamFrame<T = unknown> =
  | { readonly kind: 'Item'; readonly value: T }
  | { readonly kind: 'SenderError'; readonly message: string }
  | { readonly kind: 'Dropped' }
  | { readonly kind: 'Detached' }
  | { readonly kind: 'Finalized' }
  | { readonly kind: 'Heartbeat' }
  | { readonly kind: 'TransportError'; readonly message: string };

export type StreamFrameKind = StreamFrame['kind'];

/** Numeric frame kinds, for hot paths that must not allocate a frame object per record. */
export const FrameKind = {
  Item: 0,
  SenderError: 1,
  Heartbeat: 2,
  Finalized: 3,
  Detached: 4,
  Dropped: 5,
  TransportError: 6,
  /** The body could not be decoded: surfaced to the consumer as a DeserializationError. */
  Undecodable: 7,
} as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

/** True for kinds that end a stream (Finalized, Detached, Dropped, TransportError). */
export function isTerminalKind(kind: number): boolean {
  return kind >= FrameKind.Finalized && kind <= FrameKind.TransportError;
}

const ascii = (s: string): number[] => Array.from(s, (c) => c.charCodeAt(0));
const fixstr = (s: string): Uint8Array => Uint8Array.from([0xa0 | s.length, ...ascii(s)]);

/** Cached encoding of `Dropped`: `a7 44 72 6f 70 70 65 64`. */
export const FRAME_DROPPED: Uint8Array = /*@__PURE__*/ fixstr('Dropped');
/** Cached encoding of `Detached`: `a8 44 65 74 61 63 68 65 64`. */
export const FRAME_DETACHED: Uint8Array = /*@__PURE__*/ fixstr('Detached');
/** Cached encoding of `Finalized`: `a9 46 69 6e 61 6c 69 7a 65 64`. */
export const FRAME_FINALIZED: Uint8Array = /*@__PURE__*/ fixstr('Finalized');
/** Cached encoding of `Heartbeat`: `a9 48 65 61 72 74 62 65 61 74` (what a SlotHeartbeat delivers). */
export const FRAME_HEARTBEAT: Uint8Array = /*@__PURE__*/ fixstr('Heartbeat');

/** `81 a4 "Item"`: the first 6 bytes of every Item frame. */
export const ITEM_PREFIX = /*@__PURE__*/ Uint8Array.from([0x81, ...fixstr('Item')]);
const SENDER_ERROR_PREFIX = /*@__PURE__*/ Uint8Array.from([0x81, ...fixstr('SenderError')]);
const TRANSPORT_ERROR_PREFIX = /*@__PURE__*/ Uint8Array.from([0x81, ...fixstr('TransportError')]);
/** Length of the Item prefix. */
export const ITEM_PREFIX_LEN = 6;

const UNIT_NAMES: ReadonlySet<string> = new Set(['Dropped', 'Detached', 'Finalized', 'Heartbeat']);

// ───────────────────────── writing ─────────────────────────

function binHeaderLen(n: number): number {
  return n < 0x100 ? 2 : n < 0x1_0000 ? 3 : 5;
}

function strHeaderLen(n: number): number {
  return n < 32 ? 1 : n < 0x100 ? 2 : n < 0x1_0000 ? 3 : 5;
}

function writeLenHeader(buf: Uint8Array, off: number, n: number, hlen: number, str: boolean): void {
  if (hlen === 1) {
    buf[off] = 0xa0 | n;
  } else if (hlen === 2) {
    buf[off] = str ? 0xd9 : 0xc4;
    buf[off + 1] = n;
  } else if (hlen === 3) {
    buf[off] = str ? 0xda : 0xc5;
    buf[off + 1] = n >>> 8;
    buf[off + 2] = n & 0xff;
  } else {
    buf[off] = str ? 0xdb : 0xc6;
    buf[off + 1] = n >>> 24;
    buf[off + 2] = (n >>> 16) & 0xff;
    buf[off + 3] = (n >>> 8) & 0xff;
    buf[off + 4] = n & 0xff;
  }
}

/** Body length of `Item(bytes)` (msgpack bin). */
export function itemBytesLength(byteLength: number): number {
  return ITEM_PREFIX_LEN + binHeaderLen(byteLength) + byteLength;
}

/** Upper bound of the body length of `Item(str)`, without scanning the string. */
export function itemStringMaxLength(str: string): number {
  return ITEM_PREFIX_LEN + 5 + str.length * 3;
}

/** Exact body length of `Item(str)`. */
export function itemStringLength(str: string): number {
  const n = utf8Length(str);
  return ITEM_PREFIX_LEN + strHeaderLen(n) + n;
}

/** Write `Item(bytes)` at `off`. Returns the number of bytes written. */
export function writeItemBytes(buf: Uint8Array, off: number, bytes: Uint8Array): number {
  // Six stores beat a TypedArray#set call for the fixed prefix `81 a4 "Item"` (~27 -> 17 ns per token).
  buf[off] = 0x81;
  buf[off + 1] = 0xa4;
  buf[off + 2] = 0x49;
  buf[off + 3] = 0x74;
  buf[off + 4] = 0x65;
  buf[off + 5] = 0x6d;
  const n = bytes.byteLength;
  const h = binHeaderLen(n);
  writeLenHeader(buf, off + ITEM_PREFIX_LEN, n, h, false);
  buf.set(bytes, off + ITEM_PREFIX_LEN + h);
  return ITEM_PREFIX_LEN + h + n;
}

/**
 * Write `Item(str)` at `off` in the most compact msgpack form. `buf` must have
 * `itemStringMaxLength(str)` bytes free at `off`, or, when `utf8Bytes` (the string's exact UTF-8
 * length) is given, exactly `itemStringLength(str)` bytes.
 * Returns the number of bytes written.
 */
export function writeItemString(buf: Uint8Array, off: number, str: string, utf8Bytes = -1): number {
  return writeNewtypeString(buf, off, ITEM_PREFIX, str, utf8Bytes);
}

function writeNewtypeString(buf: Uint8Array, off: number, prefix: Uint8Array, str: string, utf8Bytes = -1): number {
  buf.set(prefix, off);
  const start = off + prefix.length;
  // Guess the header from the upper bound (or the exact size when known), write, then move the
  // bytes if the real length needs a shorter header.
  const guess = strHeaderLen(utf8Bytes >= 0 ? utf8Bytes : str.length * 3);
  const n = utf8Write(str, buf, start + guess);
  const h = strHeaderLen(n);
  if (h !== guess) buf.copyWithin(start + h, start + guess, start + guess + n);
  writeLenHeader(buf, start, n, h, true);
  return prefix.length + h + n;
}

/**
 * Encode a frame to fresh bytes. `Item` values that are strings or `Uint8Array`s use the hand
 * path; any other value is encoded by `encodeItemValue` (`item.ts`: bigints as int64/uint64),
 * and must be one `itemRefusal` accepts (`send` checks before it gets here).
 */
export function encodeFrame(frame: StreamFrame): Uint8Array {
  switch (frame.kind) {
    case 'Item': {
      const v = frame.value;
      if (typeof v === 'string') {
        const out = new Uint8Array(itemStringMaxLength(v));
        return out.subarray(0, writeItemString(out, 0, v));
      }
      if (v instanceof Uint8Array) {
        const out = new Uint8Array(itemBytesLength(v.byteLength));
        writeItemBytes(out, 0, v);
        return out;
      }
      return encodeNewtype(ITEM_PREFIX, encodeItemValue(v === undefined ? null : v));
    }
    case 'SenderError':
    case 'TransportError': {
      const prefix = frame.kind === 'SenderError' ? SENDER_ERROR_PREFIX : TRANSPORT_ERROR_PREFIX;
      const out = new Uint8Array(prefix.length + 5 + frame.message.length * 3);
      return out.subarray(0, writeNewtypeString(out, 0, prefix, frame.message));
    }
    case 'Dropped':
      return FRAME_DROPPED.slice();
    case 'Detached':
      return FRAME_DETACHED.slice();
    case 'Finalized':
      return FRAME_FINALIZED.slice();
    case 'Heartbeat':
      return FRAME_HEARTBEAT.slice();
  }
}

function encodeNewtype(prefix: Uint8Array, value: Uint8Array): Uint8Array {
  const out = new Uint8Array(prefix.length + value.byteLength);
  out.set(prefix, 0);
  out.set(value, prefix.length);
  return out;
}

// ───────────────────────── reading ─────────────────────────

function startsWithAt(buf: Uint8Array, at: number, prefix: Uint8Array): boolean {
  for (let i = 0; i < prefix.length; i++) if (buf[at + i] !== prefix[i]) return false;
  return true;
}

function startsWith(body: Uint8Array, prefix: Uint8Array): boolean {
  if (body.byteLength < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (body[i] !== prefix[i]) return false;
  return true;
}

function equals(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Read a msgpack str or bin at `off` that must end exactly at the end of `body`. Returns false
 * when it is not such a value; otherwise fills `out` with the payload bounds and kind.
 */
function readStrOrBin(
  body: Uint8Array,
  off: number,
  out: { start: number; end: number; str: boolean },
  end = body.byteLength,
): boolean {
  if (off >= end) return false;
  const b = body[off]!;
  let n: number;
  let h: number;
  let str = true;
  if ((b & 0xe0) === 0xa0) {
    n = b & 0x1f;
    h = 1;
  } else if (b === 0xd9 || b === 0xc4) {
    if (off + 2 > end) return false;
    n = body[off + 1]!;
    h = 2;
    str = b === 0xd9;
  } else if (b === 0xda || b === 0xc5) {
    if (off + 3 > end) return false;
    n = (body[off + 1]! << 8) | body[off + 2]!;
    h = 3;
    str = b === 0xda;
  } else if (b === 0xdb || b === 0xc6) {
    if (off + 5 > end) return false;
    n = ((body[off + 1]! << 24) | (body[off + 2]! << 16) | (body[off + 3]! << 8) | body[off + 4]!) >>> 0;
    h = 5;
    str = b === 0xdb;
  } else {
    return false;
  }
  if (off + h + n !== end) return false;
  out.start = off + h;
  out.end = off + h + n;
  out.str = str;
  return true;
}

const scratch = { start: 0, end: 0, str: false };

/**
 * True if a Data body is a terminal: it equals the cached `Dropped`, `Detached` or `Finalized`
 * bytes, or it decodes as `TransportError(_)` (in any valid MessagePack form). `SenderError` is not
 * terminal, nor is an `Item` whose payload is the unit value.
 */
export function isTerminalSentinel(body: Uint8Array): boolean {
  const n = body.byteLength;
  if (
    n >= 8 &&
    n <= 10 &&
    (equals(body, FRAME_DROPPED) || equals(body, FRAME_DETACHED) || equals(body, FRAME_FINALIZED))
  )
    return true;
  if (startsWith(body, TRANSPORT_ERROR_PREFIX))
    return readStrOrBin(body, TRANSPORT_ERROR_PREFIX.length, scratch) && scratch.str && validUtf8(body, scratch);
  const b = body[0];
  if (b !== 0x81 && b !== 0xde && b !== 0xdf) return false;
  if (startsWith(body, ITEM_PREFIX)) return false;
  try {
    return parseFrame(body).kind === 'TransportError';
  } catch {
    return false;
  }
}

function validUtf8(body: Uint8Array, range: { start: number; end: number }): boolean {
  try {
    utf8Decode(body.subarray(range.start, range.end));
    return true;
  } catch {
    return false;
  }
}

/** True if the body is the `Heartbeat` unit frame. */
export function isHeartbeatFrame(body: Uint8Array): boolean {
  return equals(body, FRAME_HEARTBEAT);
}

/**
 * Decode a frame body. `Item(bytes)` returns a view into `body` (no copy). Accepts a unit variant
 * as a string or as a one-entry map. Throws a `WireError` with code `ERR_DESERIALIZATION` on
 * malformed input (e.g. body `c1`).
 */
export function decodeFrame<T = unknown>(body: Uint8Array): StreamFrame<T> {
  // Fast path: Item carrying a string or bytes.
  if (startsWith(body, ITEM_PREFIX) && readStrOrBin(body, ITEM_PREFIX_LEN, scratch)) {
    const view = body.subarray(scratch.start, scratch.end);
    return { kind: 'Item', value: (scratch.str ? decodeUtf8(view) : view) as T };
  }
  if (equals(body, FRAME_HEARTBEAT)) return HEARTBEAT;
  if (equals(body, FRAME_FINALIZED)) return FINALIZED;
  if (equals(body, FRAME_DROPPED)) return DROPPED;
  if (equals(body, FRAME_DETACHED)) return DETACHED;
  return parseFrame<T>(body);
}

const HEARTBEAT: StreamFrame<never> = Object.freeze({ kind: 'Heartbeat' });
const FINALIZED: StreamFrame<never> = Object.freeze({ kind: 'Finalized' });
const DROPPED: StreamFrame<never> = Object.freeze({ kind: 'Dropped' });
const DETACHED: StreamFrame<never> = Object.freeze({ kind: 'Detached' });

function decodeUtf8(view: Uint8Array): string {
  try {
    return utf8Decode(view);
  } catch (cause) {
    throw new WireError('ERR_DESERIALIZATION', 'Item string is not valid UTF-8', { cause });
  }
}

const bad = (why: string): WireError => new WireError('ERR_DESERIALIZATION', `body is not a StreamFrame: ${why}`);

/** A strict msgpack str at `off`: its UTF-8 decoded, and the offset after it. */
function readStr(body: Uint8Array, off: number): { text: string; next: number } {
  const b = body[off];
  let n: number;
  let h: number;
  if (b === undefined) throw bad('truncated');
  if ((b & 0xe0) === 0xa0) [n, h] = [b & 0x1f, 1];
  else if (b === 0xd9 && off + 2 <= body.byteLength) [n, h] = [body[off + 1]!, 2];
  else if (b === 0xda && off + 3 <= body.byteLength) [n, h] = [(body[off + 1]! << 8) | body[off + 2]!, 3];
  else if (b === 0xdb && off + 5 <= body.byteLength)
    [n, h] = [((body[off + 1]! << 24) | (body[off + 2]! << 16) | (body[off + 3]! << 8) | body[off + 4]!) >>> 0, 5];
  else throw bad('expected a string');
  const end = off + h + n;
  if (end > body.byteLength) throw bad('string runs past the body');
  try {
    return { text: utf8Decode(body.subarray(off + h, end)), next: end };
  } catch (cause) {
    throw new WireError('ERR_DESERIALIZATION', 'string is not valid UTF-8', { cause });
  }
}

/**
 * Parse a frame the way the reference's decoder accepts it: a unit variant as its name string, or
 * a map of exactly one entry `{ variant: value }`. Strings are strict UTF-8; an `Item` value is any
 * MessagePack value that ends exactly at the end of the body.
 */
function parseFrame<T>(body: Uint8Array): StreamFrame<T> {
  const b0 = body[0];
  if (b0 === undefined) throw bad('empty body');
  if ((b0 & 0xe0) === 0xa0 || b0 === 0xd9 || b0 === 0xda || b0 === 0xdb) {
    const { text, next } = readStr(body, 0);
    if (next !== body.byteLength) throw bad('bytes after the variant name');
    if (UNIT_NAMES.has(text)) return { kind: text as 'Dropped' | 'Detached' | 'Finalized' | 'Heartbeat' };
    throw bad(`unknown unit variant ${JSON.stringify(text.slice(0, 40))}`);
  }
  let count: number;
  let off: number;
  if ((b0 & 0xf0) === 0x80) [count, off] = [b0 & 0x0f, 1];
  else if (b0 === 0xde && body.byteLength >= 3) [count, off] = [(body[1]! << 8) | body[2]!, 3];
  else if (b0 === 0xdf && body.byteLength >= 5)
    [count, off] = [((body[1]! << 24) | (body[2]! << 16) | (body[3]! << 8) | body[4]!) >>> 0, 5];
  else throw bad('expected a variant name or a one-entry map');
  if (count !== 1) throw bad(`a map of ${count} entries`);
  const key = readStr(body, off);
  const v = key.next;
  switch (key.text) {
    case 'Item': {
      const vb = body[v] ?? 0;
      if ((vb & 0xe0) === 0xa0 || vb === 0xd9 || vb === 0xda || vb === 0xdb) {
        // A string item is strict UTF-8 on every path, as on the fast path.
        const str = readStr(body, v);
        if (str.next !== body.byteLength) throw bad('bytes after the Item value');
        return { kind: 'Item', value: str.text as T };
      }
      let value: unknown;
      try {
        // Bounded: a peer's containers may not declare more items than the bytes it sent (nested
        // array16 headers of 3 bytes each made the plain decoder reserve gigabytes).
        value = decodeBoundedItem(body.subarray(v));
      } catch (cause) {
        throw new WireError('ERR_DESERIALIZATION', 'Item value is not valid MessagePack', { cause });
      }
      return { kind: 'Item', value: value as T };
    }
    case 'SenderError':
    case 'TransportError': {
      const msg = readStr(body, v);
      if (msg.next !== body.byteLength) throw bad('bytes after the message');
      return { kind: key.text, message: msg.text };
    }
    default:
      if (UNIT_NAMES.has(key.text) && body[v] === 0xc0 && v + 1 === body.byteLength) {
        return { kind: key.text as 'Dropped' | 'Detached' | 'Finalized' | 'Heartbeat' };
      }
      throw bad(`unknown variant ${JSON.stringify(key.text.slice(0, 40))}`);
  }
}

/** Output of {@link decodeFrameInto}. */
export interface DecodedFrame {
  /** A {@link FrameKind}. */
  kind: number;
  /** Item value, error text, or undefined for unit frames. Bytes are copied out of the body. */
  value: unknown;
  /** True when the body is a terminal sentinel (same rule as {@link isTerminalSentinel}). */
  terminal: boolean;
}

const KIND_OF: Record<string, number> = {
  Item: FrameKind.Item,
  SenderError: FrameKind.SenderError,
  Heartbeat: FrameKind.Heartbeat,
  Finalized: FrameKind.Finalized,
  Detached: FrameKind.Detached,
  Dropped: FrameKind.Dropped,
  TransportError: FrameKind.TransportError,
};

/**
 * Decode a Data body into `out` without allocating a frame object, and never throw: a body that
 * is not a StreamFrame yields `FrameKind.Undecodable` with the reason as `value`. `Item(bytes)` is
 * copied, so the frame does not keep the whole batch alive.
 */
export function decodeFrameInto(body: Uint8Array, out: DecodedFrame): number {
  return decodeFrameAt(body, 0, body.byteLength, out);
}

/**
 * {@link decodeFrameAt}, with an `Item` whose value is neither a string nor bytes (an object, an
 * array, a number…) taken straight to the bounded decoder: not through the general frame parser,
 * its intermediate objects and the terminal check (about a fifth of receiving an AI SDK chunk).
 */
export function decodeRecordAt(
  buf: Uint8Array,
  start: number,
  end: number,
  out: DecodedFrame,
  slab: ItemSlab | null,
): number {
  if (end - start > ITEM_PREFIX_LEN && startsWithAt(buf, start, ITEM_PREFIX)) {
    const v = start + ITEM_PREFIX_LEN;
    const h = buf[v]!;
    out.terminal = false;
    if ((h >= 0xa0 && h <= 0xbf) || (h >= 0xc4 && h <= 0xc6) || (h >= 0xd9 && h <= 0xdb)) {
      // A str or bin that ends the body: the token path, without checking the prefix again. Any
      // other takes decodeFrameAt's general path, which says why it is refused.
      if (readStrOrBin(buf, v, scratch, end)) return strOrBinItem(buf, out, slab);
    } else {
      try {
        out.value = decodeBoundedItem(buf.subarray(start + ITEM_PREFIX_LEN, end));
        out.kind = FrameKind.Item;
      } catch {
        out.kind = FrameKind.Undecodable;
        out.value = 'Item value is not valid MessagePack';
      }
      return out.kind;
    }
  }
  return decodeFrameAt(buf, start, end, out, slab);
}

/**
 * The value of a Data body that is `Item(str)` or `Item(bin)` (the token path): a string, or a copy of
 * the bytes; undefined for any other body, which {@link decodeRecordAt} then reads (and refuses, saying
 * why, if it must). The value is returned, not stored in a scratch frame: storing each token's young
 * copy into that long-lived object and clearing it again cost two stores and a write barrier a token.
 */
export function readTokenAt(
  buf: Uint8Array,
  start: number,
  end: number,
  slab: ItemSlab | null,
): Uint8Array | string | undefined {
  const v = start + ITEM_PREFIX_LEN;
  // `scratch` takes numbers and a boolean only: no pointer to a young object.
  if (end <= v || !startsWithAt(buf, start, ITEM_PREFIX) || !readStrOrBin(buf, v, scratch, end)) return undefined;
  // A byte token of at most ON_HEAP_BYTES is copied without loading its stream's slab: a cache line fewer.
  if (!scratch.str)
    return slab === null || end - scratch.start <= ON_HEAP_BYTES
      ? copyBytes(buf, scratch.start, end)
      : slab.copy(buf, scratch.start, end);
  try {
    return utf8DecodeAt(buf, scratch.start, end);
  } catch {
    return undefined;
  }
}

/** The `Item` str or bin that `readStrOrBin` just found (in `scratch`): a string, or a copy of the bytes. */
function strOrBinItem(buf: Uint8Array, out: DecodedFrame, slab: ItemSlab | null): number {
  if (scratch.str) {
    try {
      out.value = utf8DecodeAt(buf, scratch.start, scratch.end);
    } catch {
      out.value = 'Item string is not valid UTF-8';
      return (out.kind = FrameKind.Undecodable);
    }
  } else
    out.value = slab === null ? copyBytes(buf, scratch.start, scratch.end) : slab.copy(buf, scratch.start, scratch.end);
  return (out.kind = FrameKind.Item);
}

/**
 * {@link decodeFrameInto} for a body given as `[start, end)` of a larger buffer (a batch payload),
 * so the ingress path makes no intermediate view: one view for a string's UTF-8, one real copy for
 * bytes (a plain `Uint8Array`: a Node `Buffer`'s own `slice` is a view).
 */
export function decodeFrameAt(
  buf: Uint8Array,
  start: number,
  end: number,
  out: DecodedFrame,
  slab: ItemSlab | null = null,
): number {
  out.terminal = false;
  const n = end - start;
  if (
    n > ITEM_PREFIX_LEN &&
    startsWithAt(buf, start, ITEM_PREFIX) &&
    readStrOrBin(buf, start + ITEM_PREFIX_LEN, scratch, end)
  ) {
    return strOrBinItem(buf, out, slab);
  }
  const body = buf.subarray(start, end);
  if (n >= 8 && n <= 10) {
    out.value = undefined;
    if (equals(body, FRAME_HEARTBEAT)) return (out.kind = FrameKind.Heartbeat);
    out.terminal = true;
    if (equals(body, FRAME_FINALIZED)) return (out.kind = FrameKind.Finalized);
    if (equals(body, FRAME_DROPPED)) return (out.kind = FrameKind.Dropped);
    if (equals(body, FRAME_DETACHED)) return (out.kind = FrameKind.Detached);
    out.terminal = false;
  }
  try {
    const f = decodeFrame(body);
    out.kind = KIND_OF[f.kind]!;
    out.value =
      f.kind === 'Item'
        ? f.value instanceof Uint8Array
          ? copyBytes(f.value)
          : f.value
        : f.kind === 'SenderError' || f.kind === 'TransportError'
          ? f.message
          : undefined;
    out.terminal = isTerminalSentinel(body);
  } catch (e) {
    out.kind = FrameKind.Undecodable;
    out.value = e instanceof Error ? e.message : String(e);
  }
  return out.kind;
}
