/**
 * The wire codec: one test per statement, named with its id (CODEC-01..42).
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  BATCH_HEADER_LEN,
  BatchEncoder,
  BatchReader,
  CloseReason,
  DecodeError,
  LifecycleAction,
  MAX_RECORDS_PER_BATCH,
  MAX_SLOT_INDEX,
  RECORD_HEADER_LEN,
  RecordType,
  WireError,
  bumpGeneration,
  decodeBatch,
  decodeBatchHeader,
  encodeBatchHeader,
  formatSlotId,
  isControlRecord,
  iterateBatch,
  seqGap,
  seqNewer,
  seqOlder,
  slotGeneration,
  slotId,
  slotIndex,
  withGeneration,
} from '../../src/wire/index.ts';
import { LanemuxError } from '../../src/errors.ts';
import { AllocationGuard, concat, fromHex, hex, norm, oracleDecode, refHeader, refRecord } from './helpers.ts';

const S = slotId(0xabcdef, 0x42);
const EPOCH = 0x0102_0304_0506_0708n;
const SEQ = 0xdead_beef;
const ALL_TYPES = [0, 1, 2, 3, 4, 5] as const;

/** A batch of one record of each type, in wire order, with its record offsets. */
function sampleBatch(enc = new BatchEncoder()): { bytes: Uint8Array; offsets: number[] } {
  enc.begin(7n, 3);
  const offsets: number[] = [];
  const mark = () => offsets.push(enc.byteLength);
  mark();
  enc.appendOpenSlot(S, 1, 0x1122_3344_5566_7788n, 0x99aa_bbcc_ddee_ff00n);
  mark();
  enc.appendData(S, 7, Uint8Array.of(0xaa, 0xbb, 0xcc));
  mark();
  enc.appendSlotHeartbeat(S, 9);
  mark();
  enc.appendCreditUpdate(S, 0, 256);
  mark();
  enc.appendLifecycleSlot(S, 0, 0x99aa_bbcc_ddee_ff00n, LifecycleAction.Cancel);
  mark();
  enc.appendCloseSlot(S, 0, CloseReason.PeerGone);
  return { bytes: enc.finish().slice(), offsets };
}

function encodeOne(build: (e: BatchEncoder) => void, epoch = EPOCH, seq = SEQ, flags = 0): Uint8Array {
  const e = new BatchEncoder();
  e.begin(epoch, seq, flags);
  build(e);
  return e.finish().slice();
}

/** The record bytes after the 16-byte header. */
const recordsOf = (batch: Uint8Array): string => hex(batch.subarray(BATCH_HEADER_LEN));

