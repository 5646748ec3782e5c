/**
 * BatchEncoder: byte cap, `fits()` agreement, `appendItemString` near the cap, argument checks,
 * buffer growth and reuse, and the header helpers.
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  BATCH_HEADER_LEN,
  BatchEncoder,
  CLOSE_RECORD_LEN,
  DEFAULT_MAX_BATCH_BYTES,
  MIN_BATCH_CAP,
  MUX_VERSION,
  RECORD_HEADER_LEN,
  WireError,
  batchHandlerName,
  decodeBatch,
  decodeFrame,
  encodeBatchHeader,
  flagsLane,
  itemBytesLength,
  itemStringLength,
  slotId,
  writeBatchHeader,
} from '../../src/wire/index.ts';
import { hex, refHeader, refItemBytes, refNewtypeString } from './helpers.ts';

const S = slotId(0xab_cdef, 0x42);

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(WireError);
    return (err as WireError).code;
  }
  return undefined;
}

/** Encoder state that a refused append must not change. */
function snapshot(e: BatchEncoder): [number, number, number] {
  return [e.byteLength, e.recordCount, e.remainingBytes];
}

describe('BatchEncoder construction and arguments', () => {
  it('defaults: maxBytes 61,440 (60 KiB), version 2, constants match docs/protocol.md §10', () => {
    const e = new BatchEncoder();
    expect(e.maxBytes).toBe(61_440);
    expect(DEFAULT_MAX_BATCH_BYTES).toBe(61_440);
    expect(MIN_BATCH_CAP).toBe(29);
    expect(CLOSE_RECORD_LEN).toBe(14);
    expect(MUX_VERSION).toBe(2);
    expect(BATCH_HEADER_LEN).toBe(16);
    expect(RECORD_HEADER_LEN).toBe(13);
    expect(e.isOpen).toBe(false);
    e.begin(1n, 0);
    expect(e.isOpen).toBe(true);
    expect(e.finish()[0]).toBe(2);
    expect(e.isOpen).toBe(false);
  });

  it('refuses a maxBytes below the 16-byte header or not an integer', () => {
    for (const maxBytes of [0, 15, -1, 16.5, Number.NaN, 2 ** 31]) {
      expect(
        codeOf(() => new BatchEncoder({ maxBytes })),
        String(maxBytes),
      ).toBe('ERR_INVALID_ARGUMENT');
    }
    expect(new BatchEncoder({ maxBytes: 16 }).maxBytes).toBe(16);
  });

  it('begin refuses flags, batch_seq and epoch out of range', () => {
    const e = new BatchEncoder();
    expect(codeOf(() => e.begin(1n, 0, 256))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.begin(1n, 0, -1))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.begin(1n, 0, 1.5))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.begin(1n, 2 ** 32))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.begin(1n, -1))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.begin(-1n, 0))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.begin(2n ** 64n, 0))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.begin(2n ** 64n - 1n, 2 ** 32 - 1, 255))).toBeUndefined();
  });

  it('append or finish without begin is refused; so is an append after finish', () => {
    const e = new BatchEncoder();
    expect(codeOf(() => e.appendSlotHeartbeat(S, 0))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.appendItemString(S, 0, 'x'))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.finish())).toBe('ERR_INVALID_ARGUMENT');
    e.begin(1n, 0);
    e.finish();
    expect(codeOf(() => e.appendData(S, 0, new Uint8Array(1)))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.finish())).toBe('ERR_INVALID_ARGUMENT');
    e.begin(1n, 0);
    e.discard();
    expect(e.isOpen).toBe(false);
    expect(codeOf(() => e.finish())).toBe('ERR_INVALID_ARGUMENT');
  });

  it('refuses a close reason outside 0..3 and a lifecycle action outside 0..1, changing nothing', () => {
    const e = new BatchEncoder();
    e.begin(1n, 0);
    const before = snapshot(e);
    expect(codeOf(() => e.appendCloseSlot(S, 0, 4 as 0))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.appendCloseSlot(S, 0, -1 as 0))).toBe('ERR_INVALID_ARGUMENT');
    expect(codeOf(() => e.appendLifecycleSlot(S, 0, 1n, 2 as 0))).toBe('ERR_INVALID_ARGUMENT');
    expect(snapshot(e)).toEqual(before);
    expect(e.finish().byteLength).toBe(16);
  });

  it('u64 fields wrap to 64 bits and u32 fields to 32 bits, as on the wire', () => {
    const e = new BatchEncoder();
    e.begin(1n, 0);
    e.appendOpenSlot(S, 1, -1n, 2n ** 64n + 5n);
    e.appendCreditUpdate(S, 0, 2 ** 32 + 7);
    e.appendLifecycleSlot(0xffff_ffff, 0xffff_ffff, 2n ** 64n - 1n, 1);
    const d = decodeBatch(e.finish());
    expect(d.error).toBeNull();
    expect(d.records[0]).toMatchObject({ anchorId: 2n ** 64n - 1n, sessionId: 5n });
    expect(d.records[1]!.creditDelta).toBe(7);
    expect(d.records[2]).toMatchObject({
      slot: 0xffff_ffff,
      frameSeq: 0xffff_ffff,
      sessionId: 2n ** 64n - 1n,
      lifecycleAction: 1,
    });
  });

  it('setBatchSeq overwrites batch_seq of the open batch only', () => {
    const e = new BatchEncoder();
    e.begin(5n, 10, 3);
    e.appendSlotHeartbeat(S, 0);
    e.setBatchSeq(0xffff_fffe);
    const b = e.finish();
    expect(hex(b.subarray(0, 16))).toBe(hex(refHeader(2, 3, 1, 5n, 0xffff_fffe)));
  });
});

