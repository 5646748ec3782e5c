/**
 * Control-plane messages of the stream layer (protocol.md §7, §11, §12): the attach request and
 * answer, and the zero-RTT `StreamOpenTicket`. They travel as MessagePack over the messenger's
 * unary requests and are validated with zod/mini at the boundary. 64-bit fields travel as `0x…` hex
 * strings; field names and zero semantics are the reference's. Every map ignores fields it does not
 * know (`z.object`, never `z.strictObject`) while the fields it knows keep their bounds (protocol.md
 * §8); only the `Ok`/`Err` wrapper of an answer is strict, being a variant tag, not a field.
 */
import { Decoder, Encoder } from '@msgpack/msgpack';
import { checkShape, readU32 } from '../wire/msgpack.ts';
import { z } from 'zod/mini';
import { int, parse, parser, str } from '../validate.ts';
import { StreamError } from './errors.ts';

/** Handler names of the stream control plane. */
export const ATTACH_HANDLER = '_anchor_attach';
/** `{ handle, session_id }` from a sender that handed over its Detached: the consumer acknowledges it (protocol.md §8 "Detach"). */
export const DETACH_HANDLER = '_anchor_detach';
export const CANCEL_HANDLER = '_stream_cancel';
/** MPSC attach: the same request and negotiation fields as `_anchor_attach`; the answer adds `sender_id`. */
export const MPSC_ATTACH_HANDLER = '_mpsc_anchor_attach';
/** MPSC detach of one sender: `{ handle, sender_id }`. */
export const MPSC_DETACH_HANDLER = '_mpsc_anchor_detach';
/** MPSC cancel of the whole anchor: `{ handle }`. */
export const MPSC_CANCEL_HANDLER = '_mpsc_anchor_cancel';

/** The per-stream (legacy) transport key. */
export const TCP_STREAM_KEY = 'tcp-stream';

// Bounds shared by the zod schemas and the fast paths below, so the two cannot drift apart.
const U64_RE = /^0x[0-9a-f]{1,16}$/;
const KEY_MAX = 64;
const KEYS_MAX = 16;
const HEARTBEAT_MAX = 86_400_000;
const HEARTBEAT_DEFAULT = 5000;
const CREDIT_MAX = 0xffff_ffff;
const BUDGET_MAX = 2 ** 40;
const LANE_MAX = 15;
const ENDPOINT_MAX = 256;

const u64 = z.pipe(
  z.string().check(z.regex(U64_RE, 'a u64 as 0x-prefixed lower-case hex')),
  z.transform((s) => BigInt(s)),
);
/** `{ hi, lo }` of a u128 handle. */
const u128Schema = z.object({ hi: u64, lo: u64 });

const attachRequest = z.object({
  handle: u128Schema,
  session_id: z.optional(u64),
  stream_cancel_handle: z.optional(u128Schema),
  supported_transport_keys: z._default(z.array(str(KEY_MAX)).check(z.maxLength(KEYS_MAX)), []),
  lane_key: z.optional(u64),
});
/** `_anchor_attach` request. */
export const attachRequestSchema = parser(attachRequest, (input) => readAttachRequestFast(input));
export type AttachRequest = z.output<typeof attachRequest>;

const okSchema = z.object({
  streaming_transport_key: str(KEY_MAX),
  heartbeat_interval_ms: z._default(int(0, HEARTBEAT_MAX), HEARTBEAT_DEFAULT),
  routing_session_id: z._default(u64, 0n),
  initial_credit: z._default(int(0, CREDIT_MAX), 0),
  slot_byte_budget: z._default(int(0, BUDGET_MAX), 0),
  lane: z._default(int(0, LANE_MAX), 0),
  /** lanemux: where the per-stream (legacy) path listens; absent on the mux path. */
  endpoint: z.optional(str(ENDPOINT_MAX)),
});

/** `{ Err: { reason } }`, the refusal arm of both attach answers. */
const errAnswer = z.strictObject({ Err: z.object({ reason: str(1024) }) });

const attachResponse = z.union([z.strictObject({ Ok: okSchema }), errAnswer]);
/** Externally tagged attach answer: `{ Ok: {...} }` or `{ Err: { reason } }`. */
export const attachResponseSchema = parser(attachResponse, (input) => readAttachOkFast(input));
export type AttachResponse = z.output<typeof attachResponse>;
export type AttachOk = z.output<typeof okSchema>;

