/**
 * The decoders `npm run fuzz` drives, each as the boundary that meets peer bytes: its valid
 * encodings (the seeds mutations start from), how one input is decoded, which error codes it may
 * throw (docs/protocol.md), and how much one input may allocate. `run` returns a problem (an
 * invariant broken without a throw) or null; what it throws is judged by the harness.
 */
import { DecodeError as MsgpackDecodeError } from '@msgpack/msgpack';
import { LanemuxError } from '../../src/errors.ts';
import { decodeErrorBody, decodeName } from '../../src/messenger/envelope.ts';
import {
  anchorRefSchema,
  attachOk,
  attachRequestSchema,
  attachResponseSchema,
  mpscAttachOk,
  mpscAttachResponseSchema,
  mpscCancelRequestSchema,
  mpscDetachRequestSchema,
  u128,
} from '../../src/stream/attach-messages.ts';
import { decodeDrainNotice, encodeDrainNotice } from '../../src/stream/drain-notice.ts';
import { formatHandle, parseHandle, workerKey } from '../../src/stream/handle.ts';
import type { NodeState } from '../../src/stream/node-state.ts';
import { answerReattach } from '../../src/stream/reattach.ts';
import { decodeFailure, encodeFailure } from '../../src/stream/call-envelope.ts';
import { readCall } from '../../src/stream/serve.ts';
import { encodeTicket, parseTicket } from '../../src/stream/ticket.ts';
import { TransportError } from '../../src/transport/errors.ts';
import { FrameDecoder } from '../../src/transport/frame.ts';
import { IncompleteFramePool } from '../../src/transport/frame-pool.ts';
import { decodeGoaway, decodeHello, encodeGoaway, encodeHello } from '../../src/transport/hello.ts';
import { PROTOCOL_VERSION } from '../../src/transport/port.ts';
import type { Runtime } from '../../src/runtime/runtime.ts';
import { fromBase64Url, toBase64Url } from '../../src/wire/base64url.ts';
import { BatchReader, DecodeError, decodeBatch } from '../../src/wire/index.ts';
import { FrameKind, decodeFrame, decodeFrameAt, decodeFrameInto, encodeFrame } from '../../src/wire/frame.ts';
import type { DecodedFrame, StreamFrame } from '../../src/wire/frame.ts';
import { decodeBounded, encodeShared } from '../../src/wire/msgpack.ts';
import { oracleDecode } from '../wire/helpers.ts';
import { type BatchSeed, buildBatchCorpus, makeBatchInput } from './batch-mutate.ts';
import { MAX_INPUT, type Rand, mutateSeed } from './mutate.ts';

/** One decoder under fuzz. */
export interface Target {
  readonly name: string;
  /** What it decodes, for `--list`. */
  readonly what: string;
  /** Codes it may throw (a thrown LanemuxError with any other code, or any other throw, is an escape). */
  readonly codes: ReadonlySet<string>;
  /** Most bytes one construction may ask for while decoding an input of `n` bytes. */
  allocBound(n: number): number;
  /** Build the valid encodings (once per run, from the run's PRNG). */
  prepare(rand: Rand): void;
  /** One input: a mutated valid encoding or random bytes. */
  input(rand: Rand): Uint8Array;
  /** Decode one input; a broken invariant is returned, a refusal thrown. */
  run(input: Uint8Array): string | null;
}

const NONE: ReadonlySet<string> = new Set();
const latin1 = (b: Uint8Array): string => String.fromCharCode.apply(null, b as unknown as number[]);
const utf8 = new TextEncoder();
const utf8Lenient = new TextDecoder();
const lenient = (n: number): number => 1024 + 4 * n;

/** A target whose inputs mutate `seeds()` with the generic MessagePack-aware mutator. */
function seeded(
  t: Omit<Target, 'prepare' | 'input' | 'allocBound'> & {
    seeds(): Uint8Array[];
    allocBound?: (n: number) => number;
  },
): Target {
  let seeds: Uint8Array[] = [];
  return {
    name: t.name,
    what: t.what,
    codes: t.codes,
    allocBound: t.allocBound ?? lenient,
    prepare() {
      seeds = t.seeds().map((s) => s.slice(0, MAX_INPUT));
    },
    input: (rand) => mutateSeed(rand, seeds),
    run: t.run,
  };
}