describe('BatchEncoder byte cap', () => {
  it('refuses a record past maxBytes with ERR_BATCH_FULL; an exact fit is accepted', () => {
    const cap = 16 + 13 + 10 + 13 + 4;
    const e = new BatchEncoder({ maxBytes: cap });
    e.begin(1n, 0);
    expect(e.fits(10)).toBe(true);
    e.appendData(S, 0, new Uint8Array(10));
    expect(e.remainingBytes).toBe(17);
    expect(e.fits(5)).toBe(false);
    expect(e.fits(4)).toBe(true);
    const before = snapshot(e);
    expect(codeOf(() => e.appendData(S, 1, new Uint8Array(5)))).toBe('ERR_BATCH_FULL');
    expect(codeOf(() => e.appendOpenSlot(S, 1, 1n, 1n))).toBe('ERR_BATCH_FULL');
    expect(codeOf(() => e.appendLifecycleSlot(S, 1, 1n, 1))).toBe('ERR_BATCH_FULL');
    expect(snapshot(e)).toEqual(before);
    e.appendCreditUpdate(S, 0, 9);
    expect(e.byteLength).toBe(cap);
    expect(e.remainingBytes).toBe(0);
    expect(e.fits(0)).toBe(false);
    expect(codeOf(() => e.appendSlotHeartbeat(S, 1))).toBe('ERR_BATCH_FULL');
    const d = decodeBatch(e.finish());
    expect(d.error).toBeNull();
    expect(d.records).toHaveLength(2);
  });

  it('the minimum cap (29 B) holds exactly one empty record', () => {
    const e = new BatchEncoder({ maxBytes: MIN_BATCH_CAP });
    e.begin(1n, 0);
    expect(e.fits(1)).toBe(false);
    expect(codeOf(() => e.appendCloseSlot(S, 0, 0))).toBe('ERR_BATCH_FULL');
    e.appendSlotHeartbeat(S, 0);
    expect(codeOf(() => e.appendSlotHeartbeat(S, 0))).toBe('ERR_BATCH_FULL');
    expect(e.finish().byteLength).toBe(29);
    const tiny = new BatchEncoder({ maxBytes: 16 });
    tiny.begin(1n, 0);
    expect(codeOf(() => tiny.appendSlotHeartbeat(S, 0))).toBe('ERR_BATCH_FULL');
    expect(tiny.finish().byteLength).toBe(16);
  });

  it('fits() agrees with every append kind under random caps and record mixes (property)', () => {
    type Op = { k: 'data' | 'bytes' | 'str' | 'open' | 'close' | 'credit' | 'hb' | 'life'; n: number; s: string };
    const op = fc.record({
      k: fc.constantFrom('data', 'bytes', 'str', 'open', 'close', 'credit', 'hb', 'life') as fc.Arbitrary<Op['k']>,
      n: fc.integer({ min: 0, max: 300 }),
      s: fc.string({ unit: 'binary', maxLength: 60 }),
    });
    fc.assert(
      fc.property(fc.integer({ min: 16, max: 1_200 }), fc.array(op, { maxLength: 60 }), (cap, ops) => {
        const e = new BatchEncoder({ maxBytes: cap, initialBytes: 16 });
        e.begin(1n, 0);
        let expectedLen = 16;
        for (const o of ops) {
          const bodyLen = {
            data: o.n,
            bytes: itemBytesLength(o.n),
            str: itemStringLength(o.s),
            open: 16,
            close: 1,
            credit: 4,
            hb: 0,
            life: 9,
          }[o.k];
          const fits = e.fits(bodyLen);
          expect(fits).toBe(expectedLen + 13 + bodyLen <= cap);
          const before = snapshot(e);
          const code = codeOf(() => {
            switch (o.k) {
              case 'data':
                return e.appendData(S, 0, new Uint8Array(o.n));
              case 'bytes':
                return e.appendItemBytes(S, 0, new Uint8Array(o.n));
              case 'str':
                return e.appendItemString(S, 0, o.s);
              case 'open':
                return e.appendOpenSlot(S, 1, 1n, 2n);
              case 'close':
                return e.appendCloseSlot(S, 0, 1);
              case 'credit':
                return e.appendCreditUpdate(S, 0, 1);
              case 'hb':
                return e.appendSlotHeartbeat(S, 0);
              case 'life':
                return e.appendLifecycleSlot(S, 0, 1n, 0);
            }
          });
          if (fits) {
            expect(code).toBeUndefined();
            expectedLen += 13 + bodyLen;
          } else {
            expect(code).toBe('ERR_BATCH_FULL');
            expect(snapshot(e)).toEqual(before);
          }
          expect(e.byteLength).toBe(expectedLen);
        }
        const d = decodeBatch(e.finish());
        expect(d.error).toBeNull();
      }),
      { numRuns: 400 },
    );
  });
});