/** `sender_id`: a u64 on the wire; lanemux allocates small counters, so more than 2^32 is refused. */
const senderIdSchema = u64.check(z.refine((v) => v > 0n && v <= 0xffff_ffffn, 'a sender id in 1..2^32-1'));

const mpscAttachResponse = z.union([z.strictObject({ Ok: z.extend(okSchema, { sender_id: senderIdSchema }) }), errAnswer]);
/** Externally tagged `_mpsc_anchor_attach` answer: the single-sender Ok plus `sender_id`. */
export const mpscAttachResponseSchema = parser(mpscAttachResponse);
export type MpscAttachResponse = z.output<typeof mpscAttachResponse>;

/** `_mpsc_anchor_detach` body. */
export const mpscDetachRequestSchema = parser(z.object({ handle: u128Schema, sender_id: senderIdSchema }));
/** `_mpsc_anchor_cancel` body. */
export const mpscCancelRequestSchema = parser(z.object({ handle: u128Schema }));

/** @internal The zod schemas behind the fast paths, for tests that compare the two. */
export { attachRequest as attachRequestZod, attachResponse as attachResponseZod };

/**
 * Zero-RTT ticket: every field required but `lane` (default 0) and `anchor_id`. `anchor_id` is
 * lanemux's own addition: the local id of the anchor the ticket was issued for, which a producer
 * checks against the handle before it sends anything (a ticket without it, from another
 * implementation, is not checked). Fields this version does not know are ignored (protocol.md §8),
 * within the ticket's size bound.
 */
export const ticketSchema = z.object({
  streaming_transport_key: str(KEY_MAX),
  heartbeat_interval_ms: int(0, HEARTBEAT_MAX),
  routing_session_id: u64,
  initial_credit: int(0, CREDIT_MAX),
  slot_byte_budget: int(0, BUDGET_MAX),
  lane: z._default(int(0, LANE_MAX), 0),
  anchor_id: z.optional(u64),
});
export type StreamOpenTicket = z.output<typeof ticketSchema>;

/** `_anchor_detach` / `_stream_cancel` body. */
export const anchorRefSchema = parser(z.object({ handle: u128Schema, session_id: z.optional(u64) }));

// ───────────── attach fast paths ─────────────
// An attach request and its answer are parsed per attached stream; zod's object machinery was a
// tenth of an attach's CPU. These read the plain well-formed message (a plain object, every field
// of its type and in range) and give up (undefined) on anything else, which zod then parses, so
// refusals and their messages stay zod's (test/stream/attach-fast.test.ts compares the two).

/** A plain object (what the MessagePack decoder makes of a map), as a record. */
function plainObject(v: unknown): Record<string, unknown> | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null ? (v as Record<string, unknown>) : undefined;
}

/** `u64`: undefined when `v` does not pass. */
function u64Fast(v: unknown): bigint | undefined {
  return typeof v === 'string' && U64_RE.test(v) ? BigInt(v) : undefined;
}

/** `int(min, max)`: NaN when `v` does not pass. */
function intFast(v: unknown, min: number, max: number): number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max ? v : NaN;
}

/** `u128Schema` (a non-strict object: other keys are dropped). */
function u128Fast(v: unknown): { hi: bigint; lo: bigint } | undefined {
  const o = plainObject(v);
  if (o === undefined) return undefined;
  const hi = u64Fast(o['hi']);
  const lo = u64Fast(o['lo']);
  return hi === undefined || lo === undefined ? undefined : { hi, lo };
}

/** A fast reader's verdict that the message is not the plain shape: zod parses it instead. */
const GIVE_UP: unique symbol = Symbol('give up');

/**
 * An optional field: `undefined` when absent (not an own or inherited key), its value when `read`
 * accepts it, else {@link GIVE_UP}. A key present with the value `undefined` is left to zod (the
 * MessagePack decoder never makes one).
 */
function optionalField<V>(o: Record<string, unknown>, key: string, read: (v: unknown) => V | undefined): V | undefined | typeof GIVE_UP {
  const v = o[key];
  if (v === undefined) return key in o ? GIVE_UP : undefined;
  const r = read(v);
  return r === undefined ? GIVE_UP : r;
}

