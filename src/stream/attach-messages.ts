/**
 * Attach messages of the stream layer (docs/protocol.md §8): the `_anchor_attach` request and
 * answer, the MPSC attach, detach and cancel bodies. They travel as MessagePack over the messenger's
 * unary requests and are validated with zod/mini at the boundary. 64-bit fields travel as `0x…` hex
 * strings; field names and zero semantics are the reference's. Every map ignores fields it does not
 * know (`z.object`, never `z.strictObject`) while the fields it knows keep their bounds (docs/protocol.md §8
 * "Unknown fields are ignored"); only the `Ok`/`Err` wrapper of an answer is strict, being a variant tag.
 */
import * as z from '../schema.ts';
import { int, parser, str } from '../validate.ts';
import {
  BUDGET_MAX,
  CREDIT_MAX,
  ENDPOINT_MAX,
  HEARTBEAT_DEFAULT,
  HEARTBEAT_MAX,
  KEYS_MAX,
  KEY_MAX,
  LANE_MAX,
  U64_RE,
  hex,
  u128Schema,
  u64,
} from './control-fields.ts';

/** Handler names of the stream control plane. */
export const ATTACH_HANDLER = '_anchor_attach';
/** `{ handle, session_id }` from a sender that handed over its Detached: the consumer acknowledges it (docs/protocol.md §8 "Detach"). */
export const DETACH_HANDLER = '_anchor_detach';
export const CANCEL_HANDLER = '_stream_cancel';
/** MPSC attach: the same request and negotiation fields as `_anchor_attach`; the answer adds `sender_id`. */
export const MPSC_ATTACH_HANDLER = '_mpsc_anchor_attach';
/** MPSC detach of one sender: `{ handle, sender_id }`. */
export const MPSC_DETACH_HANDLER = '_mpsc_anchor_detach';
/** MPSC cancel of the whole anchor: `{ handle }`. */
export const MPSC_CANCEL_HANDLER = '_mpsc_anchor_cancel';

const attachRequest = z.object({
  handle: u128Schema,
  session_id: z.optional(u64),
  stream_cancel_handle: z.optional(u128Schema),
  supported_transport_keys: z._default(z.array(str(KEY_MAX)).check(z.maxLength(KEYS_MAX)), []),
  lane_key: z.optional(u64),
  /**
   * The producer's id for this attach (docs/protocol.md §8.3): made again after its link was lost,
   * an attach names the same id, so the consumer that answered the lost one answers again.
   */
  attach_id: z.optional(u64),
  /**
   * A resume (docs/protocol.md §8.3): the producer's stream whose link was lost, by its last
   * session, and how many items it has sent.
   */
  resume: z.optional(
    z.object({
      session: u64,
      sent: int(0, Number.MAX_SAFE_INTEGER),
      /** The oldest item the producer can send again (its replay ring's first); absent = 1. */
      from: z._default(int(1, Number.MAX_SAFE_INTEGER), 1),
    }),
  ),
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
  /** The answer to a resume: how many of the stream's items the consumer has received. */
  resume_offset: z.optional(int(0, Number.MAX_SAFE_INTEGER)),
});

/**
 * `{ Err: { reason } }`, the refusal arm of both attach answers. A refused resume adds `resume`:
 * `unknown` when the consumer does not know the session (a stream it has finished, or forgotten).
 * `code`, optional: the refusal's lanemux error code; `ERR_DRAINING` when the consumer drains
 * (docs/protocol.md §8.4).
 */
const errAnswer = z.strictObject({
  Err: z.object({ reason: str(1024), resume: z.optional(str(32)), code: z.optional(str(64)) }),
});

const attachResponse = z.union([z.strictObject({ Ok: okSchema }), errAnswer]);
/** Externally tagged attach answer: `{ Ok: {...} }` or `{ Err: { reason } }`. */
export const attachResponseSchema = parser(attachResponse, (input) => readAttachOkFast(input));
export type AttachResponse = z.output<typeof attachResponse>;
export type AttachOk = z.output<typeof okSchema>;

