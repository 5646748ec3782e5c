/**
 * Valid batches and their mutations (docs/protocol.md §10.4 "Decoding"), shared by the decoder fuzz
 * test (test/wire/fuzz.test.ts) and `npm run fuzz`: the same seed gives the same inputs in both.
 */
import { BatchEncoder } from '../../src/wire/index.ts';
import { concat } from '../wire/helpers.ts';

/** Valid batches to mutate, with their record offsets. */
export interface BatchSeed {
  readonly bytes: Uint8Array;
  readonly offsets: readonly number[];
}

export function buildBatchCorpus(rand: () => number): BatchSeed[] {
  const pick = (n: number) => rand() % n;
  const corpus: BatchSeed[] = [];
  const e = new BatchEncoder({ maxBytes: 4_096, initialBytes: 16 });
  for (let b = 0; b < 96; b++) {
    e.begin(BigInt(rand()) << BigInt(pick(33)), rand(), b % 3 === 0 ? pick(256) : pick(16));
    const offsets: number[] = [];
    const records = b === 0 ? 0 : 1 + pick(b % 4 === 0 ? 30 : 8);
    for (let i = 0; i < records; i++) {
      const slot = rand();
      const seq = pick(4) === 0 ? 0 : rand();
      const at = e.byteLength;
      const kind = pick(9);
      const body = new Uint8Array(pick(40));
      for (let k = 0; k < body.length; k++) body[k] = pick(256);
      if (!e.fits(body.length + 64)) break;
      offsets.push(at);
      switch (kind) {
        case 0:
          e.appendData(slot, seq, body);
          break;
        case 1:
          e.appendItemString(slot, seq, String.fromCharCode(...Array.from(body, (x) => 0x20 + x)));
          break;
        case 2:
          e.appendItemBytes(slot, seq, body);
          break;
        case 3:
          e.appendOpenSlot(slot, 0, BigInt(rand()) * BigInt(rand()), BigInt(rand()));
          break;
        case 4:
          e.appendCloseSlot(slot, 0, pick(4) as 0 | 1 | 2 | 3);
          break;
        case 5:
          e.appendCreditUpdate(slot, 0, rand());
          break;
        case 6:
          e.appendSlotHeartbeat(slot, seq);
          break;
        case 7:
          e.appendLifecycleSlot(slot, 0, BigInt(rand()), pick(2) as 0 | 1);
          break;
        default:
          e.appendData(slot, seq, new Uint8Array(0));
      }
    }
    const bytes = e.finish().slice();
    corpus.push({ bytes, offsets });
  }
  return corpus;
}

export const INTERESTING_U8 = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 0x7f, 0x80, 0xfe, 0xff];
export const INTERESTING_U32 = [
  0, 1, 2, 3, 4, 8, 9, 12, 13, 15, 16, 17, 255, 256, 0xffff, 0x1_0000, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe,
  0xffff_ffff,
];

function setU32(p: Uint8Array, at: number, v: number): void {
  if (at + 4 > p.length) return;
  p[at] = v >>> 24;
  p[at + 1] = (v >>> 16) & 0xff;
  p[at + 2] = (v >>> 8) & 0xff;
  p[at + 3] = v & 0xff;
}

/** One fuzz input: 30 % random bytes, 70 % a mutated valid batch. */
export function makeBatchInput(rand: () => number, corpus: readonly BatchSeed[]): Uint8Array {
  const pick = (n: number) => rand() % n;
  if (pick(10) < 3) {
    const p = new Uint8Array(pick(301));
    for (let i = 0; i < p.length; i++) p[i] = pick(256);
    // A quarter of the purely random inputs keep their random version byte (almost always
    // UnsupportedVersion); the rest get past the version check to reach the record decoder.
    if (p.length > 0 && pick(4) !== 0) p[0] = 2;
    return p;
  }
  const seed = corpus[pick(corpus.length)]!;
  let p: Uint8Array = seed.bytes.slice();
  const mutations = 1 + pick(3);
  for (let m = 0; m < mutations; m++) {
    const rec = seed.offsets.length > 0 ? seed.offsets[pick(seed.offsets.length)]! : 16;
    switch (pick(12)) {
      case 0: // bit flip
        if (p.length) {
          const at = pick(p.length);
          p[at] = p[at]! ^ (1 << pick(8));
        }
        break;
      case 1: // byte overwrite
        if (p.length) p[pick(p.length)] = pick(2) ? pick(256) : INTERESTING_U8[pick(INTERESTING_U8.length)]!;
        break;
      case 2: // truncation
        p = p.slice(0, pick(p.length + 1));
        break;
      case 3: {
        // extension
        const extra = new Uint8Array(1 + pick(32));
        for (let i = 0; i < extra.length; i++) extra[i] = pick(256);
        p = concat(p, extra);
        break;
      }
      case 4: // record_count tampering
        if (p.length >= 4) {
          const count = (p[2]! << 8) | p[3]!;
          const v = [0, 1, 0xffff, count + 1, count - 1, pick(0x1_0000)][pick(6)]! & 0xffff;
          p[2] = v >>> 8;
          p[3] = v & 0xff;
        }
        break;
      case 5:
      case 6: {
        // body-length tampering on one record
        const len =
          rec + 13 <= p.length
            ? ((p[rec + 9]! << 24) | (p[rec + 10]! << 16) | (p[rec + 11]! << 8) | p[rec + 12]!) >>> 0
            : 0;
        const choices = [
          len + 1,
          len - 1,
          p.length - rec - 13,
          p.length - rec - 12,
          rand(),
          INTERESTING_U32[pick(INTERESTING_U32.length)]!,
        ];
        setU32(p, rec + 9, choices[pick(choices.length)]! >>> 0);
        break;
      }
      case 7: // record type tampering
        if (rec < p.length) p[rec] = pick(2) ? pick(8) : pick(256);
        break;
      case 8: {
        // duplicate a record's bytes (count now lies)
        const next = seed.offsets.find((o) => o > rec) ?? p.length;
        if (rec < p.length) p = concat(p.subarray(0, next), p.subarray(rec, next), p.subarray(next));
        break;
      }
      case 9: {
        // close reason / lifecycle action byte (the last body byte of a record)
        const next = seed.offsets.find((o) => o > rec) ?? seed.bytes.length;
        if (next - 1 < p.length && next - 1 > rec + 12) p[next - 1] = INTERESTING_U8[pick(INTERESTING_U8.length)]!;
        break;
      }
      case 10: // version byte
        if (p.length) p[0] = INTERESTING_U8[pick(INTERESTING_U8.length)]!;
        break;
      default: // several random overwrites in the record area
        for (let k = 0; k < 4 && p.length > 16; k++) p[16 + pick(p.length - 16)] = pick(256);
    }
  }
  return p;
}