/** @internal `attachRequest` for the plain message, else undefined. */
export function readAttachRequestFast(input: unknown): AttachRequest | undefined {
  const o = plainObject(input);
  if (o === undefined) return undefined;
  const handle = u128Fast(o['handle']);
  if (handle === undefined) return undefined;
  const session = optionalField(o, 'session_id', u64Fast);
  const cancel = optionalField(o, 'stream_cancel_handle', u128Fast);
  const laneKey = optionalField(o, 'lane_key', u64Fast);
  if (session === GIVE_UP || cancel === GIVE_UP || laneKey === GIVE_UP) return undefined;
  const out: AttachRequest = { handle, supported_transport_keys: [] };
  if (session !== undefined) out.session_id = session;
  if (cancel !== undefined) out.stream_cancel_handle = cancel;
  if (laneKey !== undefined) out.lane_key = laneKey;
  const keys = o['supported_transport_keys'];
  if (keys !== undefined) {
    if (!Array.isArray(keys) || keys.length > KEYS_MAX) return undefined;
    for (let i = 0; i < keys.length; i++) {
      const k: unknown = keys[i];
      if (typeof k !== 'string' || k.length > KEY_MAX) return undefined;
    }
    out.supported_transport_keys = (keys as string[]).slice();
  }
  return out;
}

/** `okSchema` for the plain answer body, else undefined. */
function readOkFast(input: unknown): AttachOk | undefined {
  const o = plainObject(input);
  if (o === undefined) return undefined;
  const key = o['streaming_transport_key'];
  if (typeof key !== 'string' || key.length > KEY_MAX) return undefined;
  const hb = o['heartbeat_interval_ms'];
  const session = o['routing_session_id'];
  const credit = o['initial_credit'];
  const budget = o['slot_byte_budget'];
  const lane = o['lane'];
  const out: AttachOk = {
    streaming_transport_key: key,
    heartbeat_interval_ms: hb === undefined ? HEARTBEAT_DEFAULT : intFast(hb, 0, HEARTBEAT_MAX),
    routing_session_id: session === undefined ? 0n : (u64Fast(session) ?? -1n),
    initial_credit: credit === undefined ? 0 : intFast(credit, 0, CREDIT_MAX),
    slot_byte_budget: budget === undefined ? 0 : intFast(budget, 0, BUDGET_MAX),
    lane: lane === undefined ? 0 : intFast(lane, 0, LANE_MAX),
  };
  if (Number.isNaN(out.heartbeat_interval_ms) || out.routing_session_id < 0n || Number.isNaN(out.initial_credit) || Number.isNaN(out.slot_byte_budget) || Number.isNaN(out.lane)) {
    return undefined;
  }
  const endpoint = optionalField(o, 'endpoint', (v) => (typeof v === 'string' && v.length <= ENDPOINT_MAX ? v : undefined));
  if (endpoint === GIVE_UP) return undefined;
  if (endpoint !== undefined) out.endpoint = endpoint;
  return out;
}

/** @internal The `{ Ok: {...} }` arm of `attachResponse` (a strict object: `Ok` is its only key), else undefined. */
export function readAttachOkFast(input: unknown): AttachResponse | undefined {
  const o = plainObject(input);
  if (o === undefined) return undefined;
  let keys = 0;
  for (const k in o) if (++keys > 1 || k !== 'Ok') return undefined;
  const ok = readOkFast(o['Ok']);
  return ok === undefined ? undefined : { Ok: ok };
}

const hex = (v: bigint): string => `0x${BigInt.asUintN(64, v).toString(16)}`;

/** Encode an Ok answer with lane omitted when 0 (byte-identical to pre-lanes answers). */
export function attachOk(ok: { key: string; heartbeatMs: number; session: bigint; credit: number; budget: number; lane: number; endpoint?: string }): unknown {
  const body: Record<string, unknown> = {
    streaming_transport_key: ok.key,
    heartbeat_interval_ms: ok.heartbeatMs,
    routing_session_id: hex(ok.session),
    initial_credit: ok.credit,
    slot_byte_budget: ok.budget,
  };
  if (ok.lane !== 0) body['lane'] = ok.lane;
  if (ok.endpoint !== undefined) body['endpoint'] = ok.endpoint;
  return { Ok: body };
}

