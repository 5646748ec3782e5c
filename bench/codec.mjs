#!/usr/bin/env node
// Codec micro-benchmark: ns per ~64-byte Data record through the lanemux wire codec.
//
//   npx tsc -p tsconfig.build.json && node bench/codec.mjs
//
// Cases (each: warm-up, then 5 timed runs; the table shows the median, min and max ns/record):
//   encode appendData        pre-encoded Item(token) body copied into the batch
//   encode appendItemString  Item(~40-char token): msgpack + UTF-8 written straight into the batch
//   encode appendItemBytes   Item(50 bytes): msgpack bin written straight into the batch
//   decode BatchReader       next() + body() over a batch of ~900 records
//   decodeFrame Item(str)    the Item(string) fast path, per frame (and decodeFrameInto, used by ingress)
//   decodeFrameAt Item(str)  the mux ingress path over a batch: 40-char tokens, and LLM-sized ones (1–8 characters)
//   @msgpack/msgpack         encode({Item: token}) per record (and decode), for comparison
// Decoder fuzz throughput is printed by test/wire/fuzz.test.ts.
import { BatchEncoder, BatchReader, decodeFrame, decodeFrameInto, encodeFrame, slotId } from '../dist/wire/index.js';
import { decodeFrameAt } from '../dist/wire/frame.js';
import { Encoder, decode as msgpackDecode, encode as msgpackEncode } from '@msgpack/msgpack';

const RUNS = 5;
const RUN_MS = Number(process.env.BENCH_RUN_MS ?? 250);
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 300);
const RECORDS_PER_BATCH = 900;
const TOKEN_CHARS = 40;
const BYTES_LEN = 50;

// 1,024 distinct 40-character ASCII tokens (flat strings, as a tokenizer would hand them over).
const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?-_';
let state = 0x2545f491;
const rnd = () => {
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  return state >>> 0;
};
const tokens = Array.from({ length: 1024 }, () =>
  Array.from({ length: TOKEN_CHARS }, () => alphabet[rnd() % alphabet.length]).join(''),
);
const byteItems = Array.from({ length: 1024 }, () => Uint8Array.from({ length: BYTES_LEN }, () => rnd() & 0xff));
const bodies = tokens.map((t) => encodeFrame({ kind: 'Item', value: t }));
const slots = Array.from({ length: 256 }, (_, i) => slotId(i, 1));

let sink = 0;

/** Time `fn(batchRecords)` repeatedly for ~RUN_MS; returns ns per record. */
function measure(fn) {
  let records = 0;
  const t0 = process.hrtime.bigint();
  const deadline = t0 + BigInt(RUN_MS) * 1_000_000n;
  let now = t0;
  do {
    records += fn();
    now = process.hrtime.bigint();
  } while (now < deadline);
  return Number(now - t0) / records;
}

function bench(name, recordBytes, fn) {
  const warmEnd = performance.now() + WARMUP_MS;
  while (performance.now() < warmEnd) fn();
  const samples = [];
  for (let r = 0; r < RUNS; r++) samples.push(measure(fn));
  samples.sort((a, b) => a - b);
  return { name, recordBytes, median: samples[Math.floor(RUNS / 2)], min: samples[0], max: samples[RUNS - 1] };
}

const enc = new BatchEncoder({ maxBytes: 96 * 1024 }); // 900 × 71-byte records exceed the 60 KiB default
let k = 0;

function encodeData() {
  enc.begin(1n, k);
  for (let i = 0; i < RECORDS_PER_BATCH; i++) enc.appendData(slots[i & 255], i, bodies[(k + i) & 1023]);
  sink += enc.finish().byteLength;
  k++;
  return RECORDS_PER_BATCH;
}

function encodeItemString() {
  enc.begin(1n, k);
  for (let i = 0; i < RECORDS_PER_BATCH; i++) enc.appendItemString(slots[i & 255], i, tokens[(k + i) & 1023]);
  sink += enc.finish().byteLength;
  k++;
  return RECORDS_PER_BATCH;
}

function encodeItemBytes() {
  enc.begin(1n, k);
  for (let i = 0; i < RECORDS_PER_BATCH; i++) enc.appendItemBytes(slots[i & 255], i, byteItems[(k + i) & 1023]);
  sink += enc.finish().byteLength;
  k++;
  return RECORDS_PER_BATCH;
}

// A fixed batch of 900 Item(token) records for the decode cases.
const fixed = new BatchEncoder();
fixed.begin(7n, 1);
for (let i = 0; i < RECORDS_PER_BATCH; i++) fixed.appendItemString(slots[i & 255], i, tokens[i & 1023]);
const batch = fixed.finish().slice();
const reader = new BatchReader();
const batchBodies = [];
reader.reset(batch);
while (reader.next()) batchBodies.push(reader.body());
if (batchBodies.length !== RECORDS_PER_BATCH || reader.error) throw new Error('bench batch did not decode');
for (let i = 0; i < 1024; i++) {
  const f = decodeFrame(bodies[i]);
  if (f.kind !== 'Item' || f.value !== tokens[i]) throw new Error('decodeFrame round trip failed');
}

