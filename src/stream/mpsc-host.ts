/**
 * MPSC anchors of a node (docs/protocol.md §8 "MPSC anchors"): creating them, answering
 * `_mpsc_anchor_attach`, `_mpsc_anchor_detach` and `_mpsc_anchor_cancel`, and attaching this node's
 * senders to them (through the producer side's attach paths).
 */
import type { PeerId } from '../messenger/types.ts';
import { ConfigError } from '../mux/config.ts';
import type { Bind, BindOwner } from '../mux/bind.ts';
import type { Mux } from '../mux/mux.ts';
import { SlotBuffer } from '../mux/slot-buffer.ts';
import { randomU64 } from '../runtime/runtime.ts';
import { MESSENGER_MUX_KEY, MPSC_ANCHOR_BIT, TCP_STREAM_KEY } from '../wire/constants.ts';
import {
  MPSC_ATTACH_HANDLER,
  attachRequestSchema,
  mpscAttachOk,
  mpscAttachResponseSchema,
  mpscCancelRequestSchema,
  mpscDetachRequestSchema,
} from './attach-messages.ts';
import { muxTerms, pendPerStream, perStreamTerms } from './attach-answer.ts';
import { StreamError } from './errors.ts';
import { formatHandle, parseHandle } from './handle.ts';
import { MPSC_MAX_SENDERS, MpscAnchor, MpscFeed } from './mpsc-anchor.ts';
import type { MpscAnchorOptions, MpscHost } from './mpsc-anchor.ts';
import { MpscSender } from './mpsc-sender.ts';
import { liveFeedOptions } from './live-feed.ts';
import { LocalPort } from './port.ts';
import type { StreamSender } from './sender.ts';
import { ANCHOR_CHANNEL_DEPTH, refuse, type NodeState, type PendingPerStream } from './node-state.ts';
import type { UnattachedReaper } from './unattached.ts';
import { attachRefused, type ProducerSide, type AttachOptions } from './producer.ts';
import type { ResumeFailedError } from './errors.ts';
import { RESUME_UNKNOWN, type ResumeDesk, type ResumeRequest, type ResumeTarget } from './resume-desk.ts';

/**
 * The mux side of one MPSC sender's bind: the anchor learns ends from the buffer itself; a lost
 * link suspends the sender for its producer's resume (docs/protocol.md §8.3).
 */
class MpscBindOwner implements BindOwner, ResumeTarget {
  readonly anchor: MpscAnchor<unknown>;
  readonly #desk: ResumeDesk;
  /** Set right after the bind is made (the feed reads the bind's buffer). */
  feed: MpscFeed = null as unknown as MpscFeed;
  constructor(anchor: MpscAnchor<unknown>, desk: ResumeDesk) {
    this.anchor = anchor;
    this.#desk = desk;
  }
  onClaimed(bind: Bind): void {
    this.#desk.claimed(bind);
  }
  onEnded(): void {}
  suspend(bind: Bind): boolean {
    return this.#desk.suspend(this, bind);
  }
  get open(): boolean {
    return !this.anchor.finished && !this.feed.ended;
  }
  received(bind: Bind): number | null {
    return this.anchor._received(this.feed, bind);
  }
  unread(): number {
    return this.anchor._unread(this.feed);
  }
  suspended(): void {
    this.anchor._suspendedFeed(this.feed);
  }
  resumed(_old: Bind, fresh: Bind): void {
    this.anchor._resumedFeed(this.feed, fresh);
  }
  resumeFailed(_bind: Bind, error: ResumeFailedError): void {
    this.anchor._resumeFailedFeed(this.feed, error);
  }
}

/** The bind a feed's stream goes on on now: the newest a resume made. */
function newestBind(feed: MpscFeed): Bind {
  return feed.next?.[feed.next.length - 1] ?? feed.bind!;
}