/** Encode an MPSC Ok answer: {@link attachOk} plus `sender_id`. */
export function mpscAttachOk(ok: Parameters<typeof attachOk>[0] & { senderId: number }): unknown {
  const { senderId, ...rest } = ok;
  const answer = attachOk(rest) as { Ok: Record<string, unknown> };
  answer.Ok['sender_id'] = hex(BigInt(senderId));
  return answer;
}

// One codec each, made on first use: `encode()`/`decode()` build a new one per call (a ticket per stream).
let ticketEncoder: Encoder | undefined;
let ticketDecoder: Decoder | undefined;

/** Serialise a ticket for the application's own envelope: base64url of MessagePack. */
export function encodeTicket(t: StreamOpenTicket): string {
  // A ticket per pre-bind: the usual one is written by hand, byte for byte what the encoder writes.
  const n = writeTicket(t);
  if (n >= 0) return toBase64Url(TICKET_OUT.subarray(0, n));
  const body: Record<string, unknown> = {
    streaming_transport_key: t.streaming_transport_key,
    heartbeat_interval_ms: t.heartbeat_interval_ms,
    routing_session_id: hex(t.routing_session_id),
    initial_credit: t.initial_credit,
    slot_byte_budget: t.slot_byte_budget,
  };
  if (t.lane !== 0) body['lane'] = t.lane;
  if (t.anchor_id !== undefined) body['anchor_id'] = hex(t.anchor_id);
  return toBase64Url((ticketEncoder ??= new Encoder()).encodeSharedRef(body));
}

/** Longest ticket text {@link parseTicket} reads, and the bytes it can hold. */
const TICKET_TEXT_MAX = 1024;
/** Scratch for a decoded ticket: nothing a valid ticket parses to refers to it (strings and numbers only). */
const TICKET_IN = new Uint8Array((TICKET_TEXT_MAX * 3) / 4);

/** Parse a ticket string. Throws `ERR_INVALID_TICKET` naming what is wrong. */
export function parseTicket(text: string): StreamOpenTicket {
  let bytes: Uint8Array;
  try {
    if (typeof text !== 'string' || text.length > TICKET_TEXT_MAX) throw new Error('not a short string');
    bytes = fromBase64Url(text, TICKET_IN);
  } catch (cause) {
    throw new StreamError('ERR_INVALID_TICKET', 'ticket is not base64url MessagePack', { cause });
  }
  return readTicketFast(bytes) ?? parseTicketSlow(bytes);
}

/** The general path: bounded MessagePack decode, then the zod schema (whose messages name the field). */
function parseTicketSlow(bytes: Uint8Array): StreamOpenTicket {
  let raw: unknown;
  try {
    // Refuse containers that declare more items than the bytes hold before the decoder allocates.
    checkShape(bytes);
    raw = (ticketDecoder ??= new Decoder()).decode(bytes);
  } catch (cause) {
    throw new StreamError('ERR_INVALID_TICKET', 'ticket is not base64url MessagePack', { cause });
  }
  const r = parse(ticketSchema, raw);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new StreamError('ERR_INVALID_TICKET', `ticket field ${i.path.join('.') || '(root)'}: ${i.message}`);
  }
  return r.data;
}

// ───────────── the ticket fast path ─────────────
// A ticket is parsed per zero-RTT stream; the decoder plus zod cost several µs of it. The fast path
// reads only the shape lanemux itself writes (a fixmap of the ticket's fields, each at most once,
// ASCII strings, unsigned integers) and gives up (undefined) on anything else (an unknown field
// included), which then takes the general path: whatever the fast path returns, `parseTicketSlow`
// returns the same (test/stream/ticket-fast.test.ts).

/** The ticket's field names in `ticketSchema` order, as the bytes of a MessagePack key. */
const TICKET_KEYS = ['streaming_transport_key', 'heartbeat_interval_ms', 'routing_session_id', 'initial_credit', 'slot_byte_budget', 'lane', 'anchor_id'].map((k) =>
  Uint8Array.from(k, (c) => c.charCodeAt(0)),
);
/** The upper bound of each integer field (`ticketSchema`), by field index; -1 for the string fields. */
const TICKET_MAX = [-1, HEARTBEAT_MAX, -1, CREDIT_MAX, BUDGET_MAX, LANE_MAX, -1];
/** Field index of `anchor_id`. */
const TICKET_ANCHOR = 6;
/** Bits of the fields a ticket must carry (all but `lane`). */
const TICKET_REQUIRED = 0b011111;
/** Cap of `streaming_transport_key` (`str(KEY_MAX)`), in characters (= bytes for ASCII). */
const TRANSPORT_KEY_MAX = KEY_MAX;

