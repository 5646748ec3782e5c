/**
 * The hand decoder for short strings must agree with the platform's fatal UTF-8 decoder on every
 * input: the same string for well-formed bytes, a throw for anything else (overlong forms,
 * surrogates, code points past U+10FFFF, cut sequences, stray continuation bytes).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HAND_DECODE_LIMIT, utf8DecodeAt } from '../../src/wire/utf8.ts';

const platform = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** What each decoder makes of `bytes[start, end)`: the string, or that it threw. */
function outcome(decode: () => string): { ok: true; text: string } | { ok: false } {
  try {
    return { ok: true, text: decode() };
  } catch {
    return { ok: false };
  }
}

function agree(bytes: Uint8Array, start = 0, end = bytes.byteLength): void {
  const ours = outcome(() => utf8DecodeAt(bytes, start, end));
  const theirs = outcome(() => platform.decode(bytes.subarray(start, end)));
  expect(ours).toEqual(theirs);
}

describe('utf8DecodeAt', () => {
  it('decodes well-formed strings of every width as the platform does, at any offset', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 12 }), fc.nat(8), (s, pad) => {
        const enc = new TextEncoder().encode(s);
        const bytes = new Uint8Array(pad + enc.byteLength + 3);
        bytes.set(enc, pad);
        agree(bytes, pad, pad + enc.byteLength);
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses (throws) exactly what the platform refuses, for random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: HAND_DECODE_LIMIT + 2 }), (bytes) => agree(bytes)),
      { numRuns: 20000 },
    );
  });

  it('refuses the ill-formed sequences at each boundary of the UTF-8 table', () => {
    const cases = [
      [0xc0, 0x80], // overlong NUL
      [0xc1, 0xbf], // overlong
      [0xe0, 0x9f, 0xbf], // overlong 3-byte
      [0xed, 0xa0, 0x80], // surrogate D800
      [0xed, 0xbf, 0xbf], // surrogate DFFF
      [0xf0, 0x8f, 0xbf, 0xbf], // overlong 4-byte
      [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
      [0xf5, 0x80, 0x80, 0x80], // no such lead byte
      [0x80], // stray continuation
      [0xe2, 0x82], // cut 3-byte sequence
      [0xf0, 0x9f, 0x98], // cut 4-byte sequence
      [0x61, 0xc3], // cut at the end after ASCII
    ];
    for (const c of cases) {
      expect(() => utf8DecodeAt(Uint8Array.from(c), 0, c.length), c.map((b) => b.toString(16)).join(' ')).toThrow();
      agree(Uint8Array.from(c));
    }
    // And the last well-formed value before each boundary decodes.
    for (const c of [
      [0xc2, 0x80],
      [0xe0, 0xa0, 0x80],
      [0xed, 0x9f, 0xbf],
      [0xf0, 0x90, 0x80, 0x80],
      [0xf4, 0x8f, 0xbf, 0xbf],
    ])
      agree(Uint8Array.from(c));
  });

  it('decodes strings longer than the hand limit through the platform, with the same result', () => {
    const long = `${'x'.repeat(HAND_DECODE_LIMIT)}€😀`;
    const bytes = new TextEncoder().encode(long);
    expect(utf8DecodeAt(bytes, 0, bytes.byteLength)).toBe(long);
  });

  it('keeps a leading byte order mark, short or long, as the item was sent', () => {
    for (const text of ['\ufeff', '\ufeffab', `\ufeff${'x'.repeat(40)}`]) {
      const bytes = new TextEncoder().encode(text);
      expect(utf8DecodeAt(bytes, 0, bytes.byteLength)).toBe(text);
    }
  });
});