// ───────────── the messenger's body decode, as the messenger does it ─────────────

/**
 * A request body as the messenger decodes it (unary.ts): `decodeBounded`, whose RangeError and
 * MessagePack DecodeError the messenger answers with ERR_MALFORMED_ENVELOPE. Any other throw from it
 * (a TypeError, a stack overflow) is a decoder bug the messenger would only hide: it propagates.
 */
function messengerBody(input: Uint8Array): unknown {
  try {
    return decodeBounded(input);
  } catch (e) {
    const expected = e instanceof MsgpackDecodeError || (e instanceof RangeError && !/call stack/i.test(e.message));
    if (!expected) throw e;
    throw new TransportError('ERR_MALFORMED_ENVELOPE', `body is not valid MessagePack: ${(e as Error).message}`);
  }
}

/** A schema's safeParse must never throw; a failure is a refusal the handler answers. */
function parses(p: { safeParse(v: unknown): { success: boolean } }, input: Uint8Array): string | null {
  p.safeParse(messengerBody(input));
  return null;
}

const MALFORMED = new Set(['ERR_MALFORMED_ENVELOPE']);
const packed = (v: unknown): Uint8Array => encodeShared(v).slice();
const H1 = u128(0x0123_4567_89ab_cdefn, 0xfedc_ba98_7654_3210n);
const H2 = u128(0x1n, 0x8000_0000_0000_0001n);

// ───────────── batch ─────────────

let batchSeeds: BatchSeed[] = [];
const reader = new BatchReader();

const batch: Target = {
  name: 'batch',
  what: 'mux batch decoder (decodeBatch, BatchReader) against the spec oracle',
  codes: NONE,
  allocBound: (n) => n,
  prepare(rand) {
    batchSeeds = buildBatchCorpus(rand);
  },
  input: (rand) => makeBatchInput(rand, batchSeeds),
  run(input) {
    const b = decodeBatch(input);
    if (b.error !== null && !(b.error instanceof DecodeError)) return 'batch error is not a DecodeError';
    const o = oracleDecode(input);
    if (b.records.length !== o.records.length || (b.error?.kind ?? null) !== (o.error?.kind ?? null))
      return `decodeBatch ${b.records.length} records/${b.error?.kind ?? 'ok'}, oracle ${o.records.length}/${o.error?.kind ?? 'ok'}`;
    reader.reset(input);
    let n = 0;
    while (reader.next()) n++;
    if (n !== b.records.length || (reader.error?.kind ?? null) !== (b.error?.kind ?? null))
      return `BatchReader ${n} records/${reader.error?.kind ?? 'ok'}, decodeBatch ${b.records.length}`;
    return null;
  },
};

// ───────────── transport frames ─────────────

/** A runtime whose timers never fire: the harness only counts that every one is cleared. */
class CountingRuntime implements Runtime {
  live = 0;
  now = (): number => 0;
  setTimer = (): unknown => {
    this.live++;
    return this;
  };
  clearTimer = (): void => {
    this.live--;
  };
  macrotask = (fn: () => void): void => fn();
  randomBytes = (out: Uint8Array): void => void out.fill(7);
  env = (): undefined => undefined;
}

const FRAME_LIMIT = 1024;

/** Feed `input` to a FrameDecoder in chunks of `step`, pausing after every third frame. */
function feedFrames(input: Uint8Array, step: number): { frames: number; bytes: number; code: string; leak: string } {
  const rt = new CountingRuntime();
  const pool = new IncompleteFramePool(1 << 20);
  const d = new FrameDecoder(FRAME_LIMIT, 'fuzz', {
    policy: { pool, largeFrameBytes: 256, deadlineMs: 1000 },
    runtime: rt,
  });
  let frames = 0;
  let bytes = 0;
  const onFrame = (m: Uint8Array): boolean => {
    frames++;
    bytes += m.byteLength;
    return frames % 3 !== 0;
  };
  let error: TransportError | undefined;
  for (let off = 0; off < input.length && error === undefined; off += step) {
    error = d.push(input.subarray(off, off + step), onFrame);
    while (error === undefined && d.paused) error = d.resume(onFrame);
  }
  d.stop();
  const leak = pool.held !== 0 ? `${pool.held} pool bytes held after stop` : rt.live !== 0 ? 'a timer left armed' : '';
  return { frames, bytes, code: error?.code ?? '', leak };
}

