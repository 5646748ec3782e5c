/**
 * Property tests: random record sequences of every type round-trip through BatchEncoder →
 * decodeBatch / BatchReader exactly; the CODEC-15 length law holds after every append; truncation
 * at every shorter length yields a clean, predictable error and a prefix of the records (CODEC-20).
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { BatchEncoder, BatchReader, decodeBatch, decodeFrame, iterateBatch } from '../../src/wire/index.ts';
import type { DecodedRecord } from '../../src/wire/index.ts';
import { concat, hex, modelBody, modelRecordBytes, modelType, oracleDecode, refHeader, wellFormed } from './helpers.ts';
import type { ModelRecord } from './helpers.ts';

const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
const u64 = fc.bigInt({ min: 0n, max: 0xffff_ffff_ffff_ffffn });
const slot = fc.oneof(u32, fc.constantFrom(0, 0xff, 0x100, 0xabcd_ef42, 0xffff_ffff));
const seq = fc.oneof(u32, fc.constantFrom(0, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff));
const anyString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 90 }).map((c) => String.fromCharCode(...c)),
);

const record: fc.Arbitrary<ModelRecord> = fc.oneof(
  fc.record({ t: fc.constant('data' as const), slot, seq, body: fc.uint8Array({ maxLength: 80 }) }),
  fc.record({ t: fc.constant('itemString' as const), slot, seq, str: anyString }),
  fc.record({ t: fc.constant('itemBytes' as const), slot, seq, bytes: fc.uint8Array({ maxLength: 300 }) }),
  fc.record({ t: fc.constant('open' as const), slot, seq, anchor: u64, session: u64 }),
  fc.record({
    t: fc.constant('close' as const),
    slot,
    seq,
    reason: fc.constantFrom(0 as const, 1 as const, 2 as const, 3 as const),
  }),
  fc.record({ t: fc.constant('credit' as const), slot, seq, delta: u32 }),
  fc.record({ t: fc.constant('heartbeat' as const), slot, seq }),
  fc.record({
    t: fc.constant('lifecycle' as const),
    slot,
    seq,
    session: u64,
    action: fc.constantFrom(0 as const, 1 as const),
  }),
);

const header = fc.record({
  epoch: fc.oneof(u64, fc.constantFrom(0n, 1n, 0xffff_ffffn, 0x1_0000_0000n, 0xffff_ffff_ffff_ffffn)),
  batchSeq: fc.oneof(u32, fc.constantFrom(0, 1, 0x8000_0000, 0xffff_ffff)),
  flags: fc.integer({ min: 0, max: 0xff }),
});

function append(e: BatchEncoder, r: ModelRecord): void {
  switch (r.t) {
    case 'data':
      return e.appendData(r.slot, r.seq, r.body);
    case 'itemString':
      return e.appendItemString(r.slot, r.seq, r.str);
    case 'itemBytes':
      return e.appendItemBytes(r.slot, r.seq, r.bytes);
    case 'open':
      return e.appendOpenSlot(r.slot, r.seq, r.anchor, r.session);
    case 'close':
      return e.appendCloseSlot(r.slot, r.seq, r.reason);
    case 'credit':
      return e.appendCreditUpdate(r.slot, r.seq, r.delta);
    case 'heartbeat':
      return e.appendSlotHeartbeat(r.slot, r.seq);
    case 'lifecycle':
      return e.appendLifecycleSlot(r.slot, r.seq, r.session, r.action);
  }
}

/** Check one decoded record against its model, field by field. */
function expectRecord(got: DecodedRecord, want: ModelRecord, offset: number): void {
  const body = modelBody(want);
  expect(got.offset).toBe(offset);
  expect(got.type).toBe(modelType(want));
  expect(got.slot).toBe(want.slot);
  expect(got.frameSeq).toBe(want.seq);
  expect(got.bodyOffset).toBe(offset + 13);
  expect(got.bodyLength).toBe(body.byteLength);
  expect(hex(got.body)).toBe(hex(body));
  switch (want.t) {
    case 'open':
      expect([got.anchorId, got.sessionId]).toEqual([want.anchor, want.session]);
      break;
    case 'close':
      expect(got.closeReason).toBe(want.reason);
      break;
    case 'credit':
      expect(got.creditDelta).toBe(want.delta);
      break;
    case 'lifecycle':
      expect([got.sessionId, got.lifecycleAction]).toEqual([want.session, want.action]);
      break;
    case 'itemString':
      expect(decodeFrame(got.body)).toEqual({ kind: 'Item', value: wellFormed(want.str) });
      break;
    case 'itemBytes': {
      const f = decodeFrame<Uint8Array>(got.body) as { kind: 'Item'; value: Uint8Array };
      expect(hex(f.value)).toBe(hex(want.bytes));
      break;
    }
    default:
      break;
  }
}