/** A mux feed's release and stop/cancel, on whichever bind is its newest. */
function muxFeedHooks(feed: MpscFeed, mux: Mux): void {
  feed.release = () => mux.releaseBind(newestBind(feed));
  feed.lifecycle = (cancel) => {
    const bind = newestBind(feed);
    if (!bind.ended) mux.signalLifecycle(bind, cancel);
    // A suspended sender's bind has ended: its stop goes with the resumed one (a cancel ends the anchor).
    else if (!cancel) feed.stopPending = true;
  };
}

/** The MPSC side of a node: its MPSC anchors and their attach, detach and cancel handlers. */
export class MpscHostSide implements MpscHost {
  readonly #s: NodeState;
  readonly #reaper: UnattachedReaper;
  readonly #producer: ProducerSide;
  readonly #desk: ResumeDesk;

  constructor(state: NodeState, reaper: UnattachedReaper, producer: ProducerSide, desk: ResumeDesk) {
    this.#s = state;
    this.#reaper = reaper;
    this.#producer = producer;
    this.#desk = desk;
  }

  /** See `LanemuxNode.createMpscAnchor`. */
  createMpscAnchor<T = unknown>(options: MpscAnchorOptions = {}): MpscAnchor<T> {
    this.#s.assertOpen();
    const maxSenders = options.maxSenders ?? MPSC_MAX_SENDERS;
    if (!Number.isInteger(maxSenders) || maxSenders < 1)
      throw new ConfigError('maxSenders', `must be a positive integer, got ${String(maxSenders)}`);
    let localId: bigint;
    do localId = randomU64(this.#s.runtime) | MPSC_ANCHOR_BIT;
    while (this.#s.mpscAnchors.has(localId));
    const anchor = new MpscAnchor<T>(this, formatHandle({ workerId: this.#s.workerId, localId }), localId, maxSenders);
    this.#s.mpscAnchors.set(localId, anchor as MpscAnchor<unknown>);
    this.#s.metrics.activeAnchors++;
    this.mpscIdle(anchor as MpscAnchor<unknown>);
    return anchor;
  }

  /** @internal MpscHost */
  mpscDone(anchor: MpscAnchor<unknown>, cancelled: boolean): void {
    if (this.#s.mpscAnchors.get(anchor.localId) !== anchor) return;
    this.#s.mpscAnchors.delete(anchor.localId);
    this.#s.metrics.activeAnchors--;
    this.#desk.drop(anchor);
    if (cancelled) this.#s.metrics.anchorOperation('cancel', 'success', 'mpsc');
    this.#s.drain?.poke();
  }

  /** @internal MpscHost: the error of a sender's part that ended without a terminal, when its node drained. */
  dropped(peer: PeerId | null): StreamError | null {
    return this.#s.peerDrains.dropped(peer);
  }

  /** @internal MpscHost: the anchor has no sender; it ends after the unattached timeout unless one attaches. */
  mpscIdle(anchor: MpscAnchor<unknown>): void {
    this.#reaper.watchMpsc(anchor);
  }

  /**
   * `_mpsc_anchor_attach`: negotiated as `_anchor_attach` is (the mux when both sides offer it,
   * else the per-stream path). Every sender gets its own bind — session, slot, credit — and a
   * sender id.
   */
  onMpscAttach(from: PeerId, body: unknown): unknown {
    const req = attachRequestSchema.safeParse(body);
    if (!req.success)
      return { Err: { reason: `malformed attach request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle, supported_transport_keys: keys, lane_key: laneKey } = req.data;
    if (handle.hi !== this.#s.workerId) return { Err: { reason: 'the handle belongs to another worker' } };
    if ((handle.lo & MPSC_ANCHOR_BIT) === 0n)
      return refuse(this.#s.metrics, 'the anchor is not MPSC; use _anchor_attach');
    const anchor = this.#s.mpscAnchors.get(handle.lo);
    // A resume goes on with a sender already counted: a sealed or full anchor takes it.
    if (req.data.resume !== undefined) return this.#onResume(from, anchor, req.data.resume, laneKey);
    if (anchor === undefined) return refuse(this.#s.metrics, 'unknown or finished anchor');
    const refusal = anchor._refusal();
    if (refusal !== null) return refuse(this.#s.metrics, refusal);
    const mux = this.#s.mux;
    if (mux !== null && keys.includes(MESSENGER_MUX_KEY)) {
      const senderId = anchor._nextSenderId();
      const owner = new MpscBindOwner(anchor, this.#desk);
      const bind = mux.bind(anchor.localId, owner, from, laneKey);
      const feed = (owner.feed = new MpscFeed(senderId, 'mux', bind.buffer, from, bind));
      muxFeedHooks(feed, mux);
      anchor._add(feed);
      this.#s.metrics.anchorOperation('attach', 'success', 'mux');
      return mpscAttachOk({ ...muxTerms(this.#s, bind), senderId });
    }
    if (this.#s.perStreamEndpoint !== null && (keys.length === 0 || keys.includes(TCP_STREAM_KEY))) {
      const senderId = anchor._nextSenderId();
      const buffer = new SlotBuffer(ANCHOR_CHANNEL_DEPTH);
      const feed = new MpscFeed(senderId, 'legacy', buffer, from, null);
      const pending: PendingPerStream = { anchor, buffer, feed };
      const { session, key } = pendPerStream(this.#s, pending);
      // Until the connection arrives, closing the feed just forgets the pending attach, and a stop waits for it.
      feed.release = () => this.#s.perStreamBinds.delete(key);
      feed.lifecycle = (cancel) => {
        if (!cancel) pending.stop = true;
      };
      anchor._add(feed);
      this.#s.metrics.anchorOperation('attach', 'success', TCP_STREAM_KEY);
      return mpscAttachOk({ ...perStreamTerms(this.#s, session, this.#s.perStreamEndpoint), senderId });
    }
    return refuse(this.#s.metrics, `no common streaming transport (offered: ${keys.join(', ') || 'none'})`);
  }

  /** A resume attach (docs/protocol.md §8.3): the suspended sender goes on on a new bind, with its sender id. */
  #onResume(
    from: PeerId,
    anchor: MpscAnchor<unknown> | undefined,
    resume: ResumeRequest,
    laneKey: bigint | undefined,
  ): unknown {
    const mux = this.#s.mux;
    if (mux === null || anchor === undefined || anchor.finished) return RESUME_UNKNOWN;
    let feed: MpscFeed | null = null;
    const r = this.#desk.resume(from, anchor, anchor.localId, resume, (credit, target) => {
      // The desk matched the anchor: its suspended binds are all MPSC sender binds.
      feed = (target as MpscBindOwner).feed;
      const owner = new MpscBindOwner(anchor, this.#desk);
      owner.feed = feed;
      const bind = mux.bind(anchor.localId, owner, from, laneKey, credit);
      // Sent with the bind's claim (the early signal).
      if (feed.stopPending) mux.signalLifecycle(bind, false);
      feed.stopPending = false;
      return bind;
    });
    if ('Err' in r || feed === null) return r;
    return mpscAttachOk({
      ...muxTerms(this.#s, r.bind),
      resumeOffset: r.offset,
      senderId: (feed as MpscFeed).senderId,
    });
  }

  /** `_mpsc_anchor_detach`: the sender's own peer removes it (its slot closes; the consumer reads `detached`). */
  onMpscDetach(from: PeerId, body: unknown): unknown {
    const req = mpscDetachRequestSchema.safeParse(body);
    if (!req.success)
      return { Err: { reason: `malformed detach request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle, sender_id: senderId } = req.data;
    const anchor = handle.hi === this.#s.workerId ? this.#s.mpscAnchors.get(handle.lo) : undefined;
    if (anchor === undefined || !anchor._detachSender(Number(senderId), from))
      return { Err: { reason: 'unknown MPSC anchor or sender' } };
    this.#s.metrics.anchorOperation('detach', 'success', 'mpsc');
    return { Ok: null };
  }

  /** `_mpsc_anchor_cancel`: cancel the whole anchor (every sender's slot closes). */
  onMpscCancel(body: unknown): unknown {
    const req = mpscCancelRequestSchema.safeParse(body);
    if (!req.success)
      return { Err: { reason: `malformed cancel request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle } = req.data;
    const anchor = handle.hi === this.#s.workerId ? this.#s.mpscAnchors.get(handle.lo) : undefined;
    if (anchor === undefined) return { Err: { reason: 'unknown MPSC anchor' } };
    anchor.cancel();
    return { Ok: null };
  }

  /** See `LanemuxNode.attachMpscAnchor`. */
  async attachMpscAnchor<T = unknown>(handle: string, options: AttachOptions = {}): Promise<MpscSender<T>> {
    this.#s.assertOpen();
    const live = liveFeedOptions(options, 'attachMpscAnchor');
    const h = parseHandle(handle);
    options.signal?.throwIfAborted();
    if ((h.localId & MPSC_ANCHOR_BIT) === 0n)
      throw new StreamError('ERR_ATTACH_REFUSED', 'the handle is not an MPSC anchor: use attachAnchor');
    if (h.workerId === this.#s.workerId) return this.#producer.live(this.#attachMpscLocal<T>(h.localId, options), live);
    const peer = await this.#producer.peerOf(h, options);
    const raw = await this.#producer.requestAttach(peer, MPSC_ATTACH_HANDLER, h, options);
    const parsed = mpscAttachResponseSchema.safeParse(raw);
    if (!parsed.success)
      throw new StreamError(
        'ERR_ATTACH_REFUSED',
        `malformed MPSC attach answer: ${parsed.error.issues[0]?.message ?? ''}`,
      );
    if ('Err' in parsed.data) throw attachRefused('MPSC attach', parsed.data.Err);
    const ok = parsed.data.Ok;
    const senderId = Number(ok.sender_id);
    const sender = (await this.#producer.openAttached<T>(
      peer,
      h,
      ok,
      options.signal,
      (init) => new MpscSender<T>(init, senderId),
    )) as MpscSender<T>;
    return this.#producer.live(sender, live);
  }

  #attachMpscLocal<T>(localId: bigint, options: AttachOptions): MpscSender<T> {
    const anchor = this.#s.mpscAnchors.get(localId);
    const refusal = anchor === undefined ? 'unknown or finished anchor' : anchor._refusal();
    if (anchor === undefined || refusal !== null) {
      this.#s.metrics.anchorOperation('attach', 'error', 'local');
      throw new StreamError('ERR_ATTACH_REFUSED', refusal ?? 'unknown or finished anchor');
    }
    const buffer = new SlotBuffer(ANCHOR_CHANNEL_DEPTH);
    const port = new LocalPort(buffer);
    const feed = new MpscFeed(anchor._nextSenderId(), 'local', buffer, null, null);
    feed.onTake = () => port.drained();
    feed.release = (error) => port.fail(error);
    const sender: MpscSender<T> = new MpscSender<T>(
      {
        transport: null,
        signal: options.signal,
        onDone: () => {
          if (this.#s.liveSenders.delete(sender as StreamSender<unknown>)) this.#s.drain?.poke();
        },
      },
      feed.senderId,
    );
    port.onTerminal = () => sender._retire('Sent');
    port.onFailed = () => {
      // The anchor was cancelled or went away: an idle producer learns it from cancelSignal.
      sender._closed(port.closeError);
      sender._retire('Discarded');
    };
    sender._bind(port);
    this.#s.liveSenders.add(sender as StreamSender<unknown>);
    anchor._add(feed);
    this.#s.metrics.anchorOperation('attach', 'success', 'local');
    return sender;
  }
}
