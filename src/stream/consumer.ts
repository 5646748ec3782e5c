/**
 * The consumer side of a node: creating and pre-binding anchors, answering `_anchor_attach` and
 * `_anchor_detach` (docs/protocol.md §8), and forgetting an anchor when it ends (its bind, waiting
 * senders, same-worker port and connection let go). Per-stream connections (§9) are accepted by
 * per-stream-consumer.ts, which only a node with a per-stream transport loads.
 */
import type { PeerId } from '../messenger/types.ts';
import type { Bind, BindEnd, BindOwner } from '../mux/bind.ts';
import { SlotBuffer } from '../mux/slot-buffer.ts';
import { randomU64 } from '../runtime/runtime.ts';
import { MESSENGER_MUX_KEY, MPSC_ANCHOR_BIT, TCP_STREAM_KEY } from '../wire/constants.ts';
import { StreamAnchor } from './anchor.ts';
import type { AnchorHost, WaitingFeed } from './anchor.ts';
import { attachOk, attachRequestSchema, anchorRefSchema } from './attach-messages.ts';
import { muxTerms, pendPerStream, perStreamTerms } from './attach-answer.ts';
import { encodeTicket } from './ticket.ts';
import { StreamError } from './errors.ts';
import { formatHandle, parseHandle } from './handle.ts';
import type { MpscAnchor } from './mpsc-anchor.ts';
import { ANCHOR_CHANNEL_DEPTH, WAITING_FULL, refuse, type NodeState, type PendingPerStream } from './node-state.ts';
import type { UnattachedReaper } from './unattached.ts';
import type { ResumeFailedError } from './errors.ts';
import { RESUME_UNKNOWN, ResumeDesk, type ResumeRequest, type ResumeTarget } from './resume-desk.ts';

/** The local-id bits of a single-sender anchor (`~MPSC_ANCHOR_BIT` within 64 bits, computed once). */
const LOCAL_ID_MASK = MPSC_ANCHOR_BIT - 1n;

/**
 * The anchor side of a mux bind: a stream that ended dropped or expired is forgotten at once; a lost
 * link suspends it for a resume (docs/protocol.md §8.3).
 */
class AnchorBindOwner implements BindOwner, ResumeTarget {
  readonly anchor: StreamAnchor<unknown>;
  readonly #side: ConsumerSide;
  constructor(anchor: StreamAnchor<unknown>, side: ConsumerSide) {
    this.anchor = anchor;
    this.#side = side;
  }
  onClaimed(bind: Bind): void {
    this.#side.resumes.claimed(bind);
  }
  get fixedCredit(): boolean {
    return this.anchor._fixedCredit;
  }
  suspend(bind: Bind, peer?: PeerId): boolean {
    return this.#side.resumes.suspend(this, bind, peer);
  }
  onEnded(bind: Bind, end: BindEnd): void {
    if (end === 'dropped' || end === 'expired') this.#side._forgetEnded(this.anchor, bind);
  }
  get open(): boolean {
    return this.#side._holds(this.anchor);
  }
  received(bind: Bind): number | null {
    return this.anchor._received(bind);
  }
  unread(bind: Bind): number {
    return bind.buffer.dataRecords();
  }
  suspended(bind: Bind): void {
    this.anchor._suspended(bind);
  }
  resumed(old: Bind, fresh: Bind): void {
    this.anchor._resumed(old, fresh);
  }
  resumeFailed(bind: Bind, error: ResumeFailedError): void {
    this.anchor._resumeFailed(bind, error);
    this.#side._forgetEnded(this.anchor, bind);
  }
}

/** The consumer side of a node: its anchors, the attach and detach handlers, per-stream connections in. */
export class ConsumerSide implements AnchorHost {
  readonly #s: NodeState;
  readonly #reaper: UnattachedReaper;
  /** Streams suspended by a lost link, waiting for their producer's resume (docs/protocol.md §8.3). */
  readonly resumes: ResumeDesk;

  readonly #offPeerState: (() => void) | undefined;
  /** The producer's `attach_id` of each answered attach that named one (a retry after a lost link names it again). */
  readonly #attachIds = new WeakMap<Bind, bigint>();