/** The last transport key read, and its bytes: nearly every ticket names the same one. */
let lastKey = '';
let lastKeyBytes = new Uint8Array(0);

/** Index of the field whose name is `b[pos, pos+len)`, or -1. */
function ticketField(b: Uint8Array, pos: number, len: number): number {
  for (let f = 0; f < TICKET_KEYS.length; f++) {
    const k = TICKET_KEYS[f]!;
    if (k.length !== len) continue;
    let i = 0;
    while (i < len && b[pos + i] === k[i]) i++;
    if (i === len) return f;
  }
  return -1;
}

/** @internal The ticket in `b` if it has the plain shape, else undefined (never throws). */
export function readTicketFast(b: Uint8Array): StreamOpenTicket | undefined {
  const n = b.length;
  if (n === 0) return undefined;
  const count = b[0]! ^ 0x80;
  // A fixmap of 5 to 7 entries; anything else is left to the general path.
  if (count < 5 || count > 7) return undefined;
  let pos = 1;
  let seen = 0;
  let key = '';
  let session = 0n;
  let heartbeat = 0;
  let credit = 0;
  let budget = 0;
  let lane = 0;
  let anchor: bigint | undefined;
  for (let e = 0; e < count; e++) {
    if (pos >= n) return undefined;
    const kh = b[pos]!;
    if ((kh & 0xe0) !== 0xa0) return undefined;
    const klen = kh & 0x1f;
    pos++;
    if (pos + klen > n) return undefined;
    const f = ticketField(b, pos, klen);
    if (f < 0 || (seen & (1 << f)) !== 0) return undefined;
    seen |= 1 << f;
    pos += klen;
    if (pos >= n) return undefined;
    const h = b[pos]!;
    if (f === 0 || f === 2 || f === TICKET_ANCHOR) {
      // A fixstr or str8 of ASCII.
      let len: number;
      if ((h & 0xe0) === 0xa0) {
        len = h & 0x1f;
        pos++;
      } else if (h === 0xd9 && pos + 1 < n) {
        len = b[pos + 1]!;
        pos += 2;
      } else return undefined;
      if (pos + len > n) return undefined;
      for (let i = pos; i < pos + len; i++) if (b[i]! >= 0x80) return undefined;
      if (f === 0) {
        if (len > TRANSPORT_KEY_MAX) return undefined;
        key = asciiKey(b, pos, len);
      } else {
        const s = readU64Hex(b, pos, len);
        if (s === undefined) return undefined;
        if (f === 2) session = s;
        else anchor = s;
      }
      pos += len;
      continue;
    }
    // An unsigned integer, as the encoder writes one (fixint, uint 8/16/32/64).
    let v: number;
    if (h < 0x80) {
      v = h;
      pos += 1;
    } else if (h === 0xcc && pos + 2 <= n) {
      v = b[pos + 1]!;
      pos += 2;
    } else if (h === 0xcd && pos + 3 <= n) {
      v = (b[pos + 1]! << 8) | b[pos + 2]!;
      pos += 3;
    } else if (h === 0xce && pos + 5 <= n) {
      v = readU32(b, pos + 1);
      pos += 5;
    } else if (h === 0xcf && pos + 9 <= n) {
      // The decoder reads a uint 64 as hi * 2^32 + lo; every bound here is far below 2^53.
      v = readU32(b, pos + 1) * 0x1_0000_0000 + readU32(b, pos + 5);
      pos += 9;
    } else return undefined;
    if (v > TICKET_MAX[f]!) return undefined;
    if (f === 1) heartbeat = v;
    else if (f === 3) credit = v;
    else if (f === 4) budget = v;
    else lane = v;
  }
  if (pos !== n || (seen & TICKET_REQUIRED) !== TICKET_REQUIRED) return undefined;
  const t: StreamOpenTicket = {
    streaming_transport_key: key,
    heartbeat_interval_ms: heartbeat,
    routing_session_id: session,
    initial_credit: credit,
    slot_byte_budget: budget,
    lane,
  };
  if (anchor !== undefined) t.anchor_id = anchor;
  return t;
}


