// decodeRecordAt: an Item whose value is neither a string nor bytes goes straight to the bounded
// decoder; it must answer exactly what decodeFrameAt answers, for every body, well-formed or not.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  type DecodedFrame,
  decodeFrameAt,
  decodeRecordAt,
  encodeFrame,
  FrameKind,
  readTokenAt,
} from '../../src/wire/frame.ts';

const fresh = (): DecodedFrame => ({ kind: -1, value: undefined, terminal: false });

/** Both decoders on `body` placed at an offset of a larger buffer, as a batch holds it. */
function both(body: Uint8Array): [DecodedFrame, DecodedFrame] {
  const buf = new Uint8Array(body.byteLength + 7);
  buf.set(body, 3);
  const a = fresh();
  const b = fresh();
  decodeFrameAt(buf, 3, 3 + body.byteLength, a);
  decodeRecordAt(buf, 3, 3 + body.byteLength, b, null);
  return [a, b];
}

/** `body` cut short at `at`, or with the byte at `at` replaced by `byte` (a copy either way). */
function damage(body: Uint8Array, at: number, byte: number, cut: boolean): Uint8Array {
  const i = at % body.byteLength;
  const out = body.slice(0, cut ? i : body.byteLength);
  if (!cut) out[i] = byte;
  return out;
}

const value = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    fc.string(),
    fc.integer(),
    fc.double({ noNaN: true }),
    fc.boolean(),
    fc.constant(null),
    fc.uint8Array({ maxLength: 8 }),
    fc.array(tie('v'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 6 }), tie('v'), { maxKeys: 4 }),
  ),
})).v;

describe('decodeRecordAt', () => {
  it('decodes every Item exactly as decodeFrameAt does (objects, arrays, numbers, strings, bytes)', () => {
    fc.assert(
      fc.property(value, (v) => {
        const [a, b] = both(encodeFrame({ kind: 'Item', value: v }));
        expect(b).toEqual(a);
        expect(b.kind).toBe(FrameKind.Item);
      }),
    );
  });

  it('answers a damaged Item body, and every other frame, as decodeFrameAt does', () => {
    const bodies = [
      encodeFrame({ kind: 'Item', value: { type: 'text-delta', id: 's1', delta: 'hi' } }),
      encodeFrame({ kind: 'Item', value: [1, 2, 3] }),
      encodeFrame({ kind: 'Item', value: 'text' }),
      encodeFrame({ kind: 'SenderError', message: 'no' }),
      encodeFrame({ kind: 'TransportError', message: 'gone' }),
      encodeFrame({ kind: 'Finalized' }),
      encodeFrame({ kind: 'Heartbeat' }),
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...bodies),
        fc.nat(),
        fc.integer({ min: 0, max: 255 }),
        fc.boolean(),
        (body, at, byte, cut) => {
          const [a, b] = both(damage(body, at, byte, cut));
          expect(b).toEqual(a);
        },
      ),
    );
  });

  it('a string item that is not strict UTF-8 is refused on this path too', () => {
    // {"Item": "\xff"}: the bounded decoder alone would let it through.
    const body = Uint8Array.from([0x81, 0xa4, 0x49, 0x74, 0x65, 0x6d, 0xa1, 0xff]);
    const [a, b] = both(body);
    expect(b.kind).toBe(FrameKind.Undecodable);
    expect(b).toEqual(a);
  });
});

describe('readTokenAt (the token path of ingress)', () => {
  /** readTokenAt on `body` at an offset of a larger buffer, beside what decodeFrameAt answers. */
  function token(body: Uint8Array): [unknown, DecodedFrame, Uint8Array] {
    const buf = new Uint8Array(body.byteLength + 7);
    buf.set(body, 3);
    const general = fresh();
    decodeFrameAt(buf, 3, 3 + body.byteLength, general);
    return [readTokenAt(buf, 3, 3 + body.byteLength, null), general, buf];
  }

  it('returns what decodeFrameAt decodes for every Item(str) and Item(bytes), headers of 1 to 5 bytes, and a copy that does not alias the batch', () => {
    const item = fc.oneof(
      fc.string(),
      fc.uint8Array({ maxLength: 40 }),
      fc.integer({ min: 0, max: 70_000 }).map((n) => new Uint8Array(n).fill(7)),
      fc.integer({ min: 0, max: 70_000 }).map((n) => 'x'.repeat(n)),
    );
    fc.assert(
      fc.property(item, (v) => {
        const [t, general, buf] = token(encodeFrame({ kind: 'Item', value: v }));
        expect(general.kind).toBe(FrameKind.Item);
        expect(t).toEqual(general.value);
        if (t instanceof Uint8Array && t.byteLength > 0) {
          buf.fill(0);
          expect(t).toEqual(v);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('leaves every other body, damaged or cut, to the general path (undefined), never answering differently', () => {
    const bodies = [
      encodeFrame({ kind: 'Item', value: 'text' }),
      encodeFrame({ kind: 'Item', value: new Uint8Array([1, 2, 3, 4]) }),
      encodeFrame({ kind: 'Item', value: { type: 'text-delta', id: 's1', delta: 'hi' } }),
      encodeFrame({ kind: 'SenderError', message: 'no' }),
      encodeFrame({ kind: 'Finalized' }),
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...bodies),
        fc.nat(),
        fc.integer({ min: 0, max: 255 }),
        fc.boolean(),
        (body, at, byte, cut) => {
          const [t, general] = token(damage(body, at, byte, cut));
          if (t !== undefined) {
            expect(general.kind).toBe(FrameKind.Item);
            expect(t).toEqual(general.value);
          }
        },
      ),
    );
    // Not strict UTF-8: left to the general path, which refuses it.
    const [t, general] = token(Uint8Array.from([0x81, 0xa4, 0x49, 0x74, 0x65, 0x6d, 0xa1, 0xff]));
    expect(t).toBeUndefined();
    expect(general.kind).toBe(FrameKind.Undecodable);
  });
});
