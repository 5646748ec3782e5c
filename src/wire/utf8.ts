/**
 * UTF-8 helpers for the token hot path. Short strings (most LLM tokens) are written by hand,
 * which beats `TextEncoder.encodeInto` on a subarray and allocates nothing; long ones use
 * `encodeInto`. Lone surrogates become U+FFFD, as `TextEncoder` does.
 */

const encoder = /*@__PURE__*/ new TextEncoder();
// `ignoreBOM`: a string that starts with U+FEFF arrives with it (the default decoder drops it, so such an
// item lost its first character).
const decoder = /*@__PURE__*/ new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const HAND_LIMIT = 64;

/** Exact UTF-8 byte length of `str`. */
export function utf8Length(str: string): number {
  let n = 0;
  for (let i = 0; i < str.length; i++) {
    const c = str.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < str.length && (str.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Write `str` as UTF-8 at `off`; `buf` must have `3 * str.length` bytes free there. Returns bytes written. */
export function utf8Write(str: string, buf: Uint8Array, off: number): number {
  const len = str.length;
  if (len > HAND_LIMIT) {
    return encoder.encodeInto(str, buf.subarray(off, off + len * 3)).written;
  }
  let p = off;
  for (let i = 0; i < len; i++) {
    let c = str.charCodeAt(i);
    if (c < 0x80) {
      buf[p++] = c;
    } else if (c < 0x800) {
      buf[p++] = 0xc0 | (c >> 6);
      buf[p++] = 0x80 | (c & 0x3f);
    } else {
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < len ? str.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && (d & 0xfc00) === 0xdc00) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          i++;
          buf[p++] = 0xf0 | (c >> 18);
          buf[p++] = 0x80 | ((c >> 12) & 0x3f);
          buf[p++] = 0x80 | ((c >> 6) & 0x3f);
          buf[p++] = 0x80 | (c & 0x3f);
          continue;
        }
        c = 0xfffd;
      }
      buf[p++] = 0xe0 | (c >> 12);
      buf[p++] = 0x80 | ((c >> 6) & 0x3f);
      buf[p++] = 0x80 | (c & 0x3f);
    }
  }
  return p - off;
}

/** Encode a string to fresh bytes (off the hot path). */
export function utf8Encode(str: string): Uint8Array {
  return encoder.encode(str);
}

/** Decode UTF-8 bytes; throws a TypeError on invalid input (callers map it to a deserialization error). */
export function utf8Decode(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

/**
 * Bytes up to which a string is decoded by hand. The platform decoder's call costs about the same
 * whatever the length (Node 20), while the loop grows with it (each character copies the string so far)
 * and passes the call a little past ten bytes. An LLM token is a few characters: `node bench/codec.mjs`
 * compares the two on the mux ingress path (1–8-character tokens by hand, 40-character ones by the call).
 */
export const HAND_DECODE_LIMIT = 10;

/**
 * Decode `buf[start, end)` as UTF-8, exactly as {@link utf8Decode} would (the same string, or the same
 * TypeError), without a view of the range when it is short.
 */
export function utf8DecodeAt(buf: Uint8Array, start: number, end: number): string {
  if (end - start <= HAND_DECODE_LIMIT) {
    const s = decodeShort(buf, start, end);
    if (s !== null) return s;
  }
  return decoder.decode(buf.subarray(start, end));
}

/**
 * Well-formed UTF-8 decoded by hand, or null for anything that is not (the platform decoder then
 * throws its error): no overlong form, no surrogate, nothing past U+10FFFF, no cut sequence.
 */
function decodeShort(buf: Uint8Array, start: number, end: number): string | null {
  let out = '';
  let i = start;
  while (i < end) {
    const a = buf[i] as number;
    if (a < 0x80) {
      out += String.fromCharCode(a);
      i += 1;
    } else if (a >= 0xc2 && a <= 0xdf) {
      if (i + 1 >= end) return null;
      const b = buf[i + 1] as number;
      if ((b & 0xc0) !== 0x80) return null;
      out += String.fromCharCode(((a & 0x1f) << 6) | (b & 0x3f));
      i += 2;
    } else if (a >= 0xe0 && a <= 0xef) {
      if (i + 2 >= end) return null;
      const b = buf[i + 1] as number;
      const c = buf[i + 2] as number;
      if ((b & 0xc0) !== 0x80 || (c & 0xc0) !== 0x80) return null;
      // E0 needs A0.., or it is overlong; ED stops at 9F, past it are surrogates.
      if ((a === 0xe0 && b < 0xa0) || (a === 0xed && b > 0x9f)) return null;
      out += String.fromCharCode(((a & 0x0f) << 12) | ((b & 0x3f) << 6) | (c & 0x3f));
      i += 3;
    } else if (a >= 0xf0 && a <= 0xf4) {
      if (i + 3 >= end) return null;
      const b = buf[i + 1] as number;
      const c = buf[i + 2] as number;
      const d = buf[i + 3] as number;
      if ((b & 0xc0) !== 0x80 || (c & 0xc0) !== 0x80 || (d & 0xc0) !== 0x80) return null;
      // F0 needs 90.., or it is overlong; F4 stops at 8F, past it is beyond U+10FFFF.
      if ((a === 0xf0 && b < 0x90) || (a === 0xf4 && b > 0x8f)) return null;
      const cp = (((a & 0x07) << 18) | ((b & 0x3f) << 12) | ((c & 0x3f) << 6) | (d & 0x3f)) - 0x10000;
      out += String.fromCharCode(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      i += 4;
    } else return null;
  }
  return out;
}
