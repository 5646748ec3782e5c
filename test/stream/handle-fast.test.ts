/**
 * parseHandle skips its regex for a handle of the last worker it saw. Whatever the path, a string
 * must parse exactly as the handle grammar says (`lmx1.` + 32 lower-case hex digits) — including
 * strings that share the cached worker prefix but are not handles.
 */
import { describe, expect, it } from 'vitest';
import { formatHandle, parseHandle } from '../../src/stream/handle.ts';

const RE = /^lmx1\.([0-9a-f]{16})([0-9a-f]{16})$/;
function reference(text: string): { workerId: bigint; localId: bigint } | 'invalid' {
  const m = RE.exec(text);
  return m ? { workerId: BigInt(`0x${m[1]!}`), localId: BigInt(`0x${m[2]!}`) } : 'invalid';
}
function actual(text: string): { workerId: bigint; localId: bigint } | 'invalid' {
  try {
    return parseHandle(text);
  } catch (e) {
    expect(e).toMatchObject({ code: 'ERR_INVALID_HANDLE' });
    return 'invalid';
  }
}

describe('parseHandle fast path', () => {
  it('parses every string as the grammar does, whichever worker was seen last', () => {
    let seed = 5;
    const rnd = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const u64 = (): bigint => (BigInt(Math.floor(rnd() * 2 ** 32)) << 32n) | BigInt(Math.floor(rnd() * 2 ** 32));
    const workers = [u64(), u64(), 0n, 2n ** 64n - 1n];
    const chars = '0123456789abcdefABCDEFgx.-';
    for (let i = 0; i < 5000; i++) {
      const workerId = workers[Math.floor(rnd() * workers.length)]!;
      const good = formatHandle({ workerId, localId: u64() });
      expect(actual(good)).toStrictEqual(reference(good));
      // One character replaced, dropped or added, anywhere (the cached prefix included).
      const p = Math.floor(rnd() * good.length);
      const c = chars[Math.floor(rnd() * chars.length)]!;
      for (const bad of [
        good.slice(0, p) + c + good.slice(p + 1),
        good.slice(0, p) + good.slice(p + 1),
        good.slice(0, p) + c + good.slice(p),
        good.toUpperCase(),
        `${good} `,
      ]) {
        expect(actual(bad)).toStrictEqual(reference(bad));
      }
    }
  });
});