/** `sender_id`: a u64 on the wire; lanemux allocates small counters, so more than 2^32 is refused. */
const senderIdSchema = u64.check(z.refine((v) => v > 0n && v <= 0xffff_ffffn, 'a sender id in 1..2^32-1'));

const mpscAttachResponse = z.union([
  z.strictObject({ Ok: z.extend(okSchema, { sender_id: senderIdSchema }) }),
  errAnswer,
]);
/** Externally tagged `_mpsc_anchor_attach` answer: the single-sender Ok plus `sender_id`. */
export const mpscAttachResponseSchema = parser(mpscAttachResponse);
export type MpscAttachResponse = z.output<typeof mpscAttachResponse>;

/** `_mpsc_anchor_detach` body. */
export const mpscDetachRequestSchema = parser(z.object({ handle: u128Schema, sender_id: senderIdSchema }));
/** `_mpsc_anchor_cancel` body. */
export const mpscCancelRequestSchema = parser(z.object({ handle: u128Schema }));

/** @internal The zod schemas behind the fast paths, for tests that compare the two. */
export { attachRequest as attachRequestZod, attachResponse as attachResponseZod };

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
function optionalField<V>(
  o: Record<string, unknown>,
  key: string,
  read: (v: unknown) => V | undefined,
): V | undefined | typeof GIVE_UP {
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
  const attachId = optionalField(o, 'attach_id', u64Fast);
  if (session === GIVE_UP || cancel === GIVE_UP || laneKey === GIVE_UP || attachId === GIVE_UP) return undefined;
  // A resume is rare: zod reads it.
  if ('resume' in o) return undefined;
  const out: AttachRequest = { handle, supported_transport_keys: [] };
  if (session !== undefined) out.session_id = session;
  if (cancel !== undefined) out.stream_cancel_handle = cancel;
  if (laneKey !== undefined) out.lane_key = laneKey;
  if (attachId !== undefined) out.attach_id = attachId;
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
  if (
    Number.isNaN(out.heartbeat_interval_ms) ||
    out.routing_session_id < 0n ||
    Number.isNaN(out.initial_credit) ||
    Number.isNaN(out.slot_byte_budget) ||
    Number.isNaN(out.lane)
  ) {
    return undefined;
  }
  const endpoint = optionalField(o, 'endpoint', (v) =>
    typeof v === 'string' && v.length <= ENDPOINT_MAX ? v : undefined,
  );
  if (endpoint === GIVE_UP) return undefined;
  if (endpoint !== undefined) out.endpoint = endpoint;
  const offset = o['resume_offset'];
  if (offset !== undefined) {
    const r = intFast(offset, 0, Number.MAX_SAFE_INTEGER);
    if (Number.isNaN(r)) return undefined;
    out.resume_offset = r;
  }
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

/** Encode an Ok answer with lane omitted when 0 (byte-identical to pre-lanes answers). */
export function attachOk(ok: {
  key: string;
  heartbeatMs: number;
  session: bigint;
  credit: number;
  budget: number;
  lane: number;
  endpoint?: string;
  resumeOffset?: number;
}): unknown {
  const body: Record<string, unknown> = {
    streaming_transport_key: ok.key,
    heartbeat_interval_ms: ok.heartbeatMs,
    routing_session_id: hex(ok.session),
    initial_credit: ok.credit,
    slot_byte_budget: ok.budget,
  };
  if (ok.lane !== 0) body['lane'] = ok.lane;
  if (ok.endpoint !== undefined) body['endpoint'] = ok.endpoint;
  if (ok.resumeOffset !== undefined) body['resume_offset'] = ok.resumeOffset;
  return { Ok: body };
}

/** Encode an MPSC Ok answer: {@link attachOk} plus `sender_id`. */
export function mpscAttachOk(ok: Parameters<typeof attachOk>[0] & { senderId: number }): unknown {
  const { senderId, ...rest } = ok;
  const answer = attachOk(rest) as { Ok: Record<string, unknown> };
  answer.Ok['sender_id'] = hex(BigInt(senderId));
  return answer;
}

/** `{hi, lo}` of a u128 as hex strings. */
export function u128(hi: bigint, lo: bigint): { hi: string; lo: string } {
  return { hi: hex(hi), lo: hex(lo) };
}