describe('A. wire codec (CODEC-01..42)', () => {
  it('CODEC-01 batch header {v2, flags 0, count 2, epoch 0x0102030405060708, seq 0xDEADBEEF} encodes to the 16 golden bytes', () => {
    const golden = norm('02 00 00 02 01 02 03 04 05 06 07 08 DE AD BE EF');
    const h = encodeBatchHeader({ flags: 0, recordCount: 2, epoch: EPOCH, batchSeq: SEQ });
    expect(h.byteLength).toBe(16);
    expect(hex(h)).toBe(golden);
    // The same header through the encoder, with two records.
    const b = encodeOne((e) => {
      e.appendSlotHeartbeat(S, 0);
      e.appendSlotHeartbeat(S, 1);
    });
    expect(hex(b.subarray(0, 16))).toBe(golden);
    // The reference's pre-v2 vector differs only in the version byte.
    const v1 = encodeBatchHeader({ version: 1, flags: 0, recordCount: 2, epoch: EPOCH, batchSeq: SEQ });
    expect(hex(v1)).toBe(norm('01 00 00 02 01 02 03 04 05 06 07 08 DE AD BE EF'));
    // On lane 3 the second byte is 03.
    const lane3 = encodeBatchHeader({ flags: 3, recordCount: 2, epoch: EPOCH, batchSeq: SEQ });
    expect(hex(lane3)).toBe(norm('02 03 00 02 01 02 03 04 05 06 07 08 DE AD BE EF'));
    const lane3enc = encodeOne(
      (e) => {
        e.appendSlotHeartbeat(S, 0);
        e.appendSlotHeartbeat(S, 1);
      },
      EPOCH,
      SEQ,
      3,
    );
    expect(hex(lane3enc.subarray(0, 16))).toBe(hex(lane3));
  });

  it('CODEC-02 a Data record (slot AB CD EF 42, seq 7, body AA BB CC) encodes to the golden bytes; a batch of it is 32 bytes', () => {
    const b = encodeOne((e) => e.appendData(S, 7, fromHex('AA BB CC')));
    expect(recordsOf(b)).toBe(norm('00 AB CD EF 42 00 00 00 07 00 00 00 03 AA BB CC'));
    expect(b.byteLength).toBe(16 + 13 + 3);
    expect(b.byteLength).toBe(32);
    expect(hex(b)).toBe(
      norm('02 00 00 01 01 02 03 04 05 06 07 08 DE AD BE EF 00 AB CD EF 42 00 00 00 07 00 00 00 03 AA BB CC'),
    );
  });

  it('CODEC-03 an OpenSlot encodes anchor then session, big-endian, body length 16', () => {
    const b = encodeOne((e) => e.appendOpenSlot(S, 1, 0x1122_3344_5566_7788n, 0x99aa_bbcc_ddee_ff00n));
    expect(recordsOf(b)).toBe(
      norm('01 AB CD EF 42 00 00 00 01 00 00 00 10 11 22 33 44 55 66 77 88 99 AA BB CC DD EE FF 00'),
    );
  });

  it('CODEC-04 CloseSlot reasons TerminalSent/PeerGone/UnknownSlot/ProtocolError are a 1-byte body 00/01/02/03, length 00 00 00 01', () => {
    const reasons = [
      CloseReason.TerminalSent,
      CloseReason.PeerGone,
      CloseReason.UnknownSlot,
      CloseReason.ProtocolError,
    ] as const;
    expect([...reasons]).toEqual([0, 1, 2, 3]);
    for (const r of reasons) {
      const b = encodeOne((e) => e.appendCloseSlot(S, 0, r));
      expect(recordsOf(b)).toBe(norm(`02 AB CD EF 42 00 00 00 00 00 00 00 01 0${r}`));
    }
  });

  it('CODEC-05 a CreditUpdate with delta 256 has length 00 00 00 04 and body 00 00 01 00', () => {
    const b = encodeOne((e) => e.appendCreditUpdate(S, 0, 256));
    expect(recordsOf(b)).toBe(norm('03 AB CD EF 42 00 00 00 00 00 00 00 04 00 00 01 00'));
  });

  it('CODEC-06 a SlotHeartbeat at seq 9 is a bare 13-byte record header with length 0', () => {
    const b = encodeOne((e) => e.appendSlotHeartbeat(S, 9));
    expect(recordsOf(b)).toBe(norm('04 AB CD EF 42 00 00 00 09 00 00 00 00'));
    expect(b.byteLength).toBe(16 + 13);
  });

  it('CODEC-06b (lanemux, docs/protocol.md §10.4) a LifecycleSlot cancel, session 0x99AABBCCDDEEFF00, encodes to the lanemux vector', () => {
    const b = encodeOne((e) => e.appendLifecycleSlot(S, 0, 0x99aa_bbcc_ddee_ff00n, LifecycleAction.Cancel));
    expect(recordsOf(b)).toBe(norm('05 AB CD EF 42 00 00 00 00 00 00 00 09 99 AA BB CC DD EE FF 00 01'));
    const stop = encodeOne((e) => e.appendLifecycleSlot(S, 0, 0x99aa_bbcc_ddee_ff00n, LifecycleAction.Stop));
    expect(recordsOf(stop)).toBe(norm('05 AB CD EF 42 00 00 00 00 00 00 00 09 99 AA BB CC DD EE FF 00 00'));
  });

  it('CODEC-07 record_count is written when the batch is finished: after 5 records bytes 2..3 read 00 05', () => {
    const e = new BatchEncoder();
    e.begin(1n, 0);
    for (let i = 0; i < 5; i++) e.appendData(S, i, Uint8Array.of(i));
    expect(e.recordCount).toBe(5);
    const b = e.finish();
    expect(hex(b.subarray(2, 4))).toBe('00 05');
    // Big-endian beyond one byte: 0x0102 records.
    e.begin(1n, 0);
    for (let i = 0; i < 0x102; i++) e.appendSlotHeartbeat(S, i);
    expect(hex(e.finish().subarray(2, 4))).toBe('01 02');
  });

  it('CODEC-08 the batch header round-trips at the edges: epoch 0 and 2^64−1, batch_seq 0 and 2^32−1', () => {
    const epochs = [0n, 1n, 0xffff_ffffn, 0x1_0000_0000n, 0x8000_0000_0000_0000n, 0xffff_ffff_ffff_ffffn];
    const seqs = [0, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff];
    const r = new BatchReader();
    for (const epoch of epochs) {
      for (const batchSeq of seqs) {
        const h = encodeBatchHeader({ flags: 0, recordCount: 0, epoch, batchSeq });
        expect(hex(h)).toBe(hex(refHeader(2, 0, 0, epoch, batchSeq)));
        expect(decodeBatchHeader(h)).toEqual({ version: 2, flags: 0, recordCount: 0, epoch, batchSeq });
        const b = encodeOne(() => undefined, epoch, batchSeq);
        expect(hex(b)).toBe(hex(h));
        expect(decodeBatch(b).header).toEqual({ version: 2, flags: 0, recordCount: 0, epoch, batchSeq });
        expect(r.reset(b)).toBe(true);
        expect(r.epoch).toBe(epoch);
        expect(r.epochHi).toBe(Number(epoch >> 32n));
        expect(r.epochLo).toBe(Number(epoch & 0xffff_ffffn));
        expect(r.batchSeq).toBe(batchSeq);
      }
    }
  });

  it('CODEC-09 every record type decodes to the values it was encoded from', () => {
    const { bytes, offsets } = sampleBatch();
    const d = decodeBatch(bytes);
    expect(d.error).toBeNull();
    expect(d.header).toEqual({ version: 2, flags: 0, recordCount: 6, epoch: 7n, batchSeq: 3 });
    expect(d.records.map((r) => r.offset)).toEqual(offsets);
    const [open, data, hb, credit, life, close] = d.records;
    expect(open).toMatchObject({
      type: RecordType.OpenSlot,
      slot: S,
      frameSeq: 1,
      bodyLength: 16,
      anchorId: 0x1122_3344_5566_7788n,
      sessionId: 0x99aa_bbcc_ddee_ff00n,
    });
    expect(data).toMatchObject({ type: RecordType.Data, slot: S, frameSeq: 7, bodyLength: 3 });
    expect(hex(data!.body)).toBe('aa bb cc');
    expect(hb).toMatchObject({ type: RecordType.SlotHeartbeat, slot: S, frameSeq: 9, bodyLength: 0 });
    expect(hb!.body.byteLength).toBe(0);
    expect(credit).toMatchObject({ type: RecordType.CreditUpdate, slot: S, frameSeq: 0, creditDelta: 256 });
    expect(life).toMatchObject({
      type: RecordType.LifecycleSlot,
      slot: S,
      frameSeq: 0,
      sessionId: 0x99aa_bbcc_ddee_ff00n,
      lifecycleAction: LifecycleAction.Cancel,
    });
    expect(close).toMatchObject({
      type: RecordType.CloseSlot,
      slot: S,
      frameSeq: 0,
      closeReason: CloseReason.PeerGone,
    });
    // The cursor exposes the same values without objects.
    const r = new BatchReader();
    expect(r.reset(bytes)).toBe(true);
    expect(r.next()).toBe(true);
    expect([r.type, r.slot, r.frameSeq, r.anchorId(), r.sessionId()]).toEqual([
      1,
      S,
      1,
      0x1122_3344_5566_7788n,
      0x99aa_bbcc_ddee_ff00n,
    ]);
    expect(r.next()).toBe(true);
    expect(hex(r.body())).toBe('aa bb cc');
    expect(r.next()).toBe(true);
    expect(r.type).toBe(4);
    expect(r.next()).toBe(true);
    expect(r.creditDelta).toBe(256);
    expect(r.next()).toBe(true);
    expect([r.sessionId(), r.lifecycleAction]).toEqual([0x99aa_bbcc_ddee_ff00n, 1]);
    expect(r.next()).toBe(true);
    expect(r.closeReason).toBe(1);
    expect(r.next()).toBe(false);
    expect(r.error).toBeNull();
    expect(r.index).toBe(6);
  });

  it('CODEC-10 every close reason 0..3 round-trips', () => {
    for (const reason of [0, 1, 2, 3] as const) {
      const b = encodeOne((e) => e.appendCloseSlot(slotId(reason, 7), 0, reason));
      const d = decodeBatch(b);
      expect(d.error).toBeNull();
      expect(d.records).toHaveLength(1);
      expect(d.records[0]!.closeReason).toBe(reason);
      expect(d.records[0]!.slot).toBe(slotId(reason, 7));
    }
  });

  it('CODEC-11 a decoded body is an offset and length into the whole payload; slicing there is zero-copy', () => {
    const { bytes } = sampleBatch();
    // Embed the payload at a non-zero offset of a larger buffer to catch byteOffset mistakes.
    const backing = new Uint8Array(bytes.byteLength + 40).fill(0xee);
    backing.set(bytes, 17);
    const payload = backing.subarray(17, 17 + bytes.byteLength);
    const d = decodeBatch(payload);
    expect(d.error).toBeNull();
    expect(d.records).toHaveLength(6);
    for (const rec of d.records) {
      expect(rec.bodyOffset).toBe(rec.offset + RECORD_HEADER_LEN);
      expect(rec.body.buffer).toBe(backing.buffer);
      expect(rec.body.byteOffset).toBe(payload.byteOffset + rec.bodyOffset);
      expect(rec.body.byteLength).toBe(rec.bodyLength);
      expect(hex(rec.body)).toBe(hex(payload.subarray(rec.bodyOffset, rec.bodyOffset + rec.bodyLength)));
    }
    // Zero-copy: a write through the payload shows in the returned body view.
    const data = d.records[1]!;
    payload[data.bodyOffset] = 0x11;
    expect(data.body[0]).toBe(0x11);
    const r = new BatchReader();
    r.reset(payload);
    r.next();
    r.next();
    expect(r.body().buffer).toBe(backing.buffer);
    expect(r.body().byteOffset).toBe(17 + r.bodyOffset);
  });

  it('CODEC-12 an empty batch is exactly the 16-byte header and decodes to no records', () => {
    const b = encodeOne(() => undefined);
    expect(b.byteLength).toBe(16);
    expect(hex(b)).toBe(norm('02 00 00 00 01 02 03 04 05 06 07 08 DE AD BE EF'));
    const d = decodeBatch(b);
    expect(d.error).toBeNull();
    expect(d.records).toEqual([]);
    expect(d.header?.recordCount).toBe(0);
    const r = new BatchReader();
    expect(r.reset(b)).toBe(true);
    expect(r.next()).toBe(false);
    expect(r.error).toBeNull();
  });

  it('CODEC-13 a 100,000-byte body round-trips byte for byte', () => {
    const body = new Uint8Array(100_000);
    for (let i = 0; i < body.length; i++) body[i] = (i * 131 + (i >>> 8)) & 0xff;
    const e = new BatchEncoder({ maxBytes: 200_000 });
    e.begin(1n, 0);
    e.appendData(S, 1, body);
    e.appendData(S, 2, Uint8Array.of(1, 2, 3));
    const b = e.finish();
    expect(b.byteLength).toBe(16 + 13 + 100_000 + 13 + 3);
    expect(hex(b.subarray(16 + 9, 16 + 13))).toBe('00 01 86 a0');
    const d = decodeBatch(b);
    expect(d.error).toBeNull();
    expect(d.records[0]!.bodyLength).toBe(100_000);
    expect(Buffer.compare(d.records[0]!.body, body)).toBe(0);
    expect(hex(d.records[1]!.body)).toBe('01 02 03');
  });

  it('CODEC-14 an encoder buffer reused for a new batch starts clean (no bytes or count from the previous batch)', () => {
    const e = new BatchEncoder({ initialBytes: 16 });
    // Batch 1: many records on lane 5.
    e.begin(9n, 100, 5);
    for (let i = 0; i < 50; i++) e.appendData(S, i, new Uint8Array(20).fill(0x77));
    const first = e.finish().slice();
    expect(decodeBatch(first).records).toHaveLength(50);
    // Batch 2 on the same encoder: fewer, shorter records, other header.
    e.begin(10n, 0, 0);
    expect(e.byteLength).toBe(16);
    expect(e.recordCount).toBe(0);
    e.appendCloseSlot(S, 0, CloseReason.TerminalSent);
    const second = e.finish();
    const fresh = encodeOne((x) => x.appendCloseSlot(S, 0, CloseReason.TerminalSent), 10n, 0, 0);
    expect(hex(second)).toBe(hex(fresh));
    expect(decodeBatch(second).records).toHaveLength(1);
    // An empty batch after a full one is a bare header with count 0.
    e.begin(11n, 1);
    const empty = e.finish();
    expect(hex(empty)).toBe(hex(refHeader(2, 0, 0, 11n, 1)));
    // After discard() too.
    e.begin(12n, 2);
    e.appendData(S, 1, new Uint8Array(10));
    e.discard();
    e.begin(12n, 3);
    expect(hex(e.finish())).toBe(hex(refHeader(2, 0, 0, 12n, 3)));
  });

  it('CODEC-15 after every append the encoded length equals 16 + Σ(13 + body length)', () => {
    const e = new BatchEncoder();
    e.begin(1n, 1);
    let expected = 16;
    const check = (bodyLength: number) => {
      expected += 13 + bodyLength;
      expect(e.byteLength).toBe(expected);
    };
    expect(e.byteLength).toBe(16);
    e.appendData(S, 0, new Uint8Array(3));
    check(3);
    e.appendOpenSlot(S, 1, 1n, 2n);
    check(16);
    e.appendCloseSlot(S, 0, 0);
    check(1);
    e.appendCreditUpdate(S, 0, 5);
    check(4);
    e.appendSlotHeartbeat(S, 1);
    check(0);
    e.appendLifecycleSlot(S, 0, 3n, 0);
    check(9);
    e.appendItemString(S, 2, 'hello');
    check(6 + 1 + 5);
    e.appendItemString(S, 3, 'ünïcødé ✓ 🎉');
    check(6 + 1 + new TextEncoder().encode('ünïcødé ✓ 🎉').byteLength);
    e.appendItemBytes(S, 4, new Uint8Array(300));
    check(6 + 3 + 300);
    expect(e.remainingBytes).toBe(e.maxBytes - expected);
    expect(e.finish().byteLength).toBe(expected);
  });

  it('CODEC-16 a batch accepts exactly 65,535 records, then BatchFull', () => {
    expect(MAX_RECORDS_PER_BATCH).toBe(65_535);
    const e = new BatchEncoder({ maxBytes: 16 + 65_536 * 13 + 64 });
    e.begin(1n, 0);
    for (let i = 0; i < 65_535; i++) e.appendSlotHeartbeat(S, i);
    expect(e.recordCount).toBe(65_535);
    expect(e.fits(0)).toBe(false);
    const refusals: Array<() => void> = [
      () => e.appendSlotHeartbeat(S, 0),
      () => e.appendData(S, 0, new Uint8Array(0)),
      () => e.appendItemString(S, 0, ''),
      () => e.appendItemBytes(S, 0, new Uint8Array(0)),
      () => e.appendOpenSlot(S, 0, 0n, 0n),
      () => e.appendCloseSlot(S, 0, 0),
      () => e.appendCreditUpdate(S, 0, 1),
      () => e.appendLifecycleSlot(S, 0, 0n, 0),
    ];
    for (const f of refusals) {
      let caught: unknown;
      try {
        f();
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(WireError);
      expect((caught as WireError).code).toBe('ERR_BATCH_FULL');
    }
    // The refusals changed nothing.
    expect(e.recordCount).toBe(65_535);
    expect(e.byteLength).toBe(16 + 65_535 * 13);
    const b = e.finish();
    expect(hex(b.subarray(2, 4))).toBe('ff ff');
    const d = decodeBatch(b);
    expect(d.error).toBeNull();
    expect(d.records).toHaveLength(65_535);
    expect(d.records[65_534]!.frameSeq).toBe(65_534);
  });

  it('CODEC-17 any payload shorter than 16 bytes fails with TruncatedBatchHeader', () => {
    const full = encodeOne((e) => e.appendData(S, 7, fromHex('AA BB CC')));
    for (let n = 0; n < 16; n++) {
      const p = full.subarray(0, n);
      const d = decodeBatch(p);
      expect(d.header).toBeNull();
      expect(d.records).toEqual([]);
      expect(d.error).toBeInstanceOf(DecodeError);
      expect(d.error).toMatchObject({ kind: 'TruncatedBatchHeader', code: 'ERR_TRUNCATED_BATCH_HEADER', offset: 0 });
      const h = decodeBatchHeader(p);
      expect(h).toBeInstanceOf(DecodeError);
      expect((h as DecodeError).kind).toBe('TruncatedBatchHeader');
      const r = new BatchReader();
      expect(r.reset(p)).toBe(false);
      expect(r.hasHeader).toBe(false);
      expect(r.header()).toBeNull();
      expect(r.next()).toBe(false);
    }
  });

  it('CODEC-18 another version: the header still decodes (count, epoch, seq readable) but records fail with UnsupportedVersion', () => {
    const good = encodeOne((e) => {
      e.appendData(S, 7, fromHex('AA BB CC'));
      e.appendSlotHeartbeat(S, 8);
    });
    for (const version of [0, 1, 3, 0x7f, 0xff]) {
      const p = good.slice();
      p[0] = version;
      const d = decodeBatch(p);
      expect(d.header).toEqual({ version, flags: 0, recordCount: 2, epoch: EPOCH, batchSeq: SEQ });
      expect(d.records).toEqual([]);
      expect(d.error).toMatchObject({ kind: 'UnsupportedVersion', code: 'ERR_UNSUPPORTED_VERSION', offset: 0 });
      const r = new BatchReader();
      expect(r.reset(p)).toBe(false);
      expect(r.hasHeader).toBe(true);
      expect([r.version, r.recordCount, r.epoch, r.batchSeq]).toEqual([version, 2, EPOCH, SEQ]);
      expect(r.next()).toBe(false);
      expect(r.error?.kind).toBe('UnsupportedVersion');
      expect(decodeBatchHeader(p)).toEqual({ version, flags: 0, recordCount: 2, epoch: EPOCH, batchSeq: SEQ });
    }
    // The reference's own v1 golden header: metered, then refused.
    const v1 = concat(fromHex('01 00 00 02 01 02 03 04 05 06 07 08 DE AD BE EF'), good.subarray(16));
    const d1 = decodeBatch(v1);
    expect(d1.header).toEqual({ version: 1, flags: 0, recordCount: 2, epoch: EPOCH, batchSeq: SEQ });
    expect(d1.error?.kind).toBe('UnsupportedVersion');
  });

  it('CODEC-19 the flags byte is carried verbatim, whatever its value; unknown bits never cause a decode error', () => {
    const r = new BatchReader();
    for (let flags = 0; flags <= 0xff; flags++) {
      const b = encodeOne((e) => e.appendData(S, 1, Uint8Array.of(flags)), 5n, 6, flags);
      expect(b[1]).toBe(flags);
      const d = decodeBatch(b);
      expect(d.error).toBeNull();
      expect(d.header?.flags).toBe(flags);
      expect(d.records).toHaveLength(1);
      expect(r.reset(b)).toBe(true);
      expect(r.flags).toBe(flags);
      expect(r.lane).toBe(flags & 0x0f);
      // Also via the header writer.
      expect(encodeBatchHeader({ flags, recordCount: 0, epoch: 1n, batchSeq: 0 })[1]).toBe(flags);
    }
  });

  it('CODEC-20 truncating a valid multi-record batch at every shorter length yields a clean error, never a throw or a wrong record', () => {
    const { bytes, offsets } = sampleBatch();
    const full = decodeBatch(bytes);
    expect(full.error).toBeNull();
    const ends = [...offsets.slice(1), bytes.byteLength];
    for (let n = 0; n < bytes.byteLength; n++) {
      const p = bytes.subarray(0, n);
      let d: ReturnType<typeof decodeBatch> | undefined;
      expect(() => (d = decodeBatch(p))).not.toThrow();
      const got = d!;
      expect(got.error).not.toBeNull();
      // Only a prefix of the correct records, each wholly inside the truncated payload.
      const complete = ends.filter((end) => end <= n).length;
      expect(got.records).toHaveLength(n < 16 ? 0 : complete);
      got.records.forEach((rec, i) => {
        const want = full.records[i]!;
        expect([rec.offset, rec.type, rec.slot, rec.frameSeq, rec.bodyLength, hex(rec.body)]).toEqual([
          want.offset,
          want.type,
          want.slot,
          want.frameSeq,
          want.bodyLength,
          hex(want.body),
        ]);
      });
      // The exact kind follows from where the cut fell.
      const kind =
        n < 16
          ? 'TruncatedBatchHeader'
          : offsets.includes(n)
            ? 'RecordCountMismatch'
            : n - Math.max(...offsets.filter((o) => o <= n)) < 13
              ? 'TruncatedRecordHeader'
              : 'TruncatedRecordBody';
      expect(got.error!.kind).toBe(kind);
    }
  });

  it('CODEC-21 a payload ending exactly on a record boundary before record_count records fails with RecordCountMismatch', () => {
    const one = refRecord(0, S, 7, fromHex('AA BB CC'));
    for (const declared of [1, 2, 3, 65_535]) {
      for (const present of [0, 1, 2]) {
        if (present >= declared) continue;
        const p = concat(refHeader(2, 0, declared, 1n, 0), ...Array.from({ length: present }, () => one));
        const d = decodeBatch(p);
        expect(d.records).toHaveLength(present);
        expect(d.error).toMatchObject({
          kind: 'RecordCountMismatch',
          code: 'ERR_RECORD_COUNT_MISMATCH',
          offset: p.byteLength,
        });
      }
    }
  });

  it('CODEC-22 a payload with more records than record_count declares fails with TrailingBytes after the declared records', () => {
    const one = refRecord(0, S, 7, fromHex('AA BB CC'));
    const hb = refRecord(4, S, 9, new Uint8Array(0));
    const p = concat(refHeader(2, 0, 1, 1n, 0), one, hb);
    const d = decodeBatch(p);
    expect(d.records).toHaveLength(1);
    expect(hex(d.records[0]!.body)).toBe('aa bb cc');
    expect(d.error).toMatchObject({ kind: 'TrailingBytes', code: 'ERR_TRAILING_BYTES', offset: 16 + 16 });
    // A single stray byte, and a count of 0 with a record after it.
    expect(decodeBatch(concat(refHeader(2, 0, 1, 1n, 0), one, Uint8Array.of(0))).error).toMatchObject({
      kind: 'TrailingBytes',
      offset: 32,
    });
    const zero = decodeBatch(concat(refHeader(2, 0, 0, 1n, 0), one));
    expect(zero.records).toEqual([]);
    expect(zero.error).toMatchObject({ kind: 'TrailingBytes', offset: 16 });
    // The records are delivered before the error (iterator order).
    const items = [...iterateBatch(p)];
    expect(items.map((x) => x.ok)).toEqual([true, false]);
  });

  it('CODEC-23 a header declaring 65,535 records over ~20 bytes costs exactly one error, no count-sized work or allocation', () => {
    const p = concat(refHeader(2, 0, 0xffff, 1n, 0), fromHex('00 00 00 01'));
    expect(p.byteLength).toBe(20);
    const r = new BatchReader();
    expect(r.reset(p)).toBe(true);
    expect(r.next()).toBe(false);
    expect(r.error).toMatchObject({ kind: 'TruncatedRecordHeader', offset: 16 });
    expect(r.next()).toBe(false);
    expect([...iterateBatch(p)]).toHaveLength(1);
    const guard = new AllocationGuard();
    const results = guard.run(p.byteLength, () => {
      const out: Array<DecodeError | null> = [];
      for (let i = 0; i < 1_000; i++) out.push(decodeBatch(p).error);
      return out;
    });
    expect(guard.violations).toEqual([]);
    expect(results.every((e) => e?.kind === 'TruncatedRecordHeader')).toBe(true);
    // Fast: 20,000 decodes of it take well under a second (a loop over 65,535 would not).
    const t0 = performance.now();
    for (let i = 0; i < 20_000; i++) {
      r.reset(p);
      while (r.next());
    }
    expect(performance.now() - t0).toBeLessThan(1_000);
    // The same with 65,535 declared records over exactly 16 + 13 × 1 bytes.
    const oneRecord = concat(refHeader(2, 0, 0xffff, 1n, 0), refRecord(4, S, 0, new Uint8Array(0)));
    const d = decodeBatch(oneRecord);
    expect(d.records).toHaveLength(1);
    expect(d.error).toMatchObject({ kind: 'RecordCountMismatch', offset: 29 });
  });

  it('CODEC-24 an unknown record type fails with UnknownRecordType carrying the record byte offset', () => {
    const one = refRecord(0, S, 7, fromHex('AA BB CC'));
    for (const type of [6, 7, 0x10, 0x80, 0xff]) {
      const first = decodeBatch(concat(refHeader(2, 0, 1, 1n, 0), refRecord(type, S, 0, new Uint8Array(0))));
      expect(first.records).toEqual([]);
      expect(first.error).toBeInstanceOf(DecodeError);
      expect(first.error).toMatchObject({ kind: 'UnknownRecordType', code: 'ERR_UNKNOWN_RECORD_TYPE', offset: 16 });
      const second = decodeBatch(
        concat(refHeader(2, 0, 3, 1n, 0), one, refRecord(type, S, 0, Uint8Array.of(1, 2)), one),
      );
      expect(second.records).toHaveLength(1);
      expect(second.error).toMatchObject({ kind: 'UnknownRecordType', offset: 32 });
      expect(second.error!.message).toContain('32');
    }
  });

  it('CODEC-25 a fixed-layout body at the wrong length fails with BodyLengthMismatch (OpenSlot 16, CloseSlot 1, CreditUpdate 4, SlotHeartbeat 0, LifecycleSlot 9)', () => {
    const fixed: Array<[number, number]> = [
      [RecordType.OpenSlot, 16],
      [RecordType.CloseSlot, 1],
      [RecordType.CreditUpdate, 4],
      [RecordType.SlotHeartbeat, 0],
      [RecordType.LifecycleSlot, 9],
    ];
    for (const [type, right] of fixed) {
      const okBody = new Uint8Array(right);
      expect(decodeBatch(concat(refHeader(2, 0, 1, 1n, 0), refRecord(type, S, 0, okBody))).error).toBeNull();
      for (const wrong of [0, 1, right - 1, right + 1, right + 7, 17, 255]) {
        if (wrong < 0 || wrong === right) continue;
        const p = concat(
          refHeader(2, 0, 2, 1n, 0),
          refRecord(0, S, 1, Uint8Array.of(9)),
          refRecord(type, S, 0, new Uint8Array(wrong)),
        );
        const d = decodeBatch(p);
        expect(d.records).toHaveLength(1);
        expect(d.error, `type ${type} length ${wrong}`).toMatchObject({
          kind: 'BodyLengthMismatch',
          code: 'ERR_BODY_LENGTH_MISMATCH',
          offset: 30,
        });
      }
    }
    // Data is variable: any length is fine.
    for (const n of [0, 1, 9, 16, 1000])
      expect(decodeBatch(concat(refHeader(2, 0, 1, 1n, 0), refRecord(0, S, 0, new Uint8Array(n)))).error).toBeNull();
  });

  it('CODEC-26 a close reason byte of 4 or more fails with UnknownCloseReason', () => {
    for (const reason of [4, 5, 0x7f, 0x80, 0xff]) {
      const p = concat(
        refHeader(2, 0, 2, 1n, 0),
        refRecord(4, S, 0, new Uint8Array(0)),
        refRecord(2, S, 0, Uint8Array.of(reason)),
      );
      const d = decodeBatch(p);
      expect(d.records).toHaveLength(1);
      expect(d.error).toMatchObject({ kind: 'UnknownCloseReason', code: 'ERR_UNKNOWN_CLOSE_REASON', offset: 29 });
    }
    for (const reason of [0, 1, 2, 3]) {
      expect(
        decodeBatch(concat(refHeader(2, 0, 1, 1n, 0), refRecord(2, S, 0, Uint8Array.of(reason)))).error,
      ).toBeNull();
    }
  });

  it('CODEC-27 a huge declared body length (0xFFFFFFFF) over a short payload fails with TruncatedRecordBody and allocates nothing', () => {
    const guard = new AllocationGuard();
    for (const type of [0, 1, 2, 3, 4, 5]) {
      for (const len of [0xffff_ffff, 0x8000_0000, 0x7fff_ffff, 0x0100_0000, 4]) {
        const p = concat(refHeader(2, 0, 1, 1n, 0), refRecord(type, S, 0, Uint8Array.of(1, 2, 3), len));
        const d = guard.run(p.byteLength, () => decodeBatch(p));
        expect(d.records).toEqual([]);
        expect(d.error, `type ${type} len ${len}`).toMatchObject({
          kind: 'TruncatedRecordBody',
          code: 'ERR_TRUNCATED_RECORD_BODY',
          offset: 16,
        });
      }
    }
    expect(guard.violations).toEqual([]);
  });

  it('CODEC-28 the decoder is fused: after its first error it yields nothing more', () => {
    // A good record, a bad one, then records that would be valid on their own.
    const good = refRecord(0, S, 1, Uint8Array.of(1));
    const p = concat(refHeader(2, 0, 4, 1n, 0), good, refRecord(9, S, 0, new Uint8Array(0)), good, good);
    const r = new BatchReader();
    expect(r.reset(p)).toBe(true);
    expect(r.next()).toBe(true);
    expect(r.next()).toBe(false);
    const err = r.error;
    expect(err?.kind).toBe('UnknownRecordType');
    for (let i = 0; i < 5; i++) {
      expect(r.next()).toBe(false);
      expect(r.error).toBe(err);
    }
    expect(r.index).toBe(1);
    const items = [...iterateBatch(p)];
    expect(items).toHaveLength(2);
    expect(items[0]!.ok).toBe(true);
    expect(items[1]).toMatchObject({ ok: false, error: { kind: 'UnknownRecordType', offset: 30 } });
    const d = decodeBatch(p);
    expect(d.records).toHaveLength(1);
    expect(d.error?.kind).toBe('UnknownRecordType');
    // Also fused after a clean end and after TrailingBytes.
    const clean = encodeOne((e) => e.appendSlotHeartbeat(S, 0));
    expect(r.reset(clean)).toBe(true);
    expect(r.next()).toBe(true);
    expect(r.next()).toBe(false);
    expect(r.next()).toBe(false);
    expect(r.error).toBeNull();
    expect(r.reset(concat(clean, good))).toBe(true);
    expect(r.next()).toBe(true);
    expect(r.next()).toBe(false);
    expect(r.error?.kind).toBe('TrailingBytes');
    expect(r.next()).toBe(false);
    expect(r.error?.kind).toBe('TrailingBytes');
  });

  it('CODEC-29 the record iterator size hint has lower bound 0, whatever record_count says', () => {
    const r = new BatchReader();
    expect(r.sizeHint()[0]).toBe(0);
    const liar = concat(refHeader(2, 0, 0xffff, 1n, 0), fromHex('00 00 00 01'));
    r.reset(liar);
    expect(r.sizeHint()[0]).toBe(0);
    expect(r.sizeHint()[1]).toBeLessThanOrEqual(0xffff);
    r.next();
    expect(r.sizeHint()).toEqual([0, 0]);
    const { bytes } = sampleBatch();
    r.reset(bytes);
    expect(r.sizeHint()).toEqual([0, 6]);
    r.next();
    expect(r.sizeHint()).toEqual([0, 5]);
    while (r.next());
    expect(r.sizeHint()).toEqual([0, 0]);
    r.reset(bytes.subarray(0, 10));
    expect(r.sizeHint()).toEqual([0, 0]);
  });

  it('CODEC-30 arbitrary random bytes never make the decoder throw; each input yields records, one error, or both', () => {
    const r = new BatchReader();
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 200 }), fc.boolean(), (raw, forceV2) => {
        const p = raw.slice();
        if (forceV2 && p.length > 0) p[0] = 2;
        const d = decodeBatch(p);
        const ok = d.error === null;
        // Either a clean batch (exactly record_count records, whole payload consumed) or one error.
        if (ok) {
          expect(d.records).toHaveLength(d.header!.recordCount);
        } else {
          expect(d.error).toBeInstanceOf(DecodeError);
        }
        expect(d.records.length > 0 || d.error !== null || d.header?.recordCount === 0).toBe(true);
        r.reset(p);
        let n = 0;
        while (r.next()) n++;
        expect(n).toBe(d.records.length);
        expect(r.error?.kind ?? null).toBe(d.error?.kind ?? null);
        expect(oracleDecode(p).error?.kind ?? null).toBe(d.error?.kind ?? null);
      }),
      { numRuns: 2_000 },
    );
  });

  it('CODEC-31 SlotIds pack and unpack at the edges: (0,0)↔0, (0xFFFFFF,0xFF)↔0xFFFFFFFF, (0xABCDEF,0x42)↔0xABCDEF42', () => {
    const cases: Array<[number, number, number]> = [
      [0, 0, 0x0000_0000],
      [0xff_ffff, 0xff, 0xffff_ffff],
      [0xab_cdef, 0x42, 0xabcd_ef42],
      [1, 0, 0x100],
      [0, 1, 1],
      [0x80_0000, 0, 0x8000_0000],
    ];
    for (const [index, generation, raw] of cases) {
      expect(slotId(index, generation)).toBe(raw);
      expect(slotIndex(raw)).toBe(index);
      expect(slotGeneration(raw)).toBe(generation);
    }
    // Unsigned: the top index bit does not make the id negative, and it reaches the wire as-is.
    expect(slotId(0xff_ffff, 0xff)).toBeGreaterThan(0);
    const b = encodeOne((e) => e.appendSlotHeartbeat(slotId(0xff_ffff, 0xff), 0));
    expect(hex(b.subarray(17, 21))).toBe('ff ff ff ff');
    expect(decodeBatch(b).records[0]!.slot).toBe(0xffff_ffff);
  });

  it('CODEC-32 building a SlotId with an index above 0xFFFFFF is refused', () => {
    expect(MAX_SLOT_INDEX).toBe(0xff_ffff);
    for (const [index, generation] of [
      [0x100_0000, 0],
      [0xffff_ffff, 0],
      [-1, 0],
      [1.5, 0],
      [Number.NaN, 0],
      [0, 256],
      [0, -1],
      [0, 0.5],
    ] as const) {
      let caught: unknown;
      try {
        slotId(index, generation);
      } catch (err) {
        caught = err;
      }
      expect(caught, `(${index}, ${generation})`).toBeInstanceOf(WireError);
      expect(caught).toBeInstanceOf(LanemuxError);
      expect((caught as WireError).code).toBe('ERR_INVALID_SLOT_ID');
    }
    expect(slotId(MAX_SLOT_INDEX, 0)).toBe(0xffff_ff00);
  });

  it('CODEC-33 every raw u32 is a valid SlotId and round-trips unchanged', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffff_ffff }), (raw) => {
        expect(slotId(slotIndex(raw), slotGeneration(raw))).toBe(raw);
        expect(slotIndex(raw)).toBeLessThanOrEqual(MAX_SLOT_INDEX);
        expect(slotGeneration(raw)).toBeLessThanOrEqual(0xff);
        expect(withGeneration(raw, slotGeneration(raw))).toBe(raw);
      }),
      { numRuns: 5_000 },
    );
    // Through the wire unchanged.
    const raws = [0, 1, 0xff, 0x100, 0x7fff_ffff, 0x8000_0000, 0xdead_beef, 0xffff_ffff];
    const b = encodeOne((e) => raws.forEach((s, i) => e.appendData(s, i, new Uint8Array(0))));
    expect(decodeBatch(b).records.map((r) => r.slot)).toEqual(raws);
  });

  it('CODEC-34 bumping generation 255 wraps it to 0 and leaves the index unchanged', () => {
    for (const index of [0, 1, 0xab_cdef, 0xff_ffff]) {
      const s = slotId(index, 0xff);
      const bumped = bumpGeneration(s);
      expect(slotGeneration(bumped)).toBe(0);
      expect(slotIndex(bumped)).toBe(index);
      expect(bumped).toBe(slotId(index, 0));
      expect(bumpGeneration(slotId(index, 0x41))).toBe(slotId(index, 0x42));
    }
    // 256 bumps come back to the start.
    let s = slotId(0xab_cdef, 0x42);
    for (let i = 0; i < 256; i++) s = bumpGeneration(s);
    expect(s).toBe(slotId(0xab_cdef, 0x42));
  });

  it('CODEC-35 replacing a SlotId generation changes only its low byte', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffff_ffff }), fc.integer({ min: 0, max: 0xff }), (raw, g) => {
        const next = withGeneration(raw, g);
        expect(next >>> 8).toBe(raw >>> 8);
        expect(next & 0xff).toBe(g);
        expect(next).toBeGreaterThanOrEqual(0);
        expect(next).toBeLessThanOrEqual(0xffff_ffff);
      }),
      { numRuns: 2_000 },
    );
    expect(withGeneration(0xabcd_ef42, 0x07)).toBe(0xabcd_ef07);
  });

  it('CODEC-36 a SlotId debug/string form shows both the index and the generation', () => {
    const text = formatSlotId(slotId(0xab_cdef, 0x42));
    expect(text.toLowerCase()).toContain('abcdef');
    expect(text.toLowerCase()).toContain('42');
    // Index and generation are distinguishable: (1, 2) and (2, 1) print differently, and differ from the raw u32.
    expect(formatSlotId(slotId(1, 2))).not.toBe(formatSlotId(slotId(2, 1)));
    expect(formatSlotId(slotId(0, 0))).not.toBe(formatSlotId(slotId(0, 1)));
    expect(formatSlotId(slotId(0xff_ffff, 0xff)).toLowerCase()).toMatch(/ffffff[^f]+ff/);
  });

  it('CODEC-37 OpenSlot, CloseSlot, CreditUpdate and LifecycleSlot are control records; Data and SlotHeartbeat are not', () => {
    expect(ALL_TYPES.filter((t) => isControlRecord(t))).toEqual([
      RecordType.OpenSlot,
      RecordType.CloseSlot,
      RecordType.CreditUpdate,
      RecordType.LifecycleSlot,
    ]);
    expect(isControlRecord(RecordType.Data)).toBe(false);
    expect(isControlRecord(RecordType.SlotHeartbeat)).toBe(false);
    expect(isControlRecord(6)).toBe(false);
  });

  it('CODEC-38 wire discriminants: Data 0, OpenSlot 1, CloseSlot 2, CreditUpdate 3, SlotHeartbeat 4, LifecycleSlot 5', () => {
    expect(RecordType).toEqual({
      Data: 0,
      OpenSlot: 1,
      CloseSlot: 2,
      CreditUpdate: 3,
      SlotHeartbeat: 4,
      LifecycleSlot: 5,
    });
    const { bytes, offsets } = sampleBatch();
    expect(offsets.map((o) => bytes[o])).toEqual([1, 0, 4, 3, 5, 2]);
  });

  it('CODEC-39 away from the wrap, batch sequences compare in numeric order', () => {
    const pairs: Array<[number, number]> = [
      [1, 0],
      [2, 1],
      [1000, 999],
      [0x7fff_ffff, 0],
      [0x8000_0000, 1],
      [0xffff_ffff, 0x8000_0000],
      [12_345, 12_000],
    ];
    for (const [a, b] of pairs) {
      expect(seqNewer(a, b), `${a} > ${b}`).toBe(true);
      expect(seqNewer(b, a)).toBe(false);
      expect(seqOlder(b, a)).toBe(true);
      expect(seqOlder(a, b)).toBe(false);
    }
    expect(seqNewer(5, 5)).toBe(false);
    expect(seqOlder(5, 5)).toBe(false);
  });

  it('CODEC-40 across the wrap, 0 is newer than 0xFFFFFFFF', () => {
    expect(seqNewer(0, 0xffff_ffff)).toBe(true);
    expect(seqNewer(0xffff_ffff, 0)).toBe(false);
    expect(seqOlder(0xffff_ffff, 0)).toBe(true);
    expect(seqNewer(5, 0xffff_fff0)).toBe(true);
    expect(seqNewer(0x7fff_fffe, 0xffff_ffff)).toBe(true);
  });

  it('CODEC-41 two sequences exactly 2^31 apart each compare as older than the other', () => {
    for (const a of [0, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 0x1234_5678]) {
      const b = (a + 0x8000_0000) >>> 0;
      // Neither is newer ...
      expect(seqNewer(a, b)).toBe(false);
      expect(seqNewer(b, a)).toBe(false);
      // ... and each reads as older than the other (docs/protocol.md §10.1).
      expect(seqOlder(a, b), `seqOlder(${a}, ${b})`).toBe(true);
      expect(seqOlder(b, a), `seqOlder(${b}, ${a})`).toBe(true);
    }
  });

  it('CODEC-42 gap = received − expected, wrapping: expected 0xFFFFFFFE, received 1 → 3', () => {
    expect(seqGap(1, 0xffff_fffe)).toBe(3);
    expect(seqGap(5, 5)).toBe(0);
    expect(seqGap(6, 5)).toBe(1);
    expect(seqGap(0, 0xffff_ffff)).toBe(1);
    expect(seqGap(4, 5)).toBe(0xffff_ffff);
  });
});

