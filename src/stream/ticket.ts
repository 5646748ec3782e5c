/**
 * The zero-RTT `StreamOpenTicket` (docs/protocol.md §8): its schema and its codec, base64url of
 * MessagePack. A ticket is written and parsed per zero-RTT stream, so the usual shape has a
 * hand-written fast path each way; anything else takes `@msgpack/msgpack` plus the zod schema.
 */
import { Decoder, Encoder } from '@msgpack/msgpack';
import * as z from '../schema.ts';
import { parse, int, str } from '../validate.ts';
import { fromBase64Url, toBase64Url } from '../wire/base64url.ts';
import { checkShape, readU32 } from '../wire/msgpack.ts';
import { BUDGET_MAX, CREDIT_MAX, HEARTBEAT_MAX, KEY_MAX, LANE_MAX, hex, u64 } from './control-fields.ts';
import { StreamError } from './errors.ts';

/**
 * Zero-RTT ticket: every field required but `lane` (default 0) and `anchor_id`. `anchor_id` is
 * lanemux's own addition: the local id of the anchor the ticket was issued for, which a producer
 * checks against the handle before it sends anything (a ticket without it, from another
 * implementation, is not checked). Fields this version does not know are ignored (docs/protocol.md §8),
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
const TICKET_KEYS = [
  'streaming_transport_key',
  'heartbeat_interval_ms',
  'routing_session_id',
  'initial_credit',
  'slot_byte_budget',
  'lane',
  'anchor_id',
].map((k) => Uint8Array.from(k, (c) => c.charCodeAt(0)));
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
