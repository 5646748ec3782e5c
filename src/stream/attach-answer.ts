/**
 * The consumer's half of an attach, the same for single-sender and MPSC anchors (consumer.ts,
 * mpsc-host.ts): the terms an answer names, for a mux bind or the per-stream path, and a
 * per-stream attach registered to wait for its connection (docs/protocol.md §9).
 */
import type { Bind } from '../mux/bind.ts';
import { randomU64 } from '../runtime/runtime.ts';
import { MESSENGER_MUX_KEY, TCP_STREAM_KEY } from '../wire/constants.ts';
import { FrameKind } from '../wire/frame.ts';
import type { attachOk } from './attach-messages.ts';
import type { NodeState, PendingPerStream } from './node-state.ts';

/** What an attach answer names (`attachOk`'s argument). */
export type AttachTerms = Parameters<typeof attachOk>[0];

/** The terms of a mux bind: its session, credit, slot budget and lane. */
export function muxTerms(s: NodeState, bind: Bind): AttachTerms {
  return {
    key: MESSENGER_MUX_KEY,
    heartbeatMs: s.config.heartbeatInterval,
    session: bind.sessionId,
    credit: bind.limit,
    budget: bind.slotByteBudget,
    lane: bind.lane,
  };
}

/** The terms of a per-stream attach: no credit, budget or lane (the connection is the stream), and where to dial. */
export function perStreamTerms(s: NodeState, session: bigint, endpoint: string): AttachTerms {
  return {
    key: TCP_STREAM_KEY,
    heartbeatMs: s.config.heartbeatInterval,
    session,
    credit: 0,
    budget: 0,
    lane: 0,
    endpoint,
  };
}

/**
 * Register `pending` under a fresh session until its connection claims it (`acceptPerStream`). A
 * producer that never dials must not leave the reader waiting forever: after the accept window an
 * entry still unclaimed is forgotten and its buffer ends Dropped. (The legacy path keeps one timer
 * per pending attach, as it did per stream.)
 */
export function pendPerStream(
  s: NodeState,
  pending: PendingPerStream,
): { readonly session: bigint; readonly key: string } {
  const session = randomU64(s.runtime);
  const key = `${pending.anchor.localId}:${session}`;
  s.perStreamBinds.set(key, pending);
  s.runtime.setTimer(() => {
    if (s.perStreamBinds.get(key) !== pending) return;
    s.perStreamBinds.delete(key);
    s.metrics.unclaimedBindReaped++;
    pending.buffer.pushForced(FrameKind.Dropped, undefined);
    pending.buffer.close();
  }, s.config.acceptWindow);
  return { session, key };
}