function encodeModel(
  h: { epoch: bigint; batchSeq: number; flags: number },
  records: readonly ModelRecord[],
  e = new BatchEncoder({ maxBytes: 1 << 20, initialBytes: 64 }),
): { bytes: Uint8Array; offsets: number[] } {
  e.begin(h.epoch, h.batchSeq, h.flags);
  let expected = 16;
  const offsets: number[] = [];
  for (const r of records) {
    offsets.push(expected);
    append(e, r);
    // CODEC-15: 16 + Σ(13 + body length) after every append.
    expected += 13 + modelBody(r).byteLength;
    expect(e.byteLength).toBe(expected);
    expect(e.recordCount).toBe(offsets.length);
  }
  const bytes = e.finish();
  expect(bytes.byteLength).toBe(expected);
  return { bytes, offsets };
}

describe('round-trip properties', () => {
  it('random record sequences of every type round-trip exactly (header edges, flags verbatim), byte-identical to the spec oracle', () => {
    const enc = new BatchEncoder({ maxBytes: 1 << 20, initialBytes: 16 }); // reused: CODEC-14 under load
    const reader = new BatchReader();
    fc.assert(
      fc.property(header, fc.array(record, { maxLength: 40 }), (h, records) => {
        const { bytes, offsets } = encodeModel(h, records, enc);
        // Byte-exact against the hand-written encoder.
        const want = concat(
          refHeader(2, h.flags, records.length, h.epoch, h.batchSeq),
          ...records.map(modelRecordBytes),
        );
        expect(hex(bytes)).toBe(hex(want));
        const d = decodeBatch(bytes);
        expect(d.error).toBeNull();
        expect(d.header).toEqual({
          version: 2,
          flags: h.flags,
          recordCount: records.length,
          epoch: h.epoch,
          batchSeq: h.batchSeq,
        });
        expect(d.records).toHaveLength(records.length);
        d.records.forEach((got, i) => expectRecord(got, records[i]!, offsets[i]!));
        // The cursor agrees, field by field.
        expect(reader.reset(bytes)).toBe(true);
        expect([reader.flags, reader.lane, reader.epoch, reader.batchSeq, reader.recordCount]).toEqual([
          h.flags,
          h.flags & 15,
          h.epoch,
          h.batchSeq,
          records.length,
        ]);
        let i = 0;
        while (reader.next()) {
          const r = records[i]!;
          expect([reader.type, reader.slot, reader.frameSeq, reader.recordOffset, reader.index]).toEqual([
            modelType(r),
            r.slot,
            r.seq,
            offsets[i],
            i + 1,
          ]);
          if (r.t === 'open') expect([reader.anchorId(), reader.sessionId()]).toEqual([r.anchor, r.session]);
          if (r.t === 'lifecycle') expect([reader.sessionId(), reader.lifecycleAction]).toEqual([r.session, r.action]);
          if (r.t === 'credit') expect(reader.creditDelta).toBe(r.delta);
          if (r.t === 'close') expect(reader.closeReason).toBe(r.reason);
          i++;
        }
        expect(i).toBe(records.length);
        expect(reader.error).toBeNull();
        // iterateBatch: all ok, no error item.
        expect([...iterateBatch(bytes)].every((x) => x.ok)).toBe(true);
      }),
      { numRuns: 400 },
    );
  });

  it('CODEC-20 truncation at every shorter length: a clean, predictable error and only a prefix of the correct records', () => {
    fc.assert(
      fc.property(header, fc.array(record, { minLength: 1, maxLength: 12 }), (h, records) => {
        const { bytes, offsets } = encodeModel(h, records);
        const full = bytes.slice();
        const ends = records.map((r, i) => offsets[i]! + 13 + modelBody(r).byteLength);
        for (let n = 0; n < full.byteLength; n++) {
          const p = full.subarray(0, n);
          const d = decodeBatch(p);
          const complete = n < 16 ? 0 : ends.filter((e) => e <= n).length;
          expect(d.records).toHaveLength(complete);
          d.records.forEach((got, i) => expectRecord(got, records[i]!, offsets[i]!));
          const start = offsets[complete] ?? -1;
          const kind =
            n < 16
              ? 'TruncatedBatchHeader'
              : n === start
                ? 'RecordCountMismatch'
                : n - start < 13
                  ? 'TruncatedRecordHeader'
                  : 'TruncatedRecordBody';
          expect(d.error?.kind).toBe(kind);
          expect(d.error?.offset).toBe(n < 16 ? 0 : start);
          expect(oracleDecode(p).error).toEqual({ kind, offset: n < 16 ? 0 : start });
        }
      }),
      { numRuns: 60 },
    );
  });

  it('CODEC-22 extension: any bytes appended after a valid batch are TrailingBytes after all the records', () => {
    fc.assert(
      fc.property(
        header,
        fc.array(record, { maxLength: 8 }),
        fc.uint8Array({ minLength: 1, maxLength: 40 }),
        (h, records, extra) => {
          const { bytes, offsets } = encodeModel(h, records);
          const d = decodeBatch(concat(bytes, extra));
          expect(d.records).toHaveLength(records.length);
          d.records.forEach((got, i) => expectRecord(got, records[i]!, offsets[i]!));
          expect(d.error).toMatchObject({ kind: 'TrailingBytes', offset: bytes.byteLength });
        },
      ),
      { numRuns: 200 },
    );
  });
});
