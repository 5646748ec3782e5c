/**
 * docs/protocol.md §10.5: `StreamFrame` bodies, the terminal-sentinel check and `decodeFrame`.
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { encode as msgpackEncode } from '@msgpack/msgpack';
import {
  BatchEncoder,
  FRAME_DETACHED,
  FRAME_DROPPED,
  FRAME_FINALIZED,
  FRAME_HEARTBEAT,
  FrameKind,
  ITEM_PREFIX_LEN,
  WireError,
  decodeBatch,
  decodeFrame,
  decodeFrameInto,
  encodeFrame,
  isHeartbeatFrame,
  readTokenAt,
  isTerminalKind,
  isTerminalSentinel,
  itemBytesLength,
  itemStringLength,
  slotId,
  utf8Length,
} from '../../src/wire/index.ts';
import type { DecodedFrame, StreamFrame } from '../../src/wire/index.ts';
import { LanemuxError } from '../../src/errors.ts';
import {
  bytesEqual,
  concat,
  fromHex,
  hex,
  refItemBytes,
  refNewtypeString,
  refStrHeader,
  refVariantKey,
  wellFormed,
} from './helpers.ts';

const S = slotId(0xab_cdef, 0x42);
const te = new TextEncoder();

/** The Data body `appendItemString` writes into a batch. */
function itemStringBody(str: string): Uint8Array {
  const e = new BatchEncoder({ maxBytes: 1 << 20 });
  e.begin(1n, 0);
  e.appendItemString(S, 0, str);
  const d = decodeBatch(e.finish());
  expect(d.error).toBeNull();
  return d.records[0]!.body.slice();
}

/** The Data body `appendItemBytes` writes into a batch. */
function itemBytesBody(bytes: Uint8Array): Uint8Array {
  const e = new BatchEncoder({ maxBytes: 1 << 20 });
  e.begin(1n, 0);
  e.appendItemBytes(S, 0, bytes);
  const d = decodeBatch(e.finish());
  expect(d.error).toBeNull();
  return d.records[0]!.body.slice();
}

function deserializationError(body: Uint8Array): WireError {
  let caught: unknown;
  try {
    decodeFrame(body);
  } catch (err) {
    caught = err;
  }
  expect(caught, `decodeFrame(${hex(body)}) should throw`).toBeInstanceOf(WireError);
  expect(caught).toBeInstanceOf(LanemuxError);
  expect((caught as WireError).code).toBe('ERR_DESERIALIZATION');
  return caught as WireError;
}

