/**
 * Unpadded base64url (the URL-safe alphabet, `-` and `_`, no `=`) for the short texts lanemux hands to applications (stream-open
 * tickets). Hand-written rather than `btoa`/`Buffer`: the core runs on every runtime, and a ticket is
 * encoded and parsed per zero-RTT stream, so both directions work in preallocated scratch.
 */

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** base64url alphabet as char codes. */
const B64_CODE = /*@__PURE__*/ Uint8Array.from(B64, (c) => c.charCodeAt(0));
/** Scratch of base64url char codes, decoded to a string in one call (much cheaper than a concat per char). */
const B64_OUT = new Uint8Array(1024);
const ascii = new TextDecoder();

/** Encode `bytes` as unpadded base64url. */
export function toBase64Url(bytes: Uint8Array): string {
  const n = bytes.length;
  const out = Math.ceil((n * 4) / 3) <= B64_OUT.length ? B64_OUT : new Uint8Array(Math.ceil((n * 4) / 3));
  let o = 0;
  let i = 0;
  for (; i + 3 <= n; i += 3) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out[o++] = B64_CODE[v >> 18]!;
    out[o++] = B64_CODE[(v >> 12) & 63]!;
    out[o++] = B64_CODE[(v >> 6) & 63]!;
    out[o++] = B64_CODE[v & 63]!;
  }
  if (i < n) {
    const v = (bytes[i]! << 16) | ((i + 1 < n ? bytes[i + 1]! : 0) << 8);
    out[o++] = B64_CODE[v >> 18]!;
    out[o++] = B64_CODE[(v >> 12) & 63]!;
    if (i + 1 < n) out[o++] = B64_CODE[(v >> 6) & 63]!;
  }
  return ascii.decode(out.subarray(0, o));
}

/** base64url alphabet → value, -1 for anything else. */
const B64_VALUE = /*@__PURE__*/ (() => {
  const t = new Int8Array(128).fill(-1);
  for (let i = 0; i < 64; i++) t[B64.charCodeAt(i)] = i;
  return t;
})();

/** Value of a base64url char code, -1 for anything else. */
const b64 = (c: number): number => (c < 128 ? B64_VALUE[c]! : -1);

/** Decode base64url `text` into `out` (which must hold `3/4` of its length); returns the view of it written. */
export function fromBase64Url(text: string, out: Uint8Array): Uint8Array {
  const n = text.length;
  const tail = n % 4;
  if (tail === 1) throw new Error('bad base64url');
  let o = 0;
  let i = 0;
  // Four characters → three bytes; a tail of 2 or 3 characters → 1 or 2 bytes (its spare bits ignored).
  for (const full = n - tail; i < full; i += 4) {
    const a = b64(text.charCodeAt(i));
    const b = b64(text.charCodeAt(i + 1));
    const c = b64(text.charCodeAt(i + 2));
    const d = b64(text.charCodeAt(i + 3));
    if ((a | b | c | d) < 0) throw new Error('bad base64url');
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    out[o++] = v >> 16;
    out[o++] = (v >> 8) & 255;
    out[o++] = v & 255;
  }
  if (tail !== 0) {
    const a = b64(text.charCodeAt(i));
    const b = b64(text.charCodeAt(i + 1));
    const c = tail === 3 ? b64(text.charCodeAt(i + 2)) : 0;
    if ((a | b | c) < 0) throw new Error('bad base64url');
    const v = (a << 18) | (b << 12) | (c << 6);
    out[o++] = v >> 16;
    if (tail === 3) out[o++] = (v >> 8) & 255;
  }
  return out.subarray(0, o);
}