function decodeReader() {
  reader.reset(batch);
  let n = 0;
  while (reader.next()) {
    sink += reader.body().byteLength + reader.slot;
    n++;
  }
  return n;
}

function decodeFrames() {
  for (let i = 0; i < RECORDS_PER_BATCH; i++) sink += decodeFrame(batchBodies[i]).value.length;
  return RECORDS_PER_BATCH;
}

const scratchFrame = { kind: 0, value: undefined, terminal: false };
function decodeFramesInto() {
  for (let i = 0; i < RECORDS_PER_BATCH; i++) {
    decodeFrameInto(batchBodies[i], scratchFrame);
    sink += scratchFrame.value.length;
  }
  return RECORDS_PER_BATCH;
}

// A batch of LLM-sized tokens (1–8 characters, as a tokenizer's pieces of English text are).
const words = [
  ' the',
  ' of',
  'ing',
  ' and',
  ' a',
  ' to',
  'ed',
  ' model',
  ' is',
  ',',
  ' token',
  's',
  ' in',
  ' it',
  '.',
  ' ça',
];
const shortBatch = (() => {
  const enc = new BatchEncoder();
  enc.begin(1n, 1);
  for (let i = 0; i < RECORDS_PER_BATCH; i++) enc.appendItemString(slots[i & 255], 1, words[i % words.length]);
  return enc.finish().slice();
})();
const BATCH_HEADER_LEN = 16;
const shortRecord = Math.round((shortBatch.byteLength - BATCH_HEADER_LEN) / RECORDS_PER_BATCH);

/** The mux ingress path: each record's body decoded where it lies in the batch. */
function decodeAt(payload) {
  return () => {
    reader.reset(payload);
    let n = 0;
    while (reader.next()) {
      decodeFrameAt(reader.payload, reader.bodyOffset, reader.bodyOffset + reader.bodyLength, scratchFrame);
      sink += scratchFrame.value.length;
      n++;
    }
    return n;
  };
}

function msgpackEncodeFresh() {
  for (let i = 0; i < RECORDS_PER_BATCH; i++) sink += msgpackEncode({ Item: tokens[(k + i) & 1023] }).byteLength;
  k++;
  return RECORDS_PER_BATCH;
}

const reusable = new Encoder();
function msgpackEncodeReused() {
  for (let i = 0; i < RECORDS_PER_BATCH; i++) sink += reusable.encode({ Item: tokens[(k + i) & 1023] }).byteLength;
  k++;
  return RECORDS_PER_BATCH;
}

function msgpackDecodeFrames() {
  for (let i = 0; i < RECORDS_PER_BATCH; i++) sink += msgpackDecode(batchBodies[i]).Item.length;
  return RECORDS_PER_BATCH;
}

const strRecord = 13 + bodies[0].byteLength;
const bytesRecord = 13 + 6 + 2 + BYTES_LEN;
const rows = [
  bench('encode appendData (pre-encoded Item body)', strRecord, encodeData),
  bench(`encode appendItemString (${TOKEN_CHARS}-char token)`, strRecord, encodeItemString),
  bench(`encode appendItemBytes (${BYTES_LEN} B)`, bytesRecord, encodeItemBytes),
  bench(`decode BatchReader next()+body() (${RECORDS_PER_BATCH}/batch)`, strRecord, decodeReader),
  bench('decodeFrame Item(string) fast path', strRecord - 13, decodeFrames),
  bench('decodeFrameInto Item(string) (per-stream path)', strRecord - 13, decodeFramesInto),
  bench(`decodeFrameAt Item(${TOKEN_CHARS}-char string) (mux ingress)`, strRecord, decodeAt(batch)),
  bench('decodeFrameAt Item(1–8 char string) (mux ingress)', shortRecord, decodeAt(shortBatch)),
  bench('@msgpack/msgpack encode({Item: token})', strRecord - 13, msgpackEncodeFresh),
  bench('@msgpack/msgpack Encoder#encode reused', strRecord - 13, msgpackEncodeReused),
  bench('@msgpack/msgpack decode(Item body)', strRecord - 13, msgpackDecodeFrames),
];

const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);
console.log(
  `lanemux codec micro-benchmark — node ${process.version}, ${RUNS} runs × ${RUN_MS} ms after ${WARMUP_MS} ms warm-up, median ns/record`,
);
console.log(
  `${pad('case', 52)} ${lpad('bytes', 6)} ${lpad('median', 9)} ${lpad('min', 9)} ${lpad('max', 9)} ${lpad('M rec/s', 9)}`,
);
console.log('-'.repeat(52 + 6 + 9 * 4 + 4));
for (const r of rows) {
  console.log(
    `${pad(r.name, 52)} ${lpad(r.recordBytes, 6)} ${lpad(r.median.toFixed(1), 9)} ${lpad(r.min.toFixed(1), 9)} ${lpad(r.max.toFixed(1), 9)} ${lpad((1e3 / r.median).toFixed(2), 9)}`,
  );
}
console.log(
  `(bytes = encoded record size incl. the 13-byte header for batch cases, frame body size for frame cases; sink ${sink % 10})`,
);