describe('StreamFrame golden bytes (docs/protocol.md §10.5)', () => {
  const units: Array<[string, Uint8Array, string]> = [
    ['Dropped', FRAME_DROPPED, 'a7 44 72 6f 70 70 65 64'],
    ['Detached', FRAME_DETACHED, 'a8 44 65 74 61 63 68 65 64'],
    ['Finalized', FRAME_FINALIZED, 'a9 46 69 6e 61 6c 69 7a 65 64'],
    ['Heartbeat', FRAME_HEARTBEAT, 'a9 48 65 61 72 74 62 65 61 74'],
  ];
  for (const [name, cached, golden] of units) {
    it(`${name} is the msgpack string of its name: ${golden}`, () => {
      expect(hex(cached)).toBe(golden);
      const kind = name as 'Dropped' | 'Detached' | 'Finalized' | 'Heartbeat';
      const enc = encodeFrame({ kind });
      expect(hex(enc)).toBe(golden);
      expect(hex(msgpackEncode(name))).toBe(golden);
      expect(decodeFrame(fromHex(golden))).toEqual({ kind });
      // encodeFrame hands out a copy: scribbling on it leaves the cached bytes intact.
      enc[0] = 0;
      expect(hex(cached)).toBe(golden);
    });
  }

  it('Item(42) = 81 a4 49 74 65 6d 2a', () => {
    expect(hex(encodeFrame({ kind: 'Item', value: 42 }))).toBe('81 a4 49 74 65 6d 2a');
    expect(decodeFrame(fromHex('81 a4 49 74 65 6d 2a'))).toEqual({ kind: 'Item', value: 42 });
  });

  it('SenderError(s) = 81 ab "SenderError" <str s>', () => {
    for (const s of ['', 'boom', 'x'.repeat(31), 'x'.repeat(32), 'ошибка ⚠', 'y'.repeat(300)]) {
      const want = concat(
        fromHex('81 ab 53 65 6e 64 65 72 45 72 72 6f 72'),
        Uint8Array.from(refStrHeader(te.encode(s).byteLength)),
        te.encode(s),
      );
      expect(hex(encodeFrame({ kind: 'SenderError', message: s }))).toBe(hex(want));
      expect(hex(msgpackEncode({ SenderError: s }))).toBe(hex(want));
      expect(decodeFrame(want)).toEqual({ kind: 'SenderError', message: s });
    }
  });

  it('TransportError(s) = 81 ae "TransportError" <str s>', () => {
    for (const s of ['', 'boom', 'x'.repeat(31), 'x'.repeat(32), 'y'.repeat(256), 'z'.repeat(70_000)]) {
      const want = concat(
        fromHex('81 ae 54 72 61 6e 73 70 6f 72 74 45 72 72 6f 72'),
        Uint8Array.from(refStrHeader(s.length)),
        te.encode(s),
      );
      expect(bytesEqual(encodeFrame({ kind: 'TransportError', message: s }), want)).toBe(true);
      expect(bytesEqual(msgpackEncode({ TransportError: s }), want)).toBe(true);
      expect(decodeFrame(want)).toEqual({ kind: 'TransportError', message: s });
    }
  });

  it('Item(nil) = 81 a4 49 74 65 6d c0 and decodes to Item(null)', () => {
    expect(hex(encodeFrame({ kind: 'Item', value: null }))).toBe('81 a4 49 74 65 6d c0');
    expect(hex(encodeFrame({ kind: 'Item', value: undefined }))).toBe('81 a4 49 74 65 6d c0');
    expect(decodeFrame(fromHex('81 a4 49 74 65 6d c0'))).toEqual({ kind: 'Item', value: null });
  });
});

