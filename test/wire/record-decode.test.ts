// decodeRecordAt: an Item whose value is neither a string nor bytes goes straight to the bounded
// decoder; it must answer exactly what decodeFrameAt answers, for every body, well-formed or not.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { type DecodedFrame, decodeFrameAt, decodeRecordAt, encodeFrame, FrameKind } from '../../src/wire/frame.ts';

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
          const damaged = body.slice();
          if (cut) {
            const [a, b] = both(damaged.subarray(0, at % body.byteLength));
            expect(b).toEqual(a);
          } else {
            damaged[at % body.byteLength] = byte;
            const [a, b] = both(damaged);
            expect(b).toEqual(a);
          }
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
