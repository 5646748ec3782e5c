/**
 * Decoder fuzz (CODEC-23, CODEC-27, CODEC-28, CODEC-30; docs/protocol.md §10.4 "Decoding").
 *
 * At least 100,000 inputs per run from a fixed-seed PRNG (override with LANEMUX_FUZZ_SEED and
 * LANEMUX_FUZZ_INPUTS): purely random byte arrays of length 0..300, and mutations of valid batches
 * (bit flips, byte overwrites, truncation, extension, record_count and body-length tampering, type
 * tampering, record duplication). For each input:
 *
 * - `BatchReader` and `decodeBatch` never throw;
 * - after an error nothing more is yielded (fused: `next()` keeps returning false, the error stays);
 * - the yielded records plus the error agree with a second decode (the `BatchReader` cursor, field
 *   by field), with `iterateBatch`, and with an independent spec-derived decoder;
 * - no declared count or length causes an allocation: while the codec runs, `ArrayBuffer`,
 *   `Uint8Array` and `Array` are Proxies that record any construction larger than the input.
 */
import { describe, it, expect } from 'vitest';
import { BatchReader, DecodeError, decodeBatch, iterateBatch } from '../../src/wire/index.ts';
import type { DecodedBatch } from '../../src/wire/index.ts';
import { AllocationGuard, concat, hex, mulberry32, oracleDecode, refHeader } from './helpers.ts';
import { buildBatchCorpus, makeBatchInput } from '../fuzz/batch-mutate.ts';

const SEED = Number(process.env['LANEMUX_FUZZ_SEED'] ?? 0x1a9e_3c5d) >>> 0;
const INPUTS = Math.max(100_000, Number(process.env['LANEMUX_FUZZ_INPUTS'] ?? 100_000));
const CHUNK = 2_000;

/** What one decode run observed, captured inside the allocation guard. */
interface Observed {
  threw: unknown;
  batch: DecodedBatch | null;
  iterated: number; // records from iterateBatch
  iteratedErrors: number;
  errorLast: boolean;
  readerRecords: number;
  readerError: DecodeError | null;
  fusedOk: boolean;
  fields: number[]; // type, slot, frameSeq, recordOffset, bodyOffset, bodyLength per cursor record
}

function observe(input: Uint8Array, reader: BatchReader, out: Observed): void {
  try {
    out.batch = decodeBatch(input);
    let recs = 0;
    let errs = 0;
    let errorLast = true;
    for (const item of iterateBatch(input)) {
      if (errs > 0) errorLast = false; // anything after the error breaks fusing
      if (item.ok) recs++;
      else errs++;
    }
    out.iterated = recs;
    out.iteratedErrors = errs;
    out.errorLast = errorLast;
    reader.reset(input);
    let n = 0;
    const f = out.fields;
    while (reader.next()) {
      n++;
      f.push(reader.type, reader.slot, reader.frameSeq, reader.recordOffset, reader.bodyOffset, reader.bodyLength);
      reader.body();
    }
    out.readerRecords = n;
    out.readerError = reader.error;
    // Fused: more calls return false, leave the error and the record count untouched.
    const err = reader.error;
    const idx = reader.index;
    out.fusedOk =
      !reader.next() && !reader.next() && reader.error === err && reader.index === idx && reader.sizeHint()[0] === 0;
  } catch (err) {
    out.threw = err;
  }
}

/**
 * Compare one observation with the oracle. Plain comparisons first (expect() per field would
 * dominate the run time); on the first mismatch, fail with the seed and the input in hex.
 */
function check(input: Uint8Array, o: Observed): void {
  const problem = findProblem(input, o);
  if (problem !== null) {
    expect.unreachable(`${problem} — seed=0x${SEED.toString(16)} input=${hex(input)} observed=${describeObserved(o)}`);
  }
}

function describeObserved(o: Observed): string {
  const b = o.batch;
  return b === null
    ? `threw ${String(o.threw)}`
    : `${b.records.length} records, error ${b.error ? `${b.error.kind}@${b.error.offset}` : 'none'}`;
}