describe('isTerminalSentinel (docs/protocol.md §10.5)', () => {
  it('is true for the three cached unit sentinels Dropped, Detached, Finalized (also as copies)', () => {
    for (const s of [FRAME_DROPPED, FRAME_DETACHED, FRAME_FINALIZED]) {
      expect(isTerminalSentinel(s)).toBe(true);
      expect(isTerminalSentinel(s.slice())).toBe(true);
      // As a view in the middle of a batch.
      const host = concat(Uint8Array.of(1, 2, 3), s, Uint8Array.of(4));
      expect(isTerminalSentinel(host.subarray(3, 3 + s.byteLength))).toBe(true);
    }
    expect(isTerminalSentinel(fromHex('a7 44 72 6f 70 70 65 64'))).toBe(true);
    expect(isTerminalSentinel(fromHex('a8 44 65 74 61 63 68 65 64'))).toBe(true);
    expect(isTerminalSentinel(fromHex('a9 46 69 6e 61 6c 69 7a 65 64'))).toBe(true);
  });

  it('is true for TransportError(s) of any message length (fixstr, str8, str16, str32)', () => {
    for (const s of [
      '',
      'x',
      'connection reset',
      'x'.repeat(31),
      'x'.repeat(32),
      'x'.repeat(255),
      'x'.repeat(256),
      'x'.repeat(65_536),
      'сбой 💥',
    ]) {
      expect(isTerminalSentinel(encodeFrame({ kind: 'TransportError', message: s })), `len ${s.length}`).toBe(true);
      expect(isTerminalSentinel(msgpackEncode({ TransportError: s }))).toBe(true);
    }
    // A non-compact string header (str8 for a 4-byte string) still decodes to TransportError.
    expect(isTerminalSentinel(concat(refVariantKey('TransportError'), fromHex('d9 04'), te.encode('boom')))).toBe(true);
  });

  it('is false for SenderError, Heartbeat, Item(nil), Item("Finalized") and near-misses', () => {
    const no: Array<[string, Uint8Array]> = [
      ['SenderError(boom)', encodeFrame({ kind: 'SenderError', message: 'boom' })],
      ['SenderError("")', encodeFrame({ kind: 'SenderError', message: '' })],
      ['Heartbeat', FRAME_HEARTBEAT],
      ['Item(nil)', fromHex('81 a4 49 74 65 6d c0')],
      ['Item("Finalized")', encodeFrame({ kind: 'Item', value: 'Finalized' })],
      ['Item("Dropped")', msgpackEncode({ Item: 'Dropped' })],
      ['Item(42)', fromHex('81 a4 49 74 65 6d 2a')],
      ['empty', new Uint8Array(0)],
      ['Dropped + 1 byte', concat(FRAME_DROPPED, Uint8Array.of(0))],
      ['Finalized minus last byte', FRAME_FINALIZED.subarray(0, 9)],
      ['finalized (lower case)', msgpackEncode('finalized')],
      ['{Finalized: nil} (map form is not the cached bytes)', msgpackEncode({ Finalized: null })],
      ['TransportError prefix only', refVariantKey('TransportError')],
      ['TransportError(nil)', concat(refVariantKey('TransportError'), fromHex('c0'))],
      ['TransportError(42)', concat(refVariantKey('TransportError'), fromHex('2a'))],
      ['TransportError truncated string', concat(refVariantKey('TransportError'), fromHex('a4 62 6f 6f'))],
      ['TransportError + trailing byte', concat(msgpackEncode({ TransportError: 'x' }), Uint8Array.of(0))],
      ['bare string TransportError', msgpackEncode('TransportError')],
    ];
    for (const [name, body] of no) expect(isTerminalSentinel(body), name).toBe(false);
  });

  it('is false for random bytes (that are not a sentinel or a TransportError frame)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 40 }), (body) => {
        const expected =
          bytesEqual(body, FRAME_DROPPED) ||
          bytesEqual(body, FRAME_DETACHED) ||
          bytesEqual(body, FRAME_FINALIZED) ||
          (() => {
            try {
              return decodeFrame(body).kind === 'TransportError';
            } catch {
              return false;
            }
          })();
        expect(isTerminalSentinel(body)).toBe(expected);
      }),
      { numRuns: 3_000 },
    );
  });

  it('agrees with decodeFrame on TransportError in valid non-compact msgpack forms (map16 header, str8 key)', () => {
    // docs/protocol.md §10.5: true "if they decode (as a frame with a unit payload) to TransportError(_)".
    // decodeFrame accepts these bodies as TransportError, so the sentinel check must too.
    const compact = msgpackEncode({ TransportError: 'boom' });
    const map16 = concat(fromHex('de 00 01'), compact.subarray(1));
    const str8Key = concat(fromHex('81 d9 0e'), te.encode('TransportError'), fromHex('a4'), te.encode('boom'));
    for (const body of [map16, str8Key]) {
      expect(decodeFrame(body)).toEqual({ kind: 'TransportError', message: 'boom' });
      expect(isTerminalSentinel(body), hex(body)).toBe(true);
      const out: DecodedFrame = { kind: -1, value: undefined, terminal: false };
      expect(decodeFrameInto(body, out)).toBe(FrameKind.TransportError);
      expect(out.terminal, `decodeFrameInto(${hex(body)}).terminal`).toBe(true);
    }
  });

  it('is false for a TransportError whose message is not valid UTF-8 (it does not decode as a frame)', () => {
    // docs/protocol.md §10.5: terminal "if they decode (as a frame with a unit payload) to TransportError(_)".
    expect(isTerminalSentinel(concat(refVariantKey('TransportError'), fromHex('a2 c3 28')))).toBe(false);
  });

  it('isHeartbeatFrame is true only for the Heartbeat bytes', () => {
    expect(isHeartbeatFrame(FRAME_HEARTBEAT)).toBe(true);
    expect(isHeartbeatFrame(FRAME_FINALIZED)).toBe(false);
    expect(isHeartbeatFrame(new Uint8Array(0))).toBe(false);
  });
});

