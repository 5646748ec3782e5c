/**
 * MessagePack for small plain values, by hand: the attach request and its answer and the other unary
 * control bodies, and object items such as the AI SDK's chunks — plain objects and arrays of strings,
 * naturals below 2^32, booleans and nil. One attach runs four of them through the general encoder and decoder (request and answer,
 * each written once and read once), and those were a sixth of an attach's CPU
 * (`node --cpu-prof bench/lifecycle.mjs --mode attach --items 0`): the decoder builds each string from
 * an array of char codes.
 *
 * {@link writePlain} produces exactly the bytes `@msgpack/msgpack` makes of the same value (with
 * `ignoreUndefined`: a map entry whose value is `undefined` is left out), or gives up (undefined) on
 * anything else. {@link readPlain} reads a value of that subset that fills its input exactly and
 * returns what the general decoder would (a fresh plain object per map, keys in order, a repeated
 * key's last value), or gives up ({@link GIVE_UP}). Giving up costs at most one pass over a body of at
 * most {@link PLAIN_MAX_BYTES}; the caller then takes the general path, so refusals and their messages
 * are unchanged (test/wire/plain-codec.test.ts compares both ways on random values and damaged bytes).
 * One difference is kept on purpose: a map value behind a getter is read once (the general encoder reads
 * it twice, to count the entries and to write them), so a getter with side effects is written as read.
 *
 * Pure: no timers, no I/O.
 */

import { utf8DecodeAt, utf8Write } from './utf8.ts';

/** {@link readPlain}'s answer for input outside the subset. */
export const GIVE_UP: unique symbol = Symbol('plain-codec: give up');

/** Largest body either side takes; beyond it the general path is as cheap relatively. */
export const PLAIN_MAX_BYTES = 2048;
/** Deepest nesting either side takes (the attach answer is two levels deep). */
const MAX_DEPTH = 4;
/** Strings up to this many bytes are kept in the read cache (keys and `0x…` ids). */
const CACHED_STRING_BYTES = 24;
const CACHE_SLOTS = 128;

// ───────────── writing ─────────────

/** The buffer every body is written into (the result is a view of it). */
const out = new Uint8Array(PLAIN_MAX_BYTES);
/** A writer's answer when the value is outside the subset or does not fit. */
const NO = -1;
/** Calls of {@link writePlain} so far: a result is valid while this has not moved. */
let writes = 0;
/** A write is under way (see {@link writePlain}). */
let writing = false;
/** Arrays are read by their iterator by the general encoder: one with another is its to write. */
const ARRAY_ITERATOR = Array.prototype[Symbol.iterator];

/** {@link writePlain}'s calls so far (a result is still valid while this is unchanged). */
export function plainWrites(): number {
  return writes;
}

/**
 * `value` as `@msgpack/msgpack` encodes it, after `prefix` if one is given (an `Item` newtype's), when it
 * is in the subset; else undefined. The result is a view of a shared buffer, valid until the next call
 * (as the general encoder's shared result is).
 */
export function writePlain(value: unknown, prefix?: Uint8Array): Uint8Array | undefined {
  // A getter or proxy trap that writes again (a `send` on another stream, a unary call) would write
  // over the body being written: the inner write takes the general path instead.
  if (writing) return undefined;
  writes++;
  writing = true;
  try {
    let p = 0;
    if (prefix !== undefined) {
      out.set(prefix);
      p = prefix.byteLength;
    }
    const n = put(value, p, 0);
    return n === NO ? undefined : out.subarray(0, n);
  } finally {
    writing = false;
  }
}