const FRAME_CODES = new Set(['ERR_FRAME_TOO_LARGE', 'ERR_FRAME_DEADLINE']);

function lp(...messages: Uint8Array[]): Uint8Array {
  const parts: number[] = [];
  for (const m of messages)
    parts.push(m.length >>> 24, (m.length >>> 16) & 0xff, (m.length >>> 8) & 0xff, m.length & 0xff, ...m);
  return Uint8Array.from(parts);
}

const frame = seeded({
  name: 'frame',
  what: 'length-prefixed frame decoder (FrameDecoder): whole vs split chunks, pause/resume, pool and timers released',
  codes: NONE,
  allocBound: () => 4096,
  seeds: () => [
    lp(Uint8Array.of(1, 2, 3)),
    lp(new Uint8Array(0), Uint8Array.of(0xf0), new Uint8Array(300).fill(9)),
    lp(new Uint8Array(FRAME_LIMIT).fill(1), Uint8Array.of(5)),
    lp(...Array.from({ length: 12 }, (_, i) => new Uint8Array(i * 7).fill(i))),
    Uint8Array.of(0, 0, 4, 1, 0xaa),
  ],
  run(input) {
    const whole = feedFrames(input, Math.max(1, input.length));
    const split = feedFrames(input, 1 + (input.length % 13));
    if (whole.leak) return whole.leak;
    if (split.leak) return split.leak;
    if (whole.code && !FRAME_CODES.has(whole.code)) return `push returned ${whole.code}`;
    if (whole.frames !== split.frames || whole.bytes !== split.bytes || whole.code !== split.code)
      return `whole chunk ${whole.frames} frames/${whole.code || 'ok'}, split ${split.frames}/${split.code || 'ok'}`;
    return null;
  },
});

// ───────────── stream frames and data items ─────────────

const STREAM_FRAME_CODES = new Set(['ERR_DESERIALIZATION']);
const fout: DecodedFrame = { kind: 0, value: undefined, terminal: false };
const fout2: DecodedFrame = { kind: 0, value: undefined, terminal: false };

/** decodeFrame (throws) and decodeFrameInto (never throws) must agree on decodable or not. */
function frameBoth(input: Uint8Array): string | null {
  let thrown: unknown;
  try {
    decodeFrame(input);
  } catch (e) {
    thrown = e;
  }
  decodeFrameInto(input, fout);
  if ((thrown === undefined) !== (fout.kind !== FrameKind.Undecodable))
    return `decodeFrame ${thrown === undefined ? 'decoded' : 'threw'} but decodeFrameInto says kind ${fout.kind}`;
  if (thrown !== undefined) throw thrown;
  return null;
}

const frameSeeds = (): Uint8Array[] =>
  (
    [
      { kind: 'Item', value: 'hello' },
      { kind: 'Item', value: 'x'.repeat(40) },
      { kind: 'Item', value: Uint8Array.of(1, 2, 3) },
      { kind: 'Item', value: { a: 1, b: [true, null, 2.5] } },
      { kind: 'SenderError', message: 'boom' },
      { kind: 'TransportError', message: 'gone' },
      { kind: 'Finalized' },
      { kind: 'Dropped' },
      { kind: 'Detached' },
      { kind: 'Heartbeat' },
    ] as StreamFrame[]
  )
    .map(encodeFrame)
    .concat([packed({ Finalized: null }), packed({ Heartbeat: null }), packed('Dropped')]);

const streamFrame = seeded({
  name: 'stream-frame',
  what: 'StreamFrame body decoder (decodeFrame, decodeFrameInto)',
  codes: STREAM_FRAME_CODES,
  seeds: frameSeeds,
  run: frameBoth,
});

const GUARD_BYTES = Uint8Array.of(0xa5, 0x81, 0xc4);
const embedded = new Uint8Array(MAX_INPUT + 8);

function sameValue(a: unknown, b: unknown): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array) return a.length === b.length && a.every((x, i) => x === b[i]);
  if (typeof a === 'object' && a !== null) return typeof b === 'object' && b !== null;
  return Object.is(a, b);
}