describe('decodeFrame fast path: Item(string)', () => {
  it('a string item that starts with U+FEFF arrives with it, short or long, on the frame and ingress paths', () => {
    for (const s of ['\ufeff', '\ufeffab', `\ufeff${'x'.repeat(40)}`, `\ufeff${'x'.repeat(300)}`]) {
      const body = encodeFrame({ kind: 'Item', value: s });
      expect(decodeFrame(body)).toEqual({ kind: 'Item', value: s });
      expect(readTokenAt(body, 0, body.byteLength, null)).toBe(s);
    }
  });

  it('decodes ASCII, non-ASCII, and 4-byte emoji strings', () => {
    for (const s of [
      '',
      'a',
      'hello',
      ' world',
      'ünïcødé',
      '日本語のトークン',
      '🎉',
      'a🎉b',
      '👩‍👩‍👧‍👦',
      '\u0000',
      '\u007f\u0080\u07ff\u0800\uffff',
      '𝄞'.repeat(40),
    ]) {
      const body = encodeFrame({ kind: 'Item', value: s });
      expect(hex(body)).toBe(hex(refNewtypeString('Item', s)));
      expect(decodeFrame(body)).toEqual({ kind: 'Item', value: s });
      expect(decodeFrame(itemStringBody(s))).toEqual({ kind: 'Item', value: s });
    }
  });

  /** A string of exactly `bytes` UTF-8 bytes built from `unit` (1..4 bytes) plus ASCII padding. */
  function ofUtf8Length(bytes: number, unit: string): string {
    const u = te.encode(unit).byteLength;
    const k = Math.floor(bytes / u);
    return unit.repeat(k) + 'x'.repeat(bytes - k * u);
  }

  for (const n of [0, 1, 31, 32, 255, 256, 65_535, 65_536]) {
    for (const unit of ['a', 'é', '€', '😀']) {
      it(`Item(str of ${n} UTF-8 bytes made of ${JSON.stringify(unit)}) uses the most compact header, like @msgpack/msgpack`, () => {
        const s = ofUtf8Length(n, unit);
        expect(te.encode(s).byteLength).toBe(n);
        expect(utf8Length(s)).toBe(n);
        const want = msgpackEncode({ Item: s });
        expect(hex(want.subarray(0, ITEM_PREFIX_LEN + refStrHeader(n).length))).toBe(
          hex(concat(refVariantKey('Item'), Uint8Array.from(refStrHeader(n)))),
        );
        expect(bytesEqual(encodeFrame({ kind: 'Item', value: s }), want)).toBe(true);
        const inBatch = itemStringBody(s);
        expect(bytesEqual(inBatch, want)).toBe(true);
        expect(itemStringLength(s)).toBe(want.byteLength);
        expect(decodeFrame(want)).toEqual({ kind: 'Item', value: s });
      });
    }
  }

  it('lone surrogates are written as U+FFFD (as TextEncoder does) and read back as U+FFFD', () => {
    for (const s of ['\ud800', 'a\udc00b', '\ud83d', 'x'.repeat(70) + '\ud83d', '\udfff\ud800', '\ud83d\ud83d\ude00']) {
      const want = refNewtypeString('Item', s);
      expect(hex(encodeFrame({ kind: 'Item', value: s }))).toBe(hex(want));
      expect(hex(itemStringBody(s))).toBe(hex(want));
      expect(utf8Length(s)).toBe(te.encode(s).byteLength);
      expect(decodeFrame(want)).toEqual({ kind: 'Item', value: wellFormed(s) });
    }
  });

  it('any string round-trips through appendItemString → decodeFrame (property)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary', maxLength: 200 }),
          fc.string({ unit: 'grapheme', maxLength: 100 }),
          fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 120 }).map((c) => String.fromCharCode(...c)),
        ),
        (s) => {
          const body = itemStringBody(s);
          expect(hex(body)).toBe(hex(refNewtypeString('Item', s)));
          expect(decodeFrame(body)).toEqual({ kind: 'Item', value: wellFormed(s) });
        },
      ),
      { numRuns: 1_500 },
    );
  });

  it('a non-compact string header (str8 for a short string) is still accepted', () => {
    expect(decodeFrame(concat(refVariantKey('Item'), fromHex('d9 02'), te.encode('hi')))).toEqual({
      kind: 'Item',
      value: 'hi',
    });
    expect(decodeFrame(concat(refVariantKey('Item'), fromHex('da 00 02'), te.encode('hi')))).toEqual({
      kind: 'Item',
      value: 'hi',
    });
    expect(decodeFrame(concat(refVariantKey('Item'), fromHex('db 00 00 00 02'), te.encode('hi')))).toEqual({
      kind: 'Item',
      value: 'hi',
    });
  });

  it('invalid UTF-8 inside Item(string) is ERR_DESERIALIZATION', () => {
    deserializationError(concat(refVariantKey('Item'), fromHex('a2 c3 28')));
    deserializationError(concat(refVariantKey('Item'), fromHex('a1 ff')));
  });

  it('invalid UTF-8 in a string payload is ERR_DESERIALIZATION on every path, not only the Item fast path', () => {
    // The reference deserializes these as Rust `String`s, which reject invalid UTF-8. lanemux's
    // Item fast path agrees (above); the msgpack slow path must not hand back a mangled string.
    const bad = fromHex('a2 c3 28');
    deserializationError(concat(refVariantKey('SenderError'), bad));
    deserializationError(concat(refVariantKey('TransportError'), bad));
    deserializationError(concat(fromHex('de 00 01'), refVariantKey('Item').subarray(1), bad)); // map16 Item
  });
});