describe('decode error kinds carry a stable code and an offset', () => {
  const hdr = (count: number) => refHeader(2, 0, count, 1n, 0);
  const cases: Array<[string, Uint8Array, string, string, number]> = [
    ['short payload', new Uint8Array(15), 'TruncatedBatchHeader', 'ERR_TRUNCATED_BATCH_HEADER', 0],
    ['version 3', refHeader(3, 0, 0, 1n, 0), 'UnsupportedVersion', 'ERR_UNSUPPORTED_VERSION', 0],
    [
      '12 of 13 header bytes',
      concat(hdr(1), new Uint8Array(12)),
      'TruncatedRecordHeader',
      'ERR_TRUNCATED_RECORD_HEADER',
      16,
    ],
    [
      '1 of 13 header bytes',
      concat(hdr(1), new Uint8Array(1)),
      'TruncatedRecordHeader',
      'ERR_TRUNCATED_RECORD_HEADER',
      16,
    ],
    ['boundary before count', hdr(1), 'RecordCountMismatch', 'ERR_RECORD_COUNT_MISMATCH', 16],
    [
      'body cut',
      concat(hdr(1), refRecord(0, S, 0, Uint8Array.of(1, 2, 3), 4)),
      'TruncatedRecordBody',
      'ERR_TRUNCATED_RECORD_BODY',
      16,
    ],
    [
      'type 6',
      concat(hdr(1), refRecord(6, S, 0, new Uint8Array(0))),
      'UnknownRecordType',
      'ERR_UNKNOWN_RECORD_TYPE',
      16,
    ],
    [
      'OpenSlot 15',
      concat(hdr(1), refRecord(1, S, 0, new Uint8Array(15))),
      'BodyLengthMismatch',
      'ERR_BODY_LENGTH_MISMATCH',
      16,
    ],
    [
      'CloseSlot 2',
      concat(hdr(1), refRecord(2, S, 0, new Uint8Array(2))),
      'BodyLengthMismatch',
      'ERR_BODY_LENGTH_MISMATCH',
      16,
    ],
    [
      'CreditUpdate 3',
      concat(hdr(1), refRecord(3, S, 0, new Uint8Array(3))),
      'BodyLengthMismatch',
      'ERR_BODY_LENGTH_MISMATCH',
      16,
    ],
    [
      'SlotHeartbeat 1',
      concat(hdr(1), refRecord(4, S, 0, new Uint8Array(1))),
      'BodyLengthMismatch',
      'ERR_BODY_LENGTH_MISMATCH',
      16,
    ],
    [
      'LifecycleSlot 8',
      concat(hdr(1), refRecord(5, S, 0, new Uint8Array(8))),
      'BodyLengthMismatch',
      'ERR_BODY_LENGTH_MISMATCH',
      16,
    ],
    [
      'LifecycleSlot 10',
      concat(hdr(1), refRecord(5, S, 0, new Uint8Array(10))),
      'BodyLengthMismatch',
      'ERR_BODY_LENGTH_MISMATCH',
      16,
    ],
    [
      'close reason 4',
      concat(hdr(1), refRecord(2, S, 0, Uint8Array.of(4))),
      'UnknownCloseReason',
      'ERR_UNKNOWN_CLOSE_REASON',
      16,
    ],
    [
      'lifecycle action 2 (lanemux, docs/protocol.md §10.4)',
      concat(hdr(1), refRecord(5, S, 0, Uint8Array.of(0, 0, 0, 0, 0, 0, 0, 0, 2))),
      'UnknownLifecycleAction',
      'ERR_UNKNOWN_LIFECYCLE_ACTION',
      16,
    ],
    ['trailing byte', concat(hdr(0), Uint8Array.of(0)), 'TrailingBytes', 'ERR_TRAILING_BYTES', 16],
  ];
  for (const [name, payload, kind, code, offset] of cases) {
    it(`${kind} (${name}) → code ${code} at offset ${offset}`, () => {
      const d = decodeBatch(payload);
      expect(d.error).toBeInstanceOf(DecodeError);
      expect(d.error).toBeInstanceOf(LanemuxError);
      expect(d.error).toMatchObject({ kind, code, offset });
      expect(d.error!.name).toBe('DecodeError');
      expect(d.error!.message).toContain(kind);
      expect(d.records).toEqual([]);
      // The oracle written from the spec agrees.
      expect(oracleDecode(payload).error).toEqual({ kind, offset });
    });
  }
});