const item = seeded({
  name: 'item',
  what: 'data-record items: decodeFrameAt on a range of a larger payload agrees with the body alone',
  codes: STREAM_FRAME_CODES,
  seeds: () =>
    [
      '',
      'é漢字🙂',
      Uint8Array.of(),
      new Uint8Array(70).fill(3),
      [1, -1, 127, -33, 0x1_0000_0000, -0x8000_0000, 2 ** 53 - 1, 1.5, Number.MAX_VALUE],
      { nested: { deep: [[[{ k: 'v' }]]] }, n: null, t: true },
      [9007199254740993n, -9007199254740993n, 0xffff_ffff_ffff_ffffn],
      { 1: 'numeric key', s: 'x'.repeat(300) },
      Array.from({ length: 20 }, (_, i) => i),
    ].map((value) => encodeFrame({ kind: 'Item', value })),
  run(input) {
    const problem = frameBoth(input);
    if (problem !== null) return problem;
    // The same bytes inside a larger buffer, with bytes either side that would change the decode.
    embedded.set(GUARD_BYTES, 0);
    embedded.set(input, 3);
    embedded.set(GUARD_BYTES, 3 + input.length);
    decodeFrameAt(embedded, 3, 3 + input.length, fout2);
    if (fout2.kind !== fout.kind || fout2.terminal !== fout.terminal || !sameValue(fout2.value, fout.value))
      return `decodeFrameAt kind ${fout2.kind}, the body alone ${fout.kind}`;
    return null;
  },
});

// ───────────── HELLO and GOAWAY ─────────────

const W = '0123456789abcdef';
const hello = seeded({
  name: 'hello',
  what: 'HELLO (decodeHello): never throws; ERR_MALFORMED_ENVELOPE or ERR_VERSION_MISMATCH',
  codes: NONE,
  seeds: () => [
    encodeHello({
      protocolVersion: PROTOCOL_VERSION,
      worker: W,
      instance: 'i-1',
      session: 7,
      lane: 0,
      lanes: 4,
      maxMessageSize: 1 << 20,
      keys: ['messenger-mux-v2', 'lanemux-drain-v1'],
    }),
    encodeHello({
      protocolVersion: PROTOCOL_VERSION,
      worker: 'fedcba9876543210',
      instance: 'x'.repeat(64),
      session: 2 ** 40,
      lane: 3,
      lanes: 16,
      maxMessageSize: 256,
      keys: [],
      address: 'tcp://127.0.0.1:9000',
      window: 0xffff_ffff,
      credential: 'secret',
      claim: '0123456789abcdef0123456789abcdef',
    }),
  ],
  run(input) {
    const r = decodeHello(input, PROTOCOL_VERSION);
    if (r instanceof LanemuxError && r.code !== 'ERR_MALFORMED_ENVELOPE' && r.code !== 'ERR_VERSION_MISMATCH')
      return `decodeHello returned ${r.code}`;
    return null;
  },
});

const goaway = seeded({
  name: 'goaway',
  what: 'GOAWAY (decodeGoaway): never throws, always a LanemuxError',
  codes: NONE,
  seeds: () => [
    encodeGoaway(new TransportError('ERR_CLOSED', 'bye')),
    encodeGoaway(new TransportError('ERR_FRAME_TOO_LARGE', 'm'.repeat(1024))),
  ],
  run(input) {
    return decodeGoaway(input) instanceof LanemuxError ? null : 'decodeGoaway returned a non-LanemuxError';
  },
});

// ───────────── control bodies ─────────────

const control = (
  name: string,
  what: string,
  p: { safeParse(v: unknown): { success: boolean } },
  seeds: () => unknown[],
): Target => seeded({ name, what, codes: MALFORMED, seeds: () => seeds().map(packed), run: (i) => parses(p, i) });

const okBody = { key: 'messenger-mux-v2', heartbeatMs: 5000, session: 0xabcn, credit: 64, budget: 1 << 20, lane: 2 };