describe('decodeFrame fast path: Item(bytes)', () => {
  for (const n of [0, 1, 50, 255, 256, 65_535, 65_536]) {
    it(`Item(bytes of ${n}) matches @msgpack/msgpack and decodes to a view into the body`, () => {
      const bytes = new Uint8Array(n);
      for (let i = 0; i < n; i++) bytes[i] = (i * 7 + 3) & 0xff;
      const want = msgpackEncode({ Item: bytes });
      expect(bytesEqual(refItemBytes(bytes), want)).toBe(true);
      expect(bytesEqual(encodeFrame({ kind: 'Item', value: bytes }), want)).toBe(true);
      expect(itemBytesLength(n)).toBe(want.byteLength);
      const body = itemBytesBody(bytes);
      expect(bytesEqual(body, want)).toBe(true);
      // Decode from a view inside a larger buffer: the value shares that buffer.
      const host = concat(Uint8Array.of(0xee, 0xee, 0xee), body, Uint8Array.of(0xee));
      const view = host.subarray(3, 3 + body.byteLength);
      const f = decodeFrame<Uint8Array>(view);
      expect(f.kind).toBe('Item');
      const value = (f as { value: Uint8Array }).value;
      expect(value).toBeInstanceOf(Uint8Array);
      expect(bytesEqual(value, bytes)).toBe(true);
      expect(value.buffer).toBe(host.buffer);
      expect(value.byteOffset).toBe(3 + want.byteLength - n);
      if (n > 0) {
        const at = 3 + want.byteLength - n;
        host[at] = host[at]! ^ 0xff;
        expect(value[0]).toBe(bytes[0]! ^ 0xff);
      }
    });
  }
});