describe('BatchEncoder.appendItemString near the cap', () => {
  /** An encoder whose remaining room is exactly `room` bytes after the header. */
  function withRoom(room: number): BatchEncoder {
    const e = new BatchEncoder({ maxBytes: 16 + room, initialBytes: 16 });
    e.begin(1n, 0);
    return e;
  }

  it('accepts a string whose exact size fits even though its 3×length upper bound does not', () => {
    const s = 'a'.repeat(40); // exact body 6 + 2 + 40 = 48; upper bound 6 + 5 + 120 = 131
    const e = withRoom(13 + 48);
    e.appendItemString(S, 1, s);
    expect(e.remainingBytes).toBe(0);
    const d = decodeBatch(e.finish());
    expect(d.error).toBeNull();
    expect(hex(d.records[0]!.body)).toBe(hex(refNewtypeString('Item', s)));
    expect(decodeFrame(d.records[0]!.body)).toEqual({ kind: 'Item', value: s });
  });

  it('refuses the same string with one byte less room, changing nothing', () => {
    const s = 'a'.repeat(40);
    const e = withRoom(13 + 47);
    const before = snapshot(e);
    expect(codeOf(() => e.appendItemString(S, 1, s))).toBe('ERR_BATCH_FULL');
    expect(snapshot(e)).toEqual(before);
    expect(e.fits(itemStringLength(s))).toBe(false);
    expect(e.finish().byteLength).toBe(16);
  });

  it('measures multi-byte and emoji strings exactly at the cap', () => {
    for (const s of [
      'é',
      'ü'.repeat(20),
      '🎉'.repeat(10),
      '日本'.repeat(12),
      'x'.repeat(31),
      'x'.repeat(32),
      'ä'.repeat(100),
      '\ud800'.repeat(5),
    ]) {
      const n = itemStringLength(s);
      expect(n).toBe(refNewtypeString('Item', s).byteLength);
      const fit = withRoom(13 + n);
      fit.appendItemString(S, 0, s);
      expect(fit.remainingBytes).toBe(0);
      expect(hex(decodeBatch(fit.finish()).records[0]!.body)).toBe(hex(refNewtypeString('Item', s)));
      const tight = withRoom(13 + n - 1);
      expect(
        codeOf(() => tight.appendItemString(S, 0, s)),
        JSON.stringify(s),
      ).toBe('ERR_BATCH_FULL');
      expect(tight.byteLength).toBe(16);
    }
  });

  it('a string after other records near the cap still lands byte-exact', () => {
    const e = new BatchEncoder({ maxBytes: 200, initialBytes: 32 });
    e.begin(1n, 0);
    e.appendItemBytes(S, 0, new Uint8Array(50).fill(0x5a));
    const room = e.remainingBytes - 13;
    const s = 'z'.repeat(room - 8); // 6 (Item prefix) + 2 (str8 header) + n
    expect(itemStringLength(s)).toBe(room);
    e.appendItemString(S, 1, s);
    expect(e.remainingBytes).toBe(0);
    const d = decodeBatch(e.finish());
    expect(d.error).toBeNull();
    expect(hex(d.records[0]!.body)).toBe(hex(refItemBytes(new Uint8Array(50).fill(0x5a))));
    expect(decodeFrame(d.records[1]!.body)).toEqual({ kind: 'Item', value: s });
  });
});