function findProblem(input: Uint8Array, o: Observed): string | null {
  if (o.threw !== undefined) return `decoder threw ${String(o.threw)}`;
  const b = o.batch!;
  const oracle = oracleDecode(input);
  const h = b.header;
  const oh = oracle.header;
  if ((h === null) !== (oh === null)) return 'header presence differs from the oracle';
  if (h !== null && oh !== null) {
    if (
      h.version !== oh.version ||
      h.flags !== oh.flags ||
      h.recordCount !== oh.recordCount ||
      h.epoch !== oh.epoch ||
      h.batchSeq !== oh.batchSeq
    )
      return 'header differs from the oracle';
  }
  if (b.records.length !== oracle.records.length) return `${b.records.length} records, oracle ${oracle.records.length}`;
  const ek = b.error?.kind ?? null;
  const eo = b.error?.offset ?? null;
  if (ek !== (oracle.error?.kind ?? null) || eo !== (oracle.error?.offset ?? null))
    return `error ${ek}@${eo}, oracle ${oracle.error?.kind ?? null}@${oracle.error?.offset ?? null}`;
  if (b.error !== null && !(b.error instanceof DecodeError)) return 'error is not a DecodeError';
  for (let i = 0; i < b.records.length; i++) {
    const r = b.records[i]!;
    const w = oracle.records[i]!;
    if (
      r.offset !== w.offset ||
      r.type !== w.type ||
      r.slot !== w.slot ||
      r.frameSeq !== w.frameSeq ||
      r.bodyOffset !== w.bodyOffset ||
      r.bodyLength !== w.bodyLength
    )
      return `record ${i} differs from the oracle`;
    if (r.body.byteLength !== r.bodyLength || r.bodyOffset + r.bodyLength > input.byteLength)
      return `record ${i} body out of bounds`;
    if (r.body.buffer !== input.buffer || r.body.byteOffset !== input.byteOffset + r.bodyOffset)
      return `record ${i} body is not a view into the payload`;
  }
  if (o.iterated !== b.records.length || o.iteratedErrors !== (b.error ? 1 : 0) || !o.errorLast)
    return `iterateBatch yielded ${o.iterated} records and ${o.iteratedErrors} errors (error last: ${o.errorLast})`;
  // The cursor run is a second, independent decode of the same input: same records, same error.
  if (
    o.readerRecords !== b.records.length ||
    (o.readerError?.kind ?? null) !== ek ||
    (o.readerError?.offset ?? null) !== eo
  ) {
    return `second decode (BatchReader) yielded ${o.readerRecords} records, error ${o.readerError?.kind ?? null}@${o.readerError?.offset ?? null}`;
  }
  if (!o.fusedOk) return 'BatchReader is not fused: next() after the end changed state or returned true';
  for (let i = 0; i < o.readerRecords; i++) {
    const w = oracle.records[i]!;
    const f = o.fields;
    const k = i * 6;
    if (
      f[k] !== w.type ||
      f[k + 1] !== w.slot ||
      f[k + 2] !== w.frameSeq ||
      f[k + 3] !== w.offset ||
      f[k + 4] !== w.bodyOffset ||
      f[k + 5] !== w.bodyLength
    )
      return `BatchReader record ${i} differs from the oracle`;
  }
  // Each input yields records, one error, or both; a clean batch has exactly record_count records.
  if (b.error === null && b.records.length !== b.header!.recordCount) return 'clean batch with a wrong record count';
  return null;
}