// Each writer takes the position to write at and returns the next one, or NO: the position stays in a
// register rather than a module variable, which optimized code would load and store on every byte.
function put(v: unknown, p: number, depth: number): number {
  switch (typeof v) {
    case 'string':
      return putString(v, p);
    case 'number':
      return putNatural(v, p);
    case 'boolean':
      if (p >= PLAIN_MAX_BYTES) return NO;
      out[p] = v ? 0xc3 : 0xc2;
      return p + 1;
    case 'object':
      if (v === null) {
        if (p >= PLAIN_MAX_BYTES) return NO;
        out[p] = 0xc0;
        return p + 1;
      }
      if (depth >= MAX_DEPTH) return NO;
      return Array.isArray(v) ? putArray(v, p, depth) : putMap(v, p, depth);
    default:
      return NO;
  }
}

function putString(s: string, p: number): number {
  const n = s.length;
  const o = out;
  // ASCII (keys, ids, most text) in one pass: its byte length is its length.
  if (n < 32 && p + n < PLAIN_MAX_BYTES) {
    o[p] = 0xa0 | n;
    let q = p + 1;
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      o[q++] = c;
    }
    if (i === n) return q;
  }
  // The header needs the UTF-8 length first.
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) bytes++;
    else if (c < 0x800) bytes += 2;
    else if (c < 0xd800 || c > 0xdfff) bytes += 3;
    else {
      // A pair is four bytes. A lone surrogate is the general encoder's: its own loop and TextEncoder
      // (above 50 characters) write it differently.
      if (c > 0xdbff || i + 1 >= n) return NO;
      const d = s.charCodeAt(i + 1);
      if (d < 0xdc00 || d > 0xdfff) return NO;
      i++;
      bytes += 4;
    }
  }
  if (bytes > 0xffff || p + bytes + 3 > PLAIN_MAX_BYTES) return NO;
  if (bytes < 32) o[p++] = 0xa0 | bytes;
  else if (bytes < 0x100) {
    o[p++] = 0xd9;
    o[p++] = bytes;
  } else {
    o[p++] = 0xda;
    o[p++] = bytes >>> 8;
    o[p++] = bytes & 0xff;
  }
  // No lone surrogate (checked above): the platform's UTF-8, which the general encoder's equals then.
  return p + utf8Write(s, o, p);
}

function putNatural(v: number, p: number): number {
  // Negatives, fractions and numbers from 2^32 take other forms (a 64-bit one as a float under `useBigInt64`).
  if (!(Number.isInteger(v) && v >= 0 && v <= 0xffff_ffff) || p + 5 > PLAIN_MAX_BYTES) return NO;
  const o = out;
  if (v < 0x80) o[p++] = v;
  else if (v < 0x100) {
    o[p++] = 0xcc;
    o[p++] = v;
  } else if (v < 0x10000) {
    o[p++] = 0xcd;
    o[p++] = v >>> 8;
    o[p++] = v & 0xff;
  } else {
    o[p++] = 0xce;
    o[p++] = v >>> 24;
    o[p++] = (v >>> 16) & 0xff;
    o[p++] = (v >>> 8) & 0xff;
    o[p++] = v & 0xff;
  }
  return p;
}

function putArray(a: unknown[], p: number, depth: number): number {
  const n = a.length;
  // An array subclass would arrive as a plain array (an item that is one is refused).
  if (
    n > 15 ||
    p >= PLAIN_MAX_BYTES ||
    Object.getPrototypeOf(a) !== Array.prototype ||
    a[Symbol.iterator] !== ARRAY_ITERATOR
  )
    return NO;
  out[p++] = 0x90 | n;
  for (let i = 0; i < n && p !== NO; i++) {
    const x = a[i];
    // The general encoder writes a hole or `undefined` in an array as nil; not worth a case here.
    p = x === undefined ? NO : put(x, p, depth + 1);
  }
  return p;
}