describe('decodeFrame: other values, unit forms, errors', () => {
  it('decodes other Item values via msgpack', () => {
    const values: unknown[] = [42, -1, 0, 3.5, true, false, [1, 2, 3], { a: 1, b: 'x' }, [[1, 'two'], null], 2 ** 40];
    for (const v of values) {
      const body = encodeFrame({ kind: 'Item', value: v });
      expect(hex(body)).toBe(hex(msgpackEncode({ Item: v })));
      expect(decodeFrame(body)).toEqual({ kind: 'Item', value: v });
    }
  });

  it('accepts unit variants as a string or as a one-entry map', () => {
    for (const kind of ['Dropped', 'Detached', 'Finalized', 'Heartbeat'] as const) {
      expect(decodeFrame(msgpackEncode(kind))).toEqual({ kind });
      expect(decodeFrame(msgpackEncode({ [kind]: null }))).toEqual({ kind });
      // str8 form of the name, not the cached bytes.
      expect(decodeFrame(concat(fromHex('d9'), Uint8Array.of(kind.length), te.encode(kind)))).toEqual({ kind });
    }
  });

  it('decodes SenderError and TransportError in map form', () => {
    expect(decodeFrame(msgpackEncode({ SenderError: 'soft' }))).toEqual({ kind: 'SenderError', message: 'soft' });
    expect(decodeFrame(msgpackEncode({ TransportError: 'hard' }))).toEqual({ kind: 'TransportError', message: 'hard' });
  });

  it('round-trips every frame kind through encodeFrame → decodeFrame', () => {
    const frames: StreamFrame[] = [
      { kind: 'Item', value: 'tok' },
      { kind: 'Item', value: 7 },
      { kind: 'SenderError', message: 'e' },
      { kind: 'Dropped' },
      { kind: 'Detached' },
      { kind: 'Finalized' },
      { kind: 'Heartbeat' },
      { kind: 'TransportError', message: 't' },
    ];
    for (const f of frames) expect(decodeFrame(encodeFrame(f))).toEqual(f);
  });

  it('body c1 is a WireError with code ERR_DESERIALIZATION', () => {
    const err = deserializationError(fromHex('c1'));
    expect(err.name).toBe('WireError');
  });

  it('malformed bodies are ERR_DESERIALIZATION, never another exception', () => {
    const bad = [
      new Uint8Array(0),
      fromHex('c1'),
      msgpackEncode('Bogus'),
      msgpackEncode({ Bogus: 1 }),
      msgpackEncode({ SenderError: 1 }),
      msgpackEncode({ TransportError: null }),
      msgpackEncode({ Finalized: 1 }),
      msgpackEncode({}),
      msgpackEncode([1, 2]),
      msgpackEncode(42),
      msgpackEncode(null),
      concat(fromHex('81 a4 49 74 65 6d a3 61 62')), // truncated Item string
      concat(msgpackEncode({ Item: 'x' }), Uint8Array.of(0)), // trailing byte
      concat(FRAME_FINALIZED, Uint8Array.of(0xc0)),
    ];
    for (const b of bad) deserializationError(b);
  });

  it('a two-entry map is not a StreamFrame, even when its keys collide (only 1-entry maps are accepted)', () => {
    // `82 a4 "Item" 01 a4 "Item" 02`: a JS object decoder collapses this to { Item: 2 }.
    const dup = fromHex('82 a4 49 74 65 6d 01 a4 49 74 65 6d 02');
    deserializationError(dup);
  });

  it('decodeFrame never throws anything but a WireError on random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (body) => {
        try {
          decodeFrame(body);
        } catch (err) {
          expect(err).toBeInstanceOf(WireError);
          expect((err as WireError).code).toBe('ERR_DESERIALIZATION');
        }
      }),
      { numRuns: 3_000 },
    );
  });
});