/** `b[pos, pos+len)` (ASCII) as a string, reusing the last one when the bytes match. */
function asciiKey(b: Uint8Array, pos: number, len: number): string {
  if (len === lastKeyBytes.length) {
    let i = 0;
    while (i < len && b[pos + i] === lastKeyBytes[i]) i++;
    if (i === len) return lastKey;
  }
  let s = '';
  for (let i = 0; i < len; i++) s += String.fromCharCode(b[pos + i]!);
  lastKey = s;
  lastKeyBytes = b.slice(pos, pos + len);
  return s;
}

/** `0x` + 1..16 lower-case hex digits (the `u64` schema) as a bigint, else undefined. */
function readU64Hex(b: Uint8Array, pos: number, len: number): bigint | undefined {
  if (len < 3 || len > 18 || b[pos] !== 0x30 || b[pos + 1] !== 0x78) return undefined;
  // Two halves of at most 8 digits each stay exact as numbers.
  let hi = 0;
  let lo = 0;
  const split = Math.max(pos + 2, pos + len - 8);
  for (let i = pos + 2; i < pos + len; i++) {
    const c = b[i]!;
    const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x61 + 10 : -1;
    if (d < 0) return undefined;
    if (i < split) hi = hi * 16 + d;
    else lo = lo * 16 + d;
  }
  return hi === 0 ? BigInt(lo) : (BigInt(hi) << 32n) | BigInt(lo);
}

/** Scratch for a ticket written by hand (at most 253 bytes: a key of KEY_MAX, every integer as a uint 64). */
const TICKET_OUT = new Uint8Array(256);

/** Write position in {@link TICKET_OUT} while {@link writeTicket} runs. */
let wpos = 0;

/**
 * Write `t` into {@link TICKET_OUT} exactly as `Encoder.encode` writes the ticket body (field order,
 * shortest integer and string headers). Returns the length, or -1 when `t` has a value it does not
 * handle (non-ASCII or long key, a value that is not a non-negative safe integer): the encoder does those.
 */
function writeTicket(t: StreamOpenTicket): number {
  const key = t.streaming_transport_key;
  // TICKET_OUT holds the largest ticket with a key of KEY_MAX; a longer key (which parseTicket
  // refuses anyway) takes the encoder, as before, instead of overrunning the scratch.
  if (typeof key !== 'string' || key.length > KEY_MAX) return -1;
  TICKET_OUT[0] = 0x85 + (t.lane !== 0 ? 1 : 0) + (t.anchor_id !== undefined ? 1 : 0);
  wpos = 1;
  putKey(0);
  if (!putAscii(key)) return -1;
  putKey(1);
  if (!putUint(t.heartbeat_interval_ms)) return -1;
  putKey(2);
  putAscii(hex(t.routing_session_id));
  putKey(3);
  if (!putUint(t.initial_credit)) return -1;
  putKey(4);
  if (!putUint(t.slot_byte_budget)) return -1;
  if (t.lane !== 0) {
    putKey(5);
    if (!putUint(t.lane)) return -1;
  }
  if (t.anchor_id !== undefined) {
    putKey(TICKET_ANCHOR);
    putAscii(hex(t.anchor_id));
  }
  return wpos;
}

function putKey(f: number): void {
  const k = TICKET_KEYS[f]!;
  TICKET_OUT[wpos++] = 0xa0 | k.length;
  TICKET_OUT.set(k, wpos);
  wpos += k.length;
}

/** A string of at most 255 characters, if ASCII (the encoder's fixstr / str 8 header). */
function putAscii(s: string): boolean {
  const len = s.length;
  if (len < 32) TICKET_OUT[wpos++] = 0xa0 | len;
  else {
    TICKET_OUT[wpos++] = 0xd9;
    TICKET_OUT[wpos++] = len;
  }
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return false;
    TICKET_OUT[wpos++] = c;
  }
  return true;
}