function putMap(o: object, p: number, depth: number): number {
  // A class instance, a Date, a Map, a typed array: the general encoder's (extensions, bin, errors).
  const proto: unknown = Object.getPrototypeOf(o);
  // A typed array or view over another prototype: the general encoder's (it writes bin, or refuses).
  if ((proto !== Object.prototype && proto !== null) || ArrayBuffer.isView(o)) return NO;
  // Symbol keys are not sent (an item with one is refused); a `__proto__` key is refused by decoders.
  if (Object.getOwnPropertySymbols(o).length > 0) return NO;
  const r = o as Record<string, unknown>;
  const keys = Object.keys(r);
  if (keys.length > 15 || p >= PLAIN_MAX_BYTES) return NO;
  // One pass: the header, which counts the entries written (`undefined` values are left out), is
  // filled in after them.
  const head = p++;
  let n = 0;
  for (let i = 0; i < keys.length && p !== NO; i++) {
    const k = keys[i]!;
    const x = r[k];
    if (k === '__proto__') return NO;
    if (x === undefined) continue;
    n++;
    p = putString(k, p);
    if (p !== NO) p = put(x, p, depth + 1);
  }
  out[head] = 0x80 | n;
  return p;
}

// ───────────── reading ─────────────

const NOTHING = new Uint8Array(0);
/** The input being read; let go after each read (a view would pin the chunk it came in). */
let src: Uint8Array = NOTHING;
let pos = 0;
let end = 0;
/** Strings read before, by a hash of their bytes: keys and ids repeat from one message to the next. */
const cache: (string | undefined)[] = new Array<string | undefined>(CACHE_SLOTS).fill(undefined);

/**
 * The value `bytes[start, stop)` holds, as the general decoder returns it (with or without
 * `useBigInt64`: the subset has no 64-bit integer), when it is in the subset and fills the range
 * exactly; else {@link GIVE_UP}.
 */
export function readPlain(bytes: Uint8Array, start = 0, stop = bytes.byteLength): unknown {
  if (stop - start > PLAIN_MAX_BYTES) return GIVE_UP;
  src = bytes;
  pos = start;
  end = stop;
  const v = take(0);
  src = NOTHING;
  return pos === end ? v : GIVE_UP;
}

function take(depth: number): unknown {
  if (pos >= end) return GIVE_UP;
  const b = src[pos++]!;
  if (b < 0x80) return b;
  if (b >= 0xa0 && b <= 0xbf) return text(b & 0x1f);
  if (b >= 0x80 && b <= 0x8f) return depth >= MAX_DEPTH ? GIVE_UP : map(b & 0x0f, depth);
  if (b >= 0x90 && b <= 0x9f) return depth >= MAX_DEPTH ? GIVE_UP : list(b & 0x0f, depth);
  switch (b) {
    case 0xc0:
      return null;
    case 0xc2:
      return false;
    case 0xc3:
      return true;
    case 0xcc:
      return pos + 1 <= end ? src[pos++]! : GIVE_UP;
    case 0xcd:
      if (pos + 2 > end) return GIVE_UP;
      pos += 2;
      return (src[pos - 2]! << 8) | src[pos - 1]!;
    case 0xce:
      if (pos + 4 > end) return GIVE_UP;
      pos += 4;
      return ((src[pos - 4]! << 24) | (src[pos - 3]! << 16) | (src[pos - 2]! << 8) | src[pos - 1]!) >>> 0;
    case 0xd9:
      return pos + 1 <= end ? text(src[pos++]!) : GIVE_UP;
    case 0xda:
      if (pos + 2 > end) return GIVE_UP;
      pos += 2;
      return text((src[pos - 2]! << 8) | src[pos - 1]!);
    default:
      return GIVE_UP;
  }
}

