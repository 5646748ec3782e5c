/**
 * UTF-8 helpers for the token hot path. Short strings (most LLM tokens) are written by hand,
 * which beats `TextEncoder.encodeInto` on a subarray and allocates nothing; long ones use
 * `encodeInto`. Lone surrogates become U+FFFD, as `TextEncoder` does.
 */

const encoder = /*@__PURE__*/ new TextEncoder();
const decoder = /*@__PURE__*/ new TextDecoder('utf-8', { fatal: true });
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