  constructor(state: NodeState, reaper: UnattachedReaper) {
    this.#s = state;
    this.#reaper = reaper;
    this.resumes = new ResumeDesk(state);
    // `up` is a first link to an instance: one of a peer we hold suspended streams from is a restart.
    // `gone` with `replacedBy`: another worker now answers at the producer's address (a restart with a new id).
    this.#offPeerState = state.messenger.onPeerState?.((e) => {
      if (!this.resumes.waiting) return;
      if (e.type === 'up') this.resumes.peerRestarted(e.peer, 'came back as another instance (it restarted)');
      else if (e.type === 'gone' && e.replacedBy !== undefined)
        this.resumes.peerRestarted(e.peer, `was replaced at its address by worker ${e.replacedBy} (it restarted)`);
    });
  }

  /** @internal True while `anchor` is this node's and not finished: its streams may be resumed. */
  _holds(anchor: StreamAnchor<unknown>): boolean {
    return !this.#s.closed && this.#s.anchors.get(anchor.localId) === anchor && !anchor.finished;
  }

  /** The node closes: no suspended stream waits any more. */
  close(): void {
    this.#offPeerState?.();
    this.resumes.drop(null);
  }

  /** A resume attach (docs/protocol.md §8.3): continue a suspended stream on a new bind. */
  #onResume(
    from: PeerId,
    anchor: StreamAnchor<unknown> | undefined,
    resume: ResumeRequest,
    laneKey: bigint | undefined,
  ): unknown {
    const mux = this.#s.mux;
    if (mux === null || anchor === undefined || anchor.finished) return RESUME_UNKNOWN;
    const r = this.resumes.resume(from, anchor, anchor.localId, resume, (credit) =>
      mux.bind(anchor.localId, this.#bindOwner(anchor), from, laneKey, credit),
    );
    return 'Err' in r ? r : attachOk({ ...muxTerms(this.#s, r.bind), resumeOffset: r.offset });
  }

  /**
   * An attach made again after its link was lost (docs/protocol.md §8.3 "Attach across a lost
   * link"): `from` named the `id` of the attach this anchor answered last and never saw claimed, so
   * that answer was lost. Its bind (suspended, or still looking live if the loss is not reported
   * yet) gives way to a new one, answered as the attach was; null when the request is not that.
   */
  #attachAgain(from: PeerId, anchor: StreamAnchor<unknown>, id: bigint, laneKey: bigint | undefined): unknown {
    const mux = this.#s.mux!;
    const old = anchor._tailBind;
    if (old === null || old.claimed || old.peer !== from || this.#attachIds.get(old) !== id) return null;
    if (!this.resumes.take(anchor, old, from)) return null;
    const fresh = mux.bind(anchor.localId, this.#bindOwner(anchor), from, laneKey);
    this.#attachIds.set(fresh, id);
    anchor._resumed(old, fresh);
    this.#s.metrics.anchorOperation('attach', 'success', 'mux');
    return attachOk(muxTerms(this.#s, fresh));
  }

  /** See `LanemuxNode.createAnchor`. */
  createAnchor<T = unknown>(): StreamAnchor<T> {
    this.#s.assertOpen();
    let localId: bigint;
    do localId = randomU64(this.#s.runtime) & LOCAL_ID_MASK;
    while (localId === 0n || this.#s.anchors.has(localId));
    const anchor = new StreamAnchor<T>(this, formatHandle({ workerId: this.#s.workerId, localId }), localId);
    this.#s.anchors.set(localId, anchor as StreamAnchor<unknown>);
    this.#s.metrics.activeAnchors++;
    this.anchorUnattached(anchor as StreamAnchor<unknown>);
    return anchor;
  }

  /** See `LanemuxNode.prebindAnchor`. */
  prebindAnchor(
    target: StreamAnchor<unknown> | MpscAnchor<unknown> | string,
    options: { laneKey?: bigint } = {},
  ): string | undefined {
    const mux = this.#s.mux;
    if (mux === null) return undefined;
    const anchor = typeof target === 'string' ? this.#localAnchor(target) : target;
    if (anchor === undefined) {
      this.#s.metrics.anchorOperation('prebind', 'error', 'mux');
      return undefined;
    }
    // MPSC anchors have no zero-RTT path (docs/protocol.md §8 "MPSC anchors": never pre-bound).
    if (
      !(anchor instanceof StreamAnchor) ||
      (anchor.localId & MPSC_ANCHOR_BIT) !== 0n ||
      this.#s.anchors.get(anchor.localId) !== anchor ||
      anchor.feedKind !== 'none' ||
      anchor.finished
    ) {
      this.#s.metrics.anchorOperation('prebind', 'error', 'mux');
      return undefined;
    }
    const bind = mux.bind(anchor.localId, this.#bindOwner(anchor), null, options.laneKey);
    anchor._feed(bind.buffer, 'mux', bind);
    this.#s.metrics.anchorOperation('prebind', 'success', 'mux');
    return encodeTicket({
      streaming_transport_key: MESSENGER_MUX_KEY,
      heartbeat_interval_ms: this.#s.config.heartbeatInterval,
      routing_session_id: bind.sessionId,
      initial_credit: bind.limit,
      slot_byte_budget: bind.slotByteBudget,
      lane: bind.lane,
      anchor_id: anchor.localId,
    });
  }

  /** A single-sender anchor of this node named by its handle string, if it exists. */
  #localAnchor(handle: string): StreamAnchor<unknown> | undefined {
    let h: ReturnType<typeof parseHandle>;
    try {
      h = parseHandle(handle);
    } catch {
      return undefined;
    }
    if (h.workerId !== this.#s.workerId) return undefined;
    const a = this.#s.anchors.get(h.localId);
    return a instanceof StreamAnchor ? a : undefined;
  }

  /** @internal AnchorHost */
  anchorDone(anchor: StreamAnchor<unknown>, cancelled: boolean): void {
    if (this.#s.anchors.get(anchor.localId) !== anchor) return;
    this.#s.anchors.delete(anchor.localId);
    this.#s.metrics.activeAnchors--;
    this.#s.drain?.poke();
    this.resumes.drop(anchor);
    const bind = anchor.bind;
    if (bind !== null && this.#s.mux !== null) {
      // A consumer cancel is a LifecycleSlot{cancel} naming the session (docs/protocol.md §10.3); before the OpenSlot
      // arrived, the mux answers that OpenSlot with it.
      if (cancelled && !bind.ended) this.#s.mux.signalLifecycle(bind, true);
      this.#s.mux.releaseBind(bind);
    }
    const waiting = anchor._takeWaiting();
    if (waiting !== null) {
      this.#letGo(
        waiting,
        cancelled,
        cancelled
          ? new StreamError('ERR_STREAM_CANCELLED', 'the consumer cancelled the stream')
          : new StreamError('ERR_STREAM_CLOSED', 'the anchor ended before its consumer read this sender'),
      );
    }
    const local = this.#s.locals.get(anchor);
    if (local) {
      this.#s.locals.delete(anchor);
      if (cancelled) local.fail(new StreamError('ERR_STREAM_CANCELLED', 'the consumer cancelled the stream'));
    }
    for (const [key, b] of this.#s.perStreamBinds) if (b.anchor === anchor) this.#s.perStreamBinds.delete(key);
    this.#s.perStreamStops.delete(anchor);
    const drop = this.#s.perStreamDrops.get(anchor);
    if (drop !== undefined) {
      this.#s.perStreamDrops.delete(anchor);
      // Nobody reads this anchor any more: drop the connection, or the producer blocks once buffers fill.
      drop(
        cancelled
          ? new StreamError('ERR_STREAM_CANCELLED', 'the consumer cancelled the stream')
          : new StreamError('ERR_STREAM_CLOSED', 'the anchor failed'),
      );
    }
    if (cancelled) this.#s.metrics.anchorOperation('cancel', 'success', anchor.feedKind);
  }

  /** @internal AnchorHost: a sender whose node drained (docs/protocol.md §8.4) ended the stream past its deadline. */
  dropped(bind: Bind | null): StreamError | null {
    return this.#s.peerDrains.dropped(bind?.slot?.peer ?? bind?.peer);
  }

  /** @internal AnchorHost: start (or restart) the anchor's unattached timer. */
  anchorUnattached(anchor: StreamAnchor<unknown>): void {
    this.#reaper.watch(anchor);
  }

  /** The anchor side of a mux bind (one small object per bind; the node's part is shared). */
  #bindOwner(anchor: StreamAnchor<unknown>): BindOwner {
    return new AnchorBindOwner(anchor, this);
  }

  /** @internal A bound stream ended dropped or expired: the anchor is forgotten at once. */
  _forgetEnded(anchor: StreamAnchor<unknown>, bind: Bind): void {
    // The consumer still reads the Dropped it holds; the node need not keep the anchor for it.
    if (this.#s.anchors.get(anchor.localId) !== anchor) return;
    this.#s.anchors.delete(anchor.localId);
    this.#s.metrics.activeAnchors--;
    this.#s.drain?.poke();
    // anchorDone will not run for it now: its suspensions and resume aliases go here.
    this.resumes.drop(anchor);
    // Senders waiting behind this one are never read (the stream ends at its Dropped): let them go now.
    const cut = anchor._cutAfter(bind);
    if (cut !== null) {
      this.#letGo(
        cut,
        false,
        new StreamError(
          'ERR_STREAM_CLOSED',
          'an earlier sender of the anchor went away: its consumer never reads this sender',
        ),
      );
      this.#s.locals.delete(anchor);
      this.#s.perStreamDrops.delete(anchor);
      this.#s.perStreamStops.delete(anchor);
    }
  }

  /** Let go the senders of feeds the anchor will never read (it ended, or ends before them). */
  #letGo(feeds: readonly WaitingFeed[], cancelled: boolean, error: StreamError): void {
    const mux = this.#s.mux;
    for (const f of feeds) {
      const bind = f.bind;
      if (bind !== null && mux !== null) {
        if (cancelled && !bind.ended) mux.signalLifecycle(bind, true);
        mux.releaseBind(bind);
      }
      f.release?.(error);
    }
  }

  /** @internal AnchorHost */
  anchorLifecycle(anchor: StreamAnchor<unknown>, cancel: boolean): void {
    // The last sender to attach is the live one (those before it detached).
    const bind = anchor._tailBind;
    if (bind !== null) this.#s.mux?.signalLifecycle(bind, cancel);
    else if (!cancel) {
      this.#s.locals.get(anchor)?.onStop?.();
      const stop = this.#s.perStreamStops.get(anchor);
      if (stop !== undefined) stop();
      // Asked before the connection arrived: it goes out when it does (the mux's early signal).
      else for (const b of this.#s.perStreamBinds.values()) if (b.anchor === anchor) b.stop = true;
    }
  }

  /** `_anchor_attach`: answer a producer's attach from this node's state (never waits). */
  onAttach(from: PeerId, body: unknown): unknown {
    const req = attachRequestSchema.safeParse(body);
    if (!req.success)
      return { Err: { reason: `malformed attach request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle, supported_transport_keys: keys, lane_key: laneKey, session_id: claimedSession } = req.data;
    if (handle.hi !== this.#s.workerId) return { Err: { reason: 'the handle belongs to another worker' } };
    if ((handle.lo & MPSC_ANCHOR_BIT) !== 0n)
      return refuse(this.#s.metrics, 'the anchor is MPSC; use _mpsc_anchor_attach');
    const anchor = this.#s.anchors.get(handle.lo);
    if (req.data.resume !== undefined) return this.#onResume(from, anchor, req.data.resume, laneKey);
    if (anchor === undefined || anchor.finished) return refuse(this.#s.metrics, 'unknown or finished anchor');
    const mux = this.#s.mux;
    const offersMux = mux !== null && keys.includes(MESSENGER_MUX_KEY);
    if (!anchor._attachable) {
      if (req.data.attach_id !== undefined && offersMux) {
        const again = this.#attachAgain(from, anchor, req.data.attach_id, laneKey);
        if (again !== null) return again;
      }
      const bind = anchor.bind;
      if (bind !== null && bind === anchor._tailBind && bind.peer === null && !bind.ended) {
        if (bind.claimed) return refuse(this.#s.metrics, 'already streaming through a pre-bound slot');
        // A pre-bind is the ticket holder's: only an attach naming the ticket's session may adopt or
        // release it. Anyone else who knows the handle is refused and changes nothing.
        if (claimedSession !== bind.sessionId) {
          this.#s.metrics.anchorOperation('attach', 'error', 'mux');
          return refuse(
            this.#s.metrics,
            'the anchor is pre-bound: attach with its ticket (AttachOptions.ticket) or open it with openAnchorStream',
          );
        }
        if (!offersMux) {
          mux?.releaseBind(bind);
          anchor._unfeed();
          // No sender and no bind any more: the unattached timer runs again (every limit finite).
          this.anchorUnattached(anchor);
          return refuse(
            this.#s.metrics,
            `the anchor is pre-bound to ${MESSENGER_MUX_KEY}, which the sender does not offer`,
          );
        }
        // Adopt the unclaimed pre-bind: the ticket's session and terms.
        this.#s.metrics.anchorOperation('attach', 'success', 'mux');
        return attachOk(muxTerms(this.#s, bind));
      }
      return refuse(
        this.#s.metrics,
        anchor._waitingFull ? WAITING_FULL : 'the anchor already has a sender (AlreadyAttached)',
      );
    }
    // From here the anchor takes this sender: at once, or behind one that detached (read first).
    if (offersMux) {
      const bind = mux!.bind(anchor.localId, this.#bindOwner(anchor), from, laneKey);
      if (req.data.attach_id !== undefined) this.#attachIds.set(bind, req.data.attach_id);
      anchor._feed(bind.buffer, 'mux', bind);
      this.#s.metrics.anchorOperation('attach', 'success', 'mux');
      return attachOk(muxTerms(this.#s, bind));
    }
    if (this.#s.perStreamEndpoint !== null && (keys.length === 0 || keys.includes(TCP_STREAM_KEY))) {
      // The anchor waits on the buffer the connection will fill, so a reader parked on it is woken by
      // the first frame; feeding it also marks the anchor taken (a second attach is refused).
      const buffer = new SlotBuffer(ANCHOR_CHANNEL_DEPTH);
      const pending: PendingPerStream = { anchor, buffer };
      const { session, key } = pendPerStream(this.#s, pending);
      anchor._feed(buffer, 'legacy', null, null, session, from, (error) => {
        // A waiting sender the anchor will never read: forget its pending attach, or drop its connection.
        if (this.#s.perStreamBinds.get(key) === pending) this.#s.perStreamBinds.delete(key);
        pending.abort?.(error);
      });
      this.#s.metrics.anchorOperation('attach', 'success', TCP_STREAM_KEY);
      return attachOk(perStreamTerms(this.#s, session, this.#s.perStreamEndpoint));
    }
    return refuse(this.#s.metrics, `no common streaming transport (offered: ${keys.join(', ') || 'none'})`);
  }

  /**
   * `_anchor_detach {handle, session_id}`: the sender of that session handed over its Detached. From
   * here a new sender may attach (read after the rest of this one's frames), even before the
   * Detached record arrives or the consumer reads it. Answers `{Ok: null}` for a live anchor.
   */
  onDetach(from: PeerId, body: unknown): unknown {
    const req = anchorRefSchema.safeParse(body);
    if (!req.success)
      return { Err: { reason: `malformed detach request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle, session_id: session } = req.data;
    const anchor =
      handle.hi === this.#s.workerId && (handle.lo & MPSC_ANCHOR_BIT) === 0n
        ? this.#s.anchors.get(handle.lo)
        : undefined;
    if (anchor === undefined || anchor.finished) return { Err: { reason: 'unknown or finished anchor' } };
    // Only the last sender to attach counts: an earlier one's late request, or a stranger's, changes nothing.
    if (session !== undefined) anchor._remoteDetached(session, from);
    return { Ok: null };
  }
}