describe('BatchEncoder buffer growth and reuse', () => {
  it('grows from a tiny initial buffer without corrupting earlier records', () => {
    const e = new BatchEncoder({ maxBytes: 1 << 16, initialBytes: 16 });
    e.begin(3n, 4, 2);
    const bodies: Uint8Array[] = [];
    for (let i = 0; i < 200; i++) {
      const body = new Uint8Array(i % 37).fill(i & 0xff);
      bodies.push(body);
      if (i % 3 === 0) e.appendData(S, i, body);
      else if (i % 3 === 1) e.appendItemBytes(S, i, body);
      else e.appendItemString(S, i, `tok-${i}-✓`);
    }
    const d = decodeBatch(e.finish());
    expect(d.error).toBeNull();
    expect(d.records).toHaveLength(200);
    d.records.forEach((r, i) => {
      expect(r.frameSeq).toBe(i);
      const want =
        i % 3 === 0 ? bodies[i]! : i % 3 === 1 ? refItemBytes(bodies[i]!) : refNewtypeString('Item', `tok-${i}-✓`);
      expect(hex(r.body)).toBe(hex(want));
    });
  });

  it('finish() returns a view that the next begin() reuses (documented), so callers copy before reuse', () => {
    const e = new BatchEncoder();
    e.begin(1n, 1);
    e.appendData(S, 0, Uint8Array.of(1, 2, 3));
    const first = e.finish();
    const copy = first.slice();
    e.begin(2n, 2);
    e.appendData(S, 0, Uint8Array.of(9, 9, 9));
    const second = e.finish();
    expect(second.buffer).toBe(first.buffer);
    expect(hex(first)).toBe(hex(second));
    expect(hex(first)).not.toBe(hex(copy));
  });

  it('the internal buffer never grows past maxBytes when filled by plain appends (TSDoc: "grows by doubling up to maxBytes")', () => {
    const a = new BatchEncoder(); // 4 KiB start, 60 KiB cap
    a.begin(1n, 0);
    while (a.fits(1000)) a.appendData(S, 0, new Uint8Array(1000));
    expect(a.finish().buffer.byteLength).toBeLessThanOrEqual(a.maxBytes);
  });

  it('appendItemString near the cap does not grow the buffer past maxBytes to reserve the 3×length upper bound', () => {
    const b = new BatchEncoder({ maxBytes: 100 });
    b.begin(1n, 0);
    b.appendItemString(S, 0, 'a'.repeat(60)); // exact body 68 fits; upper bound 191 does not
    expect(b.byteLength).toBe(16 + 13 + 68);
    expect(b.finish().buffer.byteLength).toBeLessThanOrEqual(b.maxBytes);
  });
});

describe('batch header helpers', () => {
  it('writeBatchHeader writes at an offset and refuses out-of-range fields', () => {
    const out = new Uint8Array(20).fill(0xee);
    writeBatchHeader(out, 2, {
      version: 2,
      flags: 0x13,
      recordCount: 0xffff,
      epoch: 0xffff_ffff_ffff_ffffn,
      batchSeq: 0,
    });
    expect(hex(out)).toBe(
      hex(Uint8Array.from([0xee, 0xee, ...refHeader(2, 0x13, 0xffff, 0xffff_ffff_ffff_ffffn, 0), 0xee, 0xee])),
    );
    const bad = [
      { version: 256, flags: 0, recordCount: 0, epoch: 0n, batchSeq: 0 },
      { version: 2, flags: -1, recordCount: 0, epoch: 0n, batchSeq: 0 },
      { version: 2, flags: 0, recordCount: 65_536, epoch: 0n, batchSeq: 0 },
      { version: 2, flags: 0, recordCount: 0, epoch: -1n, batchSeq: 0 },
      { version: 2, flags: 0, recordCount: 0, epoch: 2n ** 64n, batchSeq: 0 },
      { version: 2, flags: 0, recordCount: 0, epoch: 0n, batchSeq: 2 ** 32 },
    ];
    for (const h of bad)
      expect(
        codeOf(() => writeBatchHeader(new Uint8Array(16), 0, h)),
        JSON.stringify(h, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
      ).toBe('ERR_INVALID_ARGUMENT');
    expect(hex(encodeBatchHeader({ flags: 0, recordCount: 0, epoch: 0n, batchSeq: 0 }))).toBe(
      hex(refHeader(2, 0, 0, 0n, 0)),
    );
  });

  it('flagsLane is the low nibble; handler names are _stream_batch and _stream_batch.k', () => {
    expect(flagsLane(0x00)).toBe(0);
    expect(flagsLane(0x03)).toBe(3);
    expect(flagsLane(0xf7)).toBe(7);
    expect(flagsLane(0xff)).toBe(15);
    expect(batchHandlerName(0)).toBe('_stream_batch');
    expect(batchHandlerName(1)).toBe('_stream_batch.1');
    expect(batchHandlerName(15)).toBe('_stream_batch.15');
  });
});
