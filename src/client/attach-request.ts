/**
 * The control-plane messages a page answers (docs/protocol.md §8): `_anchor_attach` and
 * `_anchor_detach` requests read and checked by hand (every peer byte is hostile: a bad field is a
 * refusal naming it, never a throw), and the answers' forms. Pure.
 */
import { isInt, isMap } from '../wire/checks.ts';
import { MESSENGER_MUX_KEY } from '../wire/constants.ts';
import { u64Hex } from '../stream/handle.ts';
import type { Bind } from './bind.ts';

/** An attach (or detach) request, the fields the page uses. */
export interface AttachRequest {
  readonly anchorId: bigint;
  readonly keys: string[];
  /** The ticket's session, when a ticket holder adopts its own pre-bind. */
  readonly session: bigint | undefined;
  readonly attachId: string | undefined;
  readonly resume: { readonly session: bigint; readonly sent: number; readonly from: number } | undefined;
}

/** `{Err: {reason}}`. */
export function refuse(reason: string): unknown {
  return { Err: { reason } };
}

/** The `Ok` answer for `b`, with the resume offset of a resumed stream. */
export function attachOk(b: Bind, resumeOffset: number | undefined): unknown {
  const ok: Record<string, unknown> = {
    streaming_transport_key: MESSENGER_MUX_KEY,
    heartbeat_interval_ms: b.heartbeatMs,
    routing_session_id: u64Hex(b.session),
    initial_credit: b.credit,
    slot_byte_budget: b.budget,
  };
  if (resumeOffset !== undefined) ok['resume_offset'] = resumeOffset;
  return { Ok: ok };
}

/** The fields of an attach (or detach) request to `worker`'s anchors, checked; a string says what is wrong. */
export function readAttach(body: unknown, worker: string): AttachRequest | string {
  if (!isMap(body) || !isMap(body['handle'])) return 'malformed attach request: no handle';
  const hi = hex64(body['handle']['hi']);
  const lo = hex64(body['handle']['lo']);
  if (hi === undefined || lo === undefined) return 'malformed attach request: handle';
  if (hi !== BigInt(`0x${worker}`)) return 'the handle belongs to another worker';
  const keys = body['supported_transport_keys'] ?? [];
  if (!Array.isArray(keys) || keys.length > 64 || !keys.every((k) => typeof k === 'string' && k.length <= 128))
    return 'malformed attach request: supported_transport_keys';
  const session = body['session_id'] === undefined ? undefined : hex64(body['session_id']);
  const attachId = body['attach_id'];
  if (attachId !== undefined && hex64(attachId) === undefined) return 'malformed attach request: attach_id';
  let resume: { session: bigint; sent: number; from: number } | undefined;
  const r = body['resume'];
  if (r !== undefined) {
    if (!isMap(r)) return 'malformed attach request: resume';
    const rs = hex64(r['session']);
    const sent = r['sent'];
    const from = r['from'] ?? 1;
    if (rs === undefined || !isCount(sent) || !isCount(from)) return 'malformed attach request: resume';
    resume = { session: rs, sent, from };
  }
  return { anchorId: lo, keys: keys as string[], session, attachId: attachId as string | undefined, resume };
}

export function isCount(v: unknown): v is number {
  return isInt(v, 0, Number.MAX_SAFE_INTEGER);
}

/** A `0x…` u64 (the control plane's 64-bit form), or undefined. */
function hex64(v: unknown): bigint | undefined {
  if (typeof v !== 'string' || !/^0x[0-9a-f]{1,16}$/.test(v)) return undefined;
  return BigInt(v);
}
