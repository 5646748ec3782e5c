/**
 * Re-attach from a resume token (docs/protocol.md §8.5): a new consumer — a reloaded page, a new
 * node — takes a stream its producer still keeps (history on: `createNode({ resume: { history } })`)
 * from an offset, and reads the rest, live, with nothing repeated. The consumer creates and
 * pre-binds an anchor and sends `_stream_reattach {token, offset, handle, ticket}`; the producer
 * finds the stream by its token, opens a slot to that anchor from the ticket, sends items
 * offset+1… from its history, then goes on. Both sides are here: the request and its answer.
 */
import * as z from '../schema.ts';
import { isLanemuxError } from '../errors.ts';
import type { PeerId } from '../messenger/types.ts';
import { int, str } from '../validate.ts';
import { MESSENGER_MUX_KEY } from '../wire/constants.ts';
import type { StreamAnchor } from './anchor.ts';
import { StreamError } from './errors.ts';
import { parseHandle, workerKey } from './handle.ts';
import type { NodeState } from './node-state.ts';
import { parseTicket } from './ticket.ts';

/** Handler name of the re-attach request. */
export const REATTACH_HANDLER = '_stream_reattach';

/** Longest resume token accepted (lanemux issues 32 hex digits). */
const TOKEN_MAX = 64;

const request = z.object({
  token: str(TOKEN_MAX, 1),
  offset: int(0, Number.MAX_SAFE_INTEGER),
  handle: str(128, 1),
  ticket: str(1024, 1),
});

const answer = z.union([
  z.strictObject({ Ok: z.object({ sent: int(0, Number.MAX_SAFE_INTEGER) }) }),
  z.strictObject({ Err: z.object({ reason: str(1024), reattach: z.optional(str(32)) }) }),
]);

/** `node.reattach` options. */
export interface ReattachOptions {
  /** Items of the stream the new consumer already has (it receives item `offset + 1` on). Required. */
  readonly offset: number;
  /** How long to wait for the producer's answer, ms. Defaults to 10,000. */
  readonly timeoutMs?: number;
  /** Abort the re-attach while it waits for the answer. */
  readonly signal?: AbortSignal;
}

const optionsSchema = z.object({
  offset: int(0, Number.MAX_SAFE_INTEGER),
  timeoutMs: z.optional(int(1, 3_600_000)),
});

/** The consumer's side of a node, as much as a re-attach needs. */
export interface ReattachHost {
  createAnchor<T>(): StreamAnchor<T>;
  prebindAnchor(anchor: StreamAnchor<unknown>): string | undefined;
}

const refusal = (reason: string, kind: 'unknown' | 'evicted' | 'refused') => ({
  Err: { reason, reattach: kind },
});

/** The producer's answer to `_stream_reattach` from `from` (never waits). */
export function answerReattach(s: NodeState, from: PeerId, body: unknown): unknown {
  const reg = s.resume;
  if (reg === null || reg.history === null)
    return refusal('this node keeps no stream history (createNode resume.history is off)', 'unknown');
  const req = request.safeParse(body);
  if (!req.success) return refusal(`malformed re-attach request: ${req.error.issues[0]?.message ?? ''}`, 'refused');
  const { token, offset } = req.data;
  let terms: { handle: ReturnType<typeof parseHandle>; ticket: ReturnType<typeof parseTicket> };
  try {
    terms = { handle: parseHandle(req.data.handle), ticket: parseTicket(req.data.ticket) };
  } catch (e) {
    return refusal(`malformed re-attach request: ${(e as Error).message}`, 'refused');
  }
  const { handle, ticket } = terms;
  // The stream goes only to an anchor of the node that asks: a token cannot aim it at a third node.
  if (workerKey(handle.workerId) !== from || ticket.anchor_id !== handle.localId)
    return refusal('the anchor and its ticket must belong to the node that re-attaches', 'refused');
  if (ticket.streaming_transport_key !== MESSENGER_MUX_KEY || ticket.initial_credit === 0)
    return refusal(`a re-attach needs a ${MESSENGER_MUX_KEY} ticket with credit`, 'refused');
  const info = s.messenger.peer(from);
  if (info === undefined || !reg.negotiated(from))
    return refusal('a re-attach needs resume on both nodes (lanemux-resume-v1 in both HELLOs)', 'refused');
  const link = reg.byToken(token);
  if (link === undefined)
    return refusal(
      `no stream for this resume token: it ended more than ${reg.lingerMs} ms ago, its history was evicted, or the token is wrong`,
      'unknown',
    );
  const why = link.retarget(info, handle, {
    session: ticket.routing_session_id,
    credit: ticket.initial_credit,
    budget: ticket.slot_byte_budget,
    lane: ticket.lane,
    offset,
  });
  if (why === null) {
    s.metrics.anchorOperation('reattach', 'success', 'mux');
    return { Ok: { sent: link.sent } };
  }
  s.metrics.anchorOperation('reattach', 'error', 'mux');
  if (why === 'unknown') return refusal('the stream has ended and its history is gone', 'unknown');
  if (why === 'evicted')
    return refusal(
      `the history no longer holds item ${offset + 1} (resume.history.bytesPerStream ${reg.history.bytesPerStream})`,
      'evicted',
    );
  return refusal(why, 'refused');
}

/** See `LanemuxNode.reattach`. */
export async function reattach<T>(
  s: NodeState,
  host: ReattachHost,
  peer: PeerId,
  token: string,
  options: ReattachOptions,
): Promise<StreamAnchor<T>> {
  s.assertOpen();
  if (typeof token !== 'string' || token.length === 0 || token.length > TOKEN_MAX)
    throw new StreamError('ERR_ATTACH_REFUSED', `a resume token is a string of 1 to ${TOKEN_MAX} characters`);
  const o = optionsSchema.safeParse(options);
  if (!o.success)
    throw new StreamError('ERR_ATTACH_REFUSED', `bad re-attach options: ${o.error.issues[0]?.message ?? ''}`);
  options.signal?.throwIfAborted();
  const anchor = host.createAnchor<T>();
  const ticket = host.prebindAnchor(anchor as StreamAnchor<unknown>);
  if (ticket === undefined) {
    anchor.cancel();
    throw new StreamError('ERR_ATTACH_REFUSED', 'a re-attach needs the mux on this node');
  }
  let raw: unknown;
  try {
    raw = await s.messenger.request(
      peer,
      REATTACH_HANDLER,
      { token, offset: o.data.offset, handle: anchor.handle, ticket },
      { timeoutMs: o.data.timeoutMs ?? 10_000, ...(options.signal ? { signal: options.signal } : {}) },
    );
  } catch (e) {
    anchor.cancel();
    if (isLanemuxError(e) && e.code === 'ERR_UNKNOWN_HANDLER')
      throw new StreamError('ERR_ATTACH_REFUSED', `peer ${peer} does not support re-attach (${REATTACH_HANDLER})`, {
        cause: e,
      });
    throw e;
  }
  const a = answer.safeParse(raw);
  if (!a.success) {
    anchor.cancel();
    throw new StreamError('ERR_ATTACH_REFUSED', 'malformed re-attach answer');
  }
  if ('Err' in a.data) {
    anchor.cancel();
    throw new StreamError('ERR_ATTACH_REFUSED', `re-attach refused: ${a.data.Err.reason}`);
  }
  return anchor;
}
