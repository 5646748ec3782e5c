import { describe, expect, it } from 'vitest';
import { fromBase64Url, toBase64Url } from '../../src/wire/base64url.ts';

describe('base64url', () => {
  it('encodes as Buffer does (unpadded, URL-safe) and decodes back, every tail length', () => {
    for (let n = 0; n < 40; n++) {
      const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 97 + n * 31) & 0xff);
      const text = toBase64Url(bytes);
      expect(text).toBe(Buffer.from(bytes).toString('base64url'));
      expect(fromBase64Url(text, new Uint8Array(text.length))).toEqual(bytes);
    }
  });

  it('refuses a character outside the alphabet and an impossible length', () => {
    expect(() => fromBase64Url('ab+c', new Uint8Array(4))).toThrow('bad base64url');
    expect(() => fromBase64Url('abcde', new Uint8Array(8))).toThrow('bad base64url');
    expect(() => fromBase64Url('ab=', new Uint8Array(4))).toThrow('bad base64url');
  });
});