function text(n: number): string | typeof GIVE_UP {
  const b = src;
  const a = pos;
  const z = a + n;
  if (z > end) return GIVE_UP;
  pos = z;
  // A string seen before (keys, ids) is found by its length and three of its bytes, then compared:
  // the cache holds ASCII strings only, so a match is ASCII too.
  const slot =
    n <= CACHED_STRING_BYTES && n > 0
      ? (n * 31 + b[a]! * 7 + b[a + (n >>> 1)]! * 3 + b[z - 1]!) & (CACHE_SLOTS - 1)
      : -1;
  if (slot >= 0) {
    const hit = cache[slot];
    if (hit !== undefined && hit.length === n) {
      let i = 0;
      while (i < n && hit.charCodeAt(i) === b[a + i]) i++;
      if (i === n) return hit;
    }
  }
  // Above 200 bytes the general decoder uses TextDecoder, which drops a leading byte order mark.
  if (n > 200 && b[a] === 0xef && b[a + 1] === 0xbb && b[a + 2] === 0xbf) return GIVE_UP;
  for (let i = a; i < z; i++) if (b[i]! >= 0x80) return utf8(b, a, z);
  const s = ascii(b, a, z);
  if (slot >= 0) cache[slot] = s;
  return s;
}

/**
 * Well-formed UTF-8 as the string it spells (utf8.ts, which keeps a leading byte order mark, as the
 * general decoder does up to 200 bytes); anything else (an overlong form, a surrogate, a cut sequence)
 * is the general decoder's to read.
 */
function utf8(b: Uint8Array, a: number, z: number): string | typeof GIVE_UP {
  try {
    return utf8DecodeAt(b, a, z);
  } catch {
    return GIVE_UP;
  }
}

/**
 * The ASCII bytes `b[a, z)` as a string. `fromCharCode` with its arguments spelled out, eight at a
 * time, is several times faster than `fromCharCode.apply` over a view for short strings, which are
 * most keys and ids.
 */
function ascii(b: Uint8Array, a: number, z: number): string {
  if (z - a > 64) return String.fromCharCode.apply(null, b.subarray(a, z) as unknown as number[]);
  let s = '';
  let i = a;
  for (; i + 8 <= z; i += 8)
    s += String.fromCharCode(b[i]!, b[i + 1]!, b[i + 2]!, b[i + 3]!, b[i + 4]!, b[i + 5]!, b[i + 6]!, b[i + 7]!);
  switch (z - i) {
    case 1:
      return s + String.fromCharCode(b[i]!);
    case 2:
      return s + String.fromCharCode(b[i]!, b[i + 1]!);
    case 3:
      return s + String.fromCharCode(b[i]!, b[i + 1]!, b[i + 2]!);
    case 4:
      return s + String.fromCharCode(b[i]!, b[i + 1]!, b[i + 2]!, b[i + 3]!);
    case 5:
      return s + String.fromCharCode(b[i]!, b[i + 1]!, b[i + 2]!, b[i + 3]!, b[i + 4]!);
    case 6:
      return s + String.fromCharCode(b[i]!, b[i + 1]!, b[i + 2]!, b[i + 3]!, b[i + 4]!, b[i + 5]!);
    case 7:
      return s + String.fromCharCode(b[i]!, b[i + 1]!, b[i + 2]!, b[i + 3]!, b[i + 4]!, b[i + 5]!, b[i + 6]!);
    default:
      return s;
  }
}

function list(n: number, depth: number): unknown {
  // Every item takes a byte at least: a count the input cannot hold is refused before anything is made.
  if (n > end - pos) return GIVE_UP;
  const a: unknown[] = [];
  for (let i = 0; i < n; i++) {
    const v = take(depth + 1);
    if (v === GIVE_UP) return GIVE_UP;
    a.push(v);
  }
  return a;
}

function map(n: number, depth: number): unknown {
  if (2 * n > end - pos) return GIVE_UP;
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    const b = pos < end ? src[pos]! : 0;
    // Keys: strings only (a number key, allowed by the general decoder, is rare in a control body).
    if (!((b >= 0xa0 && b <= 0xbf) || b === 0xd9 || b === 0xda)) return GIVE_UP;
    const k = take(depth + 1);
    if (k === GIVE_UP || k === '__proto__') return GIVE_UP;
    const v = take(depth + 1);
    if (v === GIVE_UP) return GIVE_UP;
    o[k as string] = v;
  }
  return o;
}