/** A non-negative safe integer in the encoder's shortest form. */
function putUint(v: number): boolean {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) return false;
  if (v < 0x80) TICKET_OUT[wpos++] = v;
  else if (v < 0x100) {
    TICKET_OUT[wpos++] = 0xcc;
    TICKET_OUT[wpos++] = v;
  } else if (v < 0x1_0000) {
    TICKET_OUT[wpos++] = 0xcd;
    TICKET_OUT[wpos++] = v >>> 8;
    TICKET_OUT[wpos++] = v & 0xff;
  } else {
    const hi = Math.floor(v / 0x1_0000_0000);
    if (hi === 0) TICKET_OUT[wpos++] = 0xce;
    else {
      TICKET_OUT[wpos++] = 0xcf;
      putU32(hi);
    }
    putU32(v >>> 0);
  }
  return true;
}

function putU32(v: number): void {
  TICKET_OUT[wpos++] = v >>> 24;
  TICKET_OUT[wpos++] = (v >>> 16) & 0xff;
  TICKET_OUT[wpos++] = (v >>> 8) & 0xff;
  TICKET_OUT[wpos++] = v & 0xff;
}

/** `{hi, lo}` of a u128 as hex strings. */
export function u128(hi: bigint, lo: bigint): { hi: string; lo: string } {
  return { hi: hex(hi), lo: hex(lo) };
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** base64url alphabet as char codes. */
const B64_CODE = /*@__PURE__*/ Uint8Array.from(B64, (c) => c.charCodeAt(0));
/** Scratch of base64url char codes, decoded to a string in one call (much cheaper than a concat per char). */
const B64_OUT = new Uint8Array(1024);
const ascii = new TextDecoder();

function toBase64Url(bytes: Uint8Array): string {
  const n = bytes.length;
  const out = Math.ceil((n * 4) / 3) <= B64_OUT.length ? B64_OUT : new Uint8Array(Math.ceil((n * 4) / 3));
  let o = 0;
  let i = 0;
  for (; i + 3 <= n; i += 3) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out[o++] = B64_CODE[v >> 18]!;
    out[o++] = B64_CODE[(v >> 12) & 63]!;
    out[o++] = B64_CODE[(v >> 6) & 63]!;
    out[o++] = B64_CODE[v & 63]!;
  }
  if (i < n) {
    const v = (bytes[i]! << 16) | ((i + 1 < n ? bytes[i + 1]! : 0) << 8);
    out[o++] = B64_CODE[v >> 18]!;
    out[o++] = B64_CODE[(v >> 12) & 63]!;
    if (i + 1 < n) out[o++] = B64_CODE[(v >> 6) & 63]!;
  }
  return ascii.decode(out.subarray(0, o));
}

/** base64url alphabet → value, -1 for anything else. */
const B64_VALUE = /*@__PURE__*/ (() => {
  const t = new Int8Array(128).fill(-1);
  for (let i = 0; i < 64; i++) t[B64.charCodeAt(i)] = i;
  return t;
})();

/** Value of a base64url char code, -1 for anything else. */
const b64 = (c: number): number => (c < 128 ? B64_VALUE[c]! : -1);

/** Decode base64url `text` into `out` (which must hold `3/4` of its length); returns the view of it written. */
function fromBase64Url(text: string, out: Uint8Array): Uint8Array {
  const n = text.length;
  const tail = n % 4;
  if (tail === 1) throw new Error('bad base64url');
  let o = 0;
  let i = 0;
  // Four characters → three bytes; a tail of 2 or 3 characters → 1 or 2 bytes (its spare bits ignored).
  for (const full = n - tail; i < full; i += 4) {
    const a = b64(text.charCodeAt(i));
    const b = b64(text.charCodeAt(i + 1));
    const c = b64(text.charCodeAt(i + 2));
    const d = b64(text.charCodeAt(i + 3));
    if ((a | b | c | d) < 0) throw new Error('bad base64url');
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    out[o++] = v >> 16;
    out[o++] = (v >> 8) & 255;
    out[o++] = v & 255;
  }
  if (tail !== 0) {
    const a = b64(text.charCodeAt(i));
    const b = b64(text.charCodeAt(i + 1));
    const c = tail === 3 ? b64(text.charCodeAt(i + 2)) : 0;
    if ((a | b | c) < 0) throw new Error('bad base64url');
    const v = (a << 18) | (b << 12) | (c << 6);
    out[o++] = v >> 16;
    if (tail === 3) out[o++] = (v >> 8) & 255;
  }
  return out.subarray(0, o);
}