describe('decodeFrameInto (allocation-free hot-path decoder)', () => {
  const NAME_OF: Record<number, StreamFrame['kind']> = {
    [FrameKind.Item]: 'Item',
    [FrameKind.SenderError]: 'SenderError',
    [FrameKind.Heartbeat]: 'Heartbeat',
    [FrameKind.Finalized]: 'Finalized',
    [FrameKind.Detached]: 'Detached',
    [FrameKind.Dropped]: 'Dropped',
    [FrameKind.TransportError]: 'TransportError',
  };
  const fresh = (): DecodedFrame => ({ kind: -1, value: 'stale', terminal: true });

  /** decodeFrameInto must tell the same story as decodeFrame + isTerminalSentinel. */
  function expectAgrees(body: Uint8Array, out: DecodedFrame = fresh()): void {
    let frame: StreamFrame | undefined;
    try {
      frame = decodeFrame(body);
    } catch {
      frame = undefined;
    }
    const ret = decodeFrameInto(body, out);
    expect(ret, hex(body)).toBe(out.kind);
    if (frame === undefined) {
      expect(out.kind, hex(body)).toBe(FrameKind.Undecodable);
      expect(typeof out.value).toBe('string');
      expect(out.terminal).toBe(false);
      return;
    }
    expect(NAME_OF[out.kind], hex(body)).toBe(frame.kind);
    expect(out.terminal, hex(body)).toBe(isTerminalSentinel(body));
    if (frame.kind === 'Item') {
      if (frame.value instanceof Uint8Array) {
        const v = out.value as Uint8Array;
        expect(hex(v)).toBe(hex(frame.value));
        // Copied out, so the batch is not kept alive (documented).
        expect(v.buffer).not.toBe(body.buffer);
      } else {
        expect(out.value).toEqual(frame.value);
      }
    } else if (frame.kind === 'SenderError' || frame.kind === 'TransportError') {
      expect(out.value).toBe(frame.message);
    } else {
      expect(out.value).toBeUndefined();
    }
  }

  it('FrameKind numbers are distinct and isTerminalKind marks exactly Finalized, Detached, Dropped, TransportError', () => {
    const kinds = Object.values(FrameKind);
    expect(new Set(kinds).size).toBe(kinds.length);
    expect(kinds.filter((k) => isTerminalKind(k)).sort()).toEqual(
      [FrameKind.Finalized, FrameKind.Detached, FrameKind.Dropped, FrameKind.TransportError].sort(),
    );
    for (const k of [FrameKind.Item, FrameKind.SenderError, FrameKind.Heartbeat, FrameKind.Undecodable])
      expect(isTerminalKind(k)).toBe(false);
  });

  it('decodes every frame shape like decodeFrame, with terminal = isTerminalSentinel(body)', () => {
    const bodies: Uint8Array[] = [
      FRAME_DROPPED,
      FRAME_DETACHED,
      FRAME_FINALIZED,
      FRAME_HEARTBEAT,
      encodeFrame({ kind: 'Item', value: 'tok ✓ 🎉' }),
      encodeFrame({ kind: 'Item', value: '' }),
      encodeFrame({ kind: 'Item', value: 'x'.repeat(300) }),
      encodeFrame({ kind: 'Item', value: Uint8Array.of(1, 2, 3) }),
      encodeFrame({ kind: 'Item', value: 42 }),
      encodeFrame({ kind: 'Item', value: null }),
      encodeFrame({ kind: 'Item', value: [1, 'a'] }),
      encodeFrame({ kind: 'SenderError', message: 'soft' }),
      encodeFrame({ kind: 'TransportError', message: 'hard' }),
      encodeFrame({ kind: 'TransportError', message: '' }),
      msgpackEncode({ Finalized: null }),
      msgpackEncode('Dropped'),
      fromHex('c1'),
      new Uint8Array(0),
      concat(refVariantKey('Item'), fromHex('a1 ff')),
      concat(FRAME_DROPPED, Uint8Array.of(0)),
      fromHex('a9 46 69 6e 61 6c 69 7a 65 65'), // 10 bytes, one off Finalized
    ];
    for (const b of bodies) expectAgrees(b);
  });

  it('the fast paths: Item(string), Item(bytes) copied, unit sentinels terminal, Heartbeat not, c1 Undecodable', () => {
    const out = fresh();
    expect(decodeFrameInto(encodeFrame({ kind: 'Item', value: 'hi' }), out)).toBe(FrameKind.Item);
    expect(out).toEqual({ kind: FrameKind.Item, value: 'hi', terminal: false });
    expect(decodeFrameInto(FRAME_FINALIZED, out)).toBe(FrameKind.Finalized);
    expect(out).toEqual({ kind: FrameKind.Finalized, value: undefined, terminal: true });
    // Reusing `out`: nothing leaks from the previous frame.
    expect(decodeFrameInto(FRAME_HEARTBEAT, out)).toBe(FrameKind.Heartbeat);
    expect(out).toEqual({ kind: FrameKind.Heartbeat, value: undefined, terminal: false });
    expect(decodeFrameInto(encodeFrame({ kind: 'TransportError', message: 'x' }), out)).toBe(FrameKind.TransportError);
    expect(out).toEqual({ kind: FrameKind.TransportError, value: 'x', terminal: true });
    expect(decodeFrameInto(encodeFrame({ kind: 'SenderError', message: 'y' }), out)).toBe(FrameKind.SenderError);
    expect(out).toEqual({ kind: FrameKind.SenderError, value: 'y', terminal: false });
    expect(decodeFrameInto(fromHex('c1'), out)).toBe(FrameKind.Undecodable);
    expect(out.terminal).toBe(false);
    const body = encodeFrame({ kind: 'Item', value: Uint8Array.of(7, 8, 9) });
    decodeFrameInto(body, out);
    expect(out.kind).toBe(FrameKind.Item);
    body[body.length - 1] = 0;
    expect(hex(out.value as Uint8Array)).toBe('07 08 09');
  });

  it('never throws and agrees with decodeFrame on random and mutated bodies (property)', () => {
    const seeds = [
      FRAME_FINALIZED,
      encodeFrame({ kind: 'TransportError', message: 'boom' }),
      encodeFrame({ kind: 'Item', value: 'hello' }),
      encodeFrame({ kind: 'Item', value: Uint8Array.of(1, 2) }),
    ];
    const out = fresh();
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 48 }),
          fc.tuple(fc.constantFrom(...seeds), fc.nat(), fc.integer({ min: 0, max: 255 })).map(([s, at, v]) => {
            const c = s.slice();
            c[at % c.length] = v;
            return c;
          }),
        ),
        (body) => {
          expect(() => decodeFrameInto(body, out)).not.toThrow();
          expectAgrees(body, out);
        },
      ),
      { numRuns: 3_000 },
    );
  });
});