describe('decoder fuzz', () => {
  it('the allocation guard catches count-sized allocations (self-test)', () => {
    const guard = new AllocationGuard();
    guard.run(10, () => {
      void new Array(11);
      void Array(12);
      void new Uint8Array(13);
      void new ArrayBuffer(14);
      void Array.from({ length: 15 });
      void new Uint8Array(new ArrayBuffer(4), 0, 4); // under the limit: fine
      void new Array(3); // fine
      void [1, 2, 3]; // elements, not a size
    });
    expect(guard.violations.map((v) => `${v.ctor}(${v.size})`)).toEqual([
      'Array(11)',
      'Array(12)',
      'Uint8Array(13)',
      'ArrayBuffer(14)',
      'Array(15)',
    ]);
    // Restored afterwards.
    expect(new Uint8Array(100).byteLength).toBe(100);
    expect(Object.getPrototypeOf(new Uint8Array(1))).toBe(Uint8Array.prototype);
    expect(guard.violations).toHaveLength(5);
  });

  it(`CODEC-30 ${INPUTS.toLocaleString('en-US')} random and mutated inputs: never a throw, fused, consistent, no count-sized allocation`, () => {
    const rand = mulberry32(SEED);
    const corpus = buildBatchCorpus(rand);
    // Sanity: the corpus itself is valid.
    for (const s of corpus) expect(decodeBatch(s.bytes).error).toBeNull();
    const guard = new AllocationGuard();
    const reader = new BatchReader();
    const kinds = new Map<string, number>();
    let withRecords = 0;
    let decodeMs = 0;
    const t0 = performance.now();
    for (let done = 0; done < INPUTS; done += CHUNK) {
      const n = Math.min(CHUNK, INPUTS - done);
      const inputs: Uint8Array[] = [];
      const observed: Observed[] = [];
      for (let i = 0; i < n; i++) {
        inputs.push(makeBatchInput(rand, corpus));
        observed.push({
          threw: undefined,
          batch: null,
          iterated: 0,
          iteratedErrors: 0,
          errorLast: true,
          readerRecords: 0,
          readerError: null,
          fusedOk: false,
          fields: [],
        });
      }
      const c0 = performance.now();
      guard.install();
      try {
        for (let i = 0; i < n; i++) {
          const input = inputs[i]!;
          guard.limit = input.byteLength;
          observe(input, reader, observed[i]!);
        }
      } finally {
        guard.uninstall();
      }
      decodeMs += performance.now() - c0;
      if (guard.violations.length > 0) {
        expect(guard.violations, `seed=0x${SEED.toString(16)} chunk at ${done}`).toEqual([]);
      }
      for (let i = 0; i < n; i++) {
        const o = observed[i]!;
        check(inputs[i]!, o);
        const k = o.batch!.error?.kind ?? 'ok';
        kinds.set(k, (kinds.get(k) ?? 0) + 1);
        if (o.batch!.records.length > 0) withRecords++;
      }
    }
    const totalMs = performance.now() - t0;
    expect(guard.constructions).toBeGreaterThan(0); // the traps really saw the codec's own constructions
    expect(guard.violations).toEqual([]);
    // The mix reaches every error kind the decoder has, and plenty of partially decoded batches.
    for (const k of [
      'ok',
      'TruncatedBatchHeader',
      'UnsupportedVersion',
      'TruncatedRecordHeader',
      'RecordCountMismatch',
      'TruncatedRecordBody',
      'UnknownRecordType',
      'BodyLengthMismatch',
      'UnknownCloseReason',
      'UnknownLifecycleAction',
      'TrailingBytes',
    ]) {
      expect(kinds.get(k) ?? 0, `error kind ${k} reached`).toBeGreaterThan(0);
    }
    expect(withRecords).toBeGreaterThan(INPUTS / 10);
    const perInput = 3; // decodeBatch, iterateBatch, BatchReader
    console.log(
      `[fuzz] seed=0x${SEED.toString(16)} inputs=${INPUTS} total=${totalMs.toFixed(0)} ms → ${Math.round((INPUTS / totalMs) * 1000).toLocaleString('en-US')} inputs/s checked end to end; ` +
        `codec only ${Math.round(((INPUTS * perInput) / decodeMs) * 1000).toLocaleString('en-US')} decodes/s (${Math.round((INPUTS / decodeMs) * 1000).toLocaleString('en-US')} inputs/s × ${perInput} decoders) under the allocation guard`,
    );
    console.log(
      `[fuzz] outcomes: ${[...kinds.entries()]
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}; with records=${withRecords}`,
    );
  });

  it('CODEC-23 a header declaring 65,535 records over ~20 bytes: one error, no allocation, fast', () => {
    const guard = new AllocationGuard();
    const payloads = [
      concat(refHeader(2, 0, 0xffff, 1n, 0), Uint8Array.of(0, 0, 0, 0)),
      concat(refHeader(2, 0xff, 0xffff, 0xffff_ffff_ffff_ffffn, 0xffff_ffff), Uint8Array.of(0xff, 0xff, 0xff, 0xff)),
      concat(
        refHeader(2, 0, 0xffff, 1n, 0),
        Uint8Array.of(0, 0xab, 0xcd, 0xef, 0x42, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff),
      ),
    ];
    const reader = new BatchReader();
    const errors: Array<string | null> = [];
    const t0 = performance.now();
    guard.run(32, () => {
      for (let i = 0; i < 10_000; i++) {
        for (const p of payloads) {
          reader.reset(p);
          let n = 0;
          while (reader.next()) n++;
          if (i === 0) errors.push(`${n}:${reader.error?.kind ?? 'none'}`, `${decodeBatch(p).records.length}`);
        }
      }
    });
    const ms = performance.now() - t0;
    expect(guard.violations).toEqual([]);
    expect(errors).toEqual([
      '0:TruncatedRecordHeader',
      '0',
      '0:TruncatedRecordHeader',
      '0',
      '0:TruncatedRecordBody',
      '0',
    ]);
    expect(ms).toBeLessThan(2_000);
  });
});