const attach = control('attach', '_anchor_attach request (fast path, then zod)', attachRequestSchema, () => [
  { handle: H1 },
  {
    handle: H1,
    session_id: '0x1f',
    stream_cancel_handle: H2,
    supported_transport_keys: ['messenger-mux-v2', 'tcp-stream'],
    lane_key: '0xffffffffffffffff',
  },
  { handle: H2, resume: { session: '0x2', sent: 10, from: 3 }, unknown_field: [1, 2] },
]);
const attachAnswer = control('attach-answer', '_anchor_attach answer (Ok fast path, Err)', attachResponseSchema, () => [
  attachOk(okBody),
  attachOk({ ...okBody, lane: 0, endpoint: 'tcp://h:1', resumeOffset: 12 }),
  { Err: { reason: 'draining', code: 'ERR_DRAINING', resume: 'unknown' } },
]);
const mpscAnswer = control('mpsc-attach-answer', '_mpsc_anchor_attach answer', mpscAttachResponseSchema, () => [
  mpscAttachOk({ ...okBody, senderId: 7 }),
  { Err: { reason: 'no' } },
]);
const detach = control('detach', '_anchor_detach / _stream_cancel body', anchorRefSchema, () => [
  { handle: H1, session_id: '0x10' },
  { handle: H2 },
]);
const mpscDetach = control('mpsc-detach', '_mpsc_anchor_detach body', mpscDetachRequestSchema, () => [
  { handle: H1, sender_id: '0x1' },
  { handle: H2, sender_id: '0xffffffff' },
]);
const mpscCancel = control('mpsc-cancel', '_mpsc_anchor_cancel body', mpscCancelRequestSchema, () => [{ handle: H1 }]);

// The producer's side of `_stream_reattach` up to the history lookup (which finds no stream).
const REATTACH_WORKER = 0x0123_4567_89ab_cdefn;
const fakeState = {
  resume: {
    history: { bytesPerStream: 1024 },
    lingerMs: 1000,
    negotiated: () => true,
    byToken: () => undefined,
  },
  messenger: { peer: () => ({}) },
  metrics: { anchorOperation: () => undefined },
} as unknown as NodeState;
const ticketFor = (anchor: bigint, key = 'messenger-mux-v2', credit = 64): string =>
  encodeTicket({
    streaming_transport_key: key,
    heartbeat_interval_ms: 5000,
    routing_session_id: 0x77n,
    initial_credit: credit,
    slot_byte_budget: 65_536,
    lane: 1,
    anchor_id: anchor,
  });

const reattach = seeded({
  name: 'reattach',
  what: '_stream_reattach request (answerReattach: schema, handle, ticket, refusals)',
  codes: MALFORMED,
  seeds: () =>
    [
      {
        token: 'a'.repeat(32),
        offset: 5,
        handle: formatHandle({ workerId: REATTACH_WORKER, localId: 0x42n }),
        ticket: ticketFor(0x42n),
      },
      { token: 't', offset: 0, handle: 'lmx1.' + '0'.repeat(32), ticket: ticketFor(1n, 'tcp-stream', 0) },
    ].map(packed),
  run(input) {
    const answer = answerReattach(fakeState, workerKey(REATTACH_WORKER), messengerBody(input));
    return typeof answer === 'object' && answer !== null ? null : 'answerReattach returned no answer';
  },
});

// The server's side of a call (`_call.<method>`, docs/protocol.md §8.6) up to the open, and the
// client's reading of a handler's failure record.
const CALLER = workerKey(REATTACH_WORKER);
const call = seeded({
  name: 'call',
  what: '_call.<method> request envelope (readCall: version, handle of the caller, ticket, request bytes)',
  codes: new Set(['ERR_MALFORMED_ENVELOPE', 'ERR_INVALID_REQUEST', 'ERR_INVALID_HANDLE']),
  seeds: () =>
    [
      { v: 1, h: formatHandle({ workerId: REATTACH_WORKER, localId: 0x42n }), t: ticketFor(0x42n), r: packed('hi') },
      { v: 1, h: formatHandle({ workerId: REATTACH_WORKER, localId: 1n }), r: packed({ prompt: 'x', n: [1, 2] }) },
    ].map(packed),
  run(input) {
    const r = readCall('m', CALLER, messengerBody(input));
    return r.h.startsWith('lmx1.') ? null : 'readCall accepted a handle that is not one';
  },
});
const callFailure = seeded({
  name: 'call-failure',
  what: "a handler's failure record (decodeFailure): never throws, always a bounded ERR_ code",
  codes: NONE,
  seeds: () =>
    [encodeFailure(new Error('boom')), encodeFailure(new LanemuxError('ERR_QUOTA', 'q'))].map((s) => utf8.encode(s)),
  run(input) {
    const e = decodeFailure(utf8Lenient.decode(input), 'm');
    if (e !== null && (!/^ERR_[A-Z0-9_]{1,60}$/.test(e.code) || e.message.length > 4100))
      return `decodeFailure gave code ${JSON.stringify(e.code.slice(0, 80))}, message of ${e.message.length}`;
    return null;
  },
});

