/**
 * Control-plane messages of the stream layer (protocol.md §7, §11, §12): the attach request and
 * answer, and the zero-RTT `StreamOpenTicket`. They travel as MessagePack over the messenger's
 * unary requests and are validated with zod/mini at the boundary. 64-bit fields travel as `0x…` hex
 * strings; field names and zero semantics are the reference's.
 */
import { Decoder, Encoder } from '@msgpack/msgpack';
import { checkShape } from '../transport/msgpack.ts';
import { z } from 'zod/mini';
import { int, parse, parser, str } from '../validate.ts';
import { StreamError } from './errors.ts';

/** Handler names of the stream control plane. */
export const ATTACH_HANDLER = '_anchor_attach';
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

const u64 = z.pipe(
  z.string().check(z.regex(/^0x[0-9a-f]{1,16}$/, 'a u64 as 0x-prefixed lower-case hex')),
  z.transform((s) => BigInt(s)),
);
/** `{ hi, lo }` of a u128 handle. */
const u128Schema = z.object({ hi: u64, lo: u64 });

const attachRequest = z.object({
  handle: u128Schema,
  session_id: z.optional(u64),
  stream_cancel_handle: z.optional(u128Schema),
  supported_transport_keys: z._default(z.array(str(64)).check(z.maxLength(16)), []),
  lane_key: z.optional(u64),
});
/** `_anchor_attach` request. */
export const attachRequestSchema = parser(attachRequest);
export type AttachRequest = z.output<typeof attachRequest>;

const okSchema = z.object({
  streaming_transport_key: str(64),
  heartbeat_interval_ms: z._default(int(0, 86_400_000), 5000),
  routing_session_id: z._default(u64, 0n),
  initial_credit: z._default(int(0, 0xffff_ffff), 0),
  slot_byte_budget: z._default(int(0, 2 ** 40), 0),
  lane: z._default(int(0, 15), 0),
  /** lanemux: where the per-stream (legacy) path listens; absent on the mux path. */
  endpoint: z.optional(str(256)),
});

/** `{ Err: { reason } }`, the refusal arm of both attach answers. */
const errAnswer = z.strictObject({ Err: z.object({ reason: str(1024) }) });

const attachResponse = z.union([z.strictObject({ Ok: okSchema }), errAnswer]);
/** Externally tagged attach answer: `{ Ok: {...} }` or `{ Err: { reason } }`. */
export const attachResponseSchema = parser(attachResponse);
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

/** Zero-RTT ticket: every field required but `lane` (default 0). */
export const ticketSchema = z.strictObject({
  streaming_transport_key: str(64),
  heartbeat_interval_ms: int(0, 86_400_000),
  routing_session_id: u64,
  initial_credit: int(0, 0xffff_ffff),
  slot_byte_budget: int(0, 2 ** 40),
  lane: z._default(int(0, 15), 0),
});
export type StreamOpenTicket = z.output<typeof ticketSchema>;

/** `_anchor_detach` / `_stream_cancel` body. */
export const anchorRefSchema = parser(z.object({ handle: u128Schema, session_id: z.optional(u64) }));

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
  const body: Record<string, unknown> = {
    streaming_transport_key: t.streaming_transport_key,
    heartbeat_interval_ms: t.heartbeat_interval_ms,
    routing_session_id: hex(t.routing_session_id),
    initial_credit: t.initial_credit,
    slot_byte_budget: t.slot_byte_budget,
  };
  if (t.lane !== 0) body['lane'] = t.lane;
  return toBase64Url((ticketEncoder ??= new Encoder()).encodeSharedRef(body));
}

/** Parse a ticket string. Throws `ERR_INVALID_TICKET` naming what is wrong. */
export function parseTicket(text: string): StreamOpenTicket {
  let raw: unknown;
  try {
    if (typeof text !== 'string' || text.length > 1024) throw new Error('not a short string');
    const bytes = fromBase64Url(text);
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

/** `{hi, lo}` of a u128 as hex strings. */
export function u128(hi: bigint, lo: bigint): { hi: string; lo: string } {
  return { hi: hex(hi), lo: hex(lo) };
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

function toBase64Url(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    out += B64[(n >> 18) & 63]! + B64[(n >> 12) & 63]!;
    if (i + 1 < bytes.length) out += B64[(n >> 6) & 63]!;
    if (i + 2 < bytes.length) out += B64[n & 63]!;
  }
  return out;
}

/** base64url alphabet → value, -1 for anything else. */
const B64_VALUE = /*@__PURE__*/ (() => {
  const t = new Int8Array(128).fill(-1);
  for (let i = 0; i < 64; i++) t[B64.charCodeAt(i)] = i;
  return t;
})();

function fromBase64Url(text: string): Uint8Array {
  const n = text.length;
  if (n % 4 === 1) throw new Error('bad base64url');
  const out = new Uint8Array(Math.floor((n * 3) / 4));
  let o = 0;
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    const v = c < 128 ? B64_VALUE[c]! : -1;
    if (v < 0) throw new Error('bad base64url');
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 255;
    }
  }
  return out.subarray(0, o);
}