describe('decodeFrameAt (ingress path)', () => {
  it('copies Item(bytes) out of a Node Buffer payload, so a kept token does not retain the whole read', async () => {
    const { Buffer } = await import('node:buffer');
    const { decodeFrameAt, encodeFrame } = await import('../../src/wire/frame.ts');
    const body = encodeFrame({ kind: 'Item', value: Uint8Array.of(1, 2, 3) });
    const read = Buffer.alloc(4096);
    read.set(body, 100);
    const out = { kind: -1, value: undefined as unknown, terminal: false };
    decodeFrameAt(read, 100, 100 + body.byteLength, out);
    const v = out.value as Uint8Array;
    expect(Array.from(v)).toEqual([1, 2, 3]);
    expect(v.buffer).not.toBe(read.buffer);
    expect(v.buffer.byteLength).toBe(3);
  });

  it('reads a string item from the middle of a payload without reading past the body', async () => {
    const { decodeFrameAt, encodeFrame } = await import('../../src/wire/frame.ts');
    const body = encodeFrame({ kind: 'Item', value: 'héllo' });
    const payload = new Uint8Array(body.byteLength + 20).fill(0xa1);
    payload.set(body, 10);
    const out = { kind: -1, value: undefined as unknown, terminal: false };
    decodeFrameAt(payload, 10, 10 + body.byteLength, out);
    expect(out.value).toBe('héllo');
    // The same bytes with the body cut short are not an Item.
    decodeFrameAt(payload, 10, 10 + body.byteLength - 1, out);
    expect(out.kind).not.toBe(0);
  });
});