const drain = seeded({
  name: 'drain',
  what: 'draining notice payload (decodeDrainNotice): never throws',
  codes: NONE,
  allocBound: () => 64,
  seeds: () => [encodeDrainNotice(0, 30_000), encodeDrainNotice(1, 0), encodeDrainNotice(0, 0xffff_ffff)],
  run(input) {
    const r = decodeDrainNotice(input);
    if (r !== null && (input.length !== 5 || r.phase > 1)) return 'decodeDrainNotice accepted a bad payload';
    return null;
  },
});

const envelope = seeded({
  name: 'envelope',
  what: 'messenger envelope pieces: handler names (decodeName), error/notice bodies (decodeErrorBody)',
  codes: NONE,
  seeds: () => [
    packed({ code: 'ERR_UNKNOWN_HANDLER', message: 'no handler', handler: '_anchor_attach' }),
    packed({ code: 'ERR_BUSY', message: 'busy', retryable: true }),
    utf8.encode('_stream_drain'),
    utf8.encode('名前'),
  ],
  run(input) {
    decodeName(input, 0, input.length);
    decodeErrorBody(input);
    return null;
  },
});

// ───────────── tickets and handles ─────────────

const ticket = seeded({
  name: 'ticket',
  what: 'zero-RTT ticket (parseTicket) from MessagePack bytes (base64url-encoded) and as raw text',
  codes: new Set(['ERR_INVALID_TICKET']),
  seeds: () =>
    [ticketFor(0x42n), ticketFor(0xffff_ffff_ffff_ffffn, 'k'.repeat(64), 0xffff_ffff)].map((t) =>
      fromBase64Url(t, new Uint8Array(1024)).slice(),
    ),
  run(input) {
    let thrown: unknown;
    try {
      parseTicket(latin1(input.subarray(0, 1100)));
    } catch (e) {
      thrown = e;
    }
    if (thrown !== undefined && !(thrown instanceof LanemuxError && thrown.code === 'ERR_INVALID_TICKET')) throw thrown;
    parseTicket(toBase64Url(input));
    return null;
  },
});

const handle = seeded({
  name: 'handle',
  what: 'anchor handle text (parseHandle), as Latin-1 and as UTF-8',
  codes: new Set(['ERR_INVALID_HANDLE']),
  seeds: () => [
    utf8.encode(formatHandle({ workerId: REATTACH_WORKER, localId: 0x42n })),
    utf8.encode(formatHandle({ workerId: 0n, localId: 0xffff_ffff_ffff_ffffn })),
  ],
  run(input) {
    let refusal: unknown;
    for (const text of [latin1(input), utf8Lenient.decode(input)]) {
      try {
        const h = parseHandle(text);
        if (formatHandle(h) !== text) return `parseHandle accepted ${JSON.stringify(text)}, which formats differently`;
      } catch (e) {
        if (!(e instanceof LanemuxError && e.code === 'ERR_INVALID_HANDLE')) throw e;
        refusal = e;
      }
    }
    if (refusal !== undefined) throw refusal;
    return null;
  },
});

/** Every target, in a fixed order (the order inputs are dealt in). */
export const TARGETS: readonly Target[] = [
  batch,
  frame,
  streamFrame,
  item,
  hello,
  goaway,
  attach,
  attachAnswer,
  mpscAnswer,
  detach,
  mpscDetach,
  mpscCancel,
  reattach,
  call,
  callFailure,
  drain,
  envelope,
  ticket,
  handle,
];

/** The targets named in a comma-separated list (all when undefined). */
export function selectTargets(names: string | undefined): Target[] {
  if (names === undefined || names === '' || names === 'all') return [...TARGETS];
  return names.split(',').map((n) => {
    const t = TARGETS.find((x) => x.name === n.trim());
    if (t === undefined) throw new Error(`unknown target ${n}; known: ${TARGETS.map((x) => x.name).join(', ')}`);
    return t;
  });
}
