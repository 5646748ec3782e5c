/**
 * The producer side of a node: `attachAnchor` (same worker: straight into the anchor; otherwise
 * `_anchor_attach` negotiates the mux or the per-stream path, docs/protocol.md §8, §9) and
 * `openAnchorStream` from a zero-RTT ticket. The MPSC host opens its senders through the same paths.
 */
import { LanemuxError } from '../errors.ts';
import { closedOnPurpose } from '../mux/errors.ts';
import { randomU64 } from '../runtime/runtime.ts';
import { resolveLimits } from '../credit/negotiate.ts';
import type { PeerId, WaitOptions } from '../messenger/types.ts';
import { waitForPeer } from './peer-wait.ts';
import type { EgressSlot, EgressSlotOwner, Retirement } from '../mux/egress-slot.ts';
import type { HeartbeatSender } from '../mux/heartbeats.ts';
import { SlotBuffer } from '../mux/slot-buffer.ts';
import { MESSENGER_MUX_KEY, MPSC_ANCHOR_BIT, TCP_STREAM_KEY } from '../wire/constants.ts';
import {
  ATTACH_HANDLER,
  DETACH_HANDLER,
  MPSC_ATTACH_HANDLER,
  attachResponseSchema,
  mpscAttachResponseSchema,
  u128,
} from './attach-messages.ts';
import { parseTicket } from './ticket.ts';
import type { StreamOpenTicket } from './ticket.ts';
import { StreamError } from './errors.ts';
import { parseHandle, u64Hex, workerKey } from './handle.ts';
import type { AnchorHandle } from './handle.ts';
import { LocalPort, MuxPort, PerStreamPort } from './port.ts';
import { StreamSender } from './sender.ts';
import type { SenderInit } from './sender.ts';
import { ANCHOR_CHANNEL_DEPTH, WAITING_FULL, type NodeState } from './node-state.ts';
import { hex } from './control-fields.ts';
import { ResumeLink, type ResumeAnswer } from './resume-link.ts';
import { ResumeRegistry, type ResumeTransport } from './resume-registry.ts';
import { DrainAwareOwner, drainingError, failForDrain, type PeerDrains } from './drain-notice.ts';
import { liveFeedOptions, type LiveFeedOptions, type OverrunPolicy } from './live-feed.ts';
import { perStreamLost } from './per-stream.ts';

/** Options of {@link LanemuxNode.attachAnchor}. */
export interface AttachOptions {
  /** Aborts the attach, and later departs the stream. */
  readonly signal?: AbortSignal;
  /** Placement hint: the receiver puts the stream on lane `splitmix64(key) % lanes`. */
  readonly laneKey?: bigint;
  /** Attach timeout in ms. Defaults to 10,000. */
  readonly timeoutMs?: number;
  /**
   * The anchor's ticket, when it was pre-bound (`prebindAnchor`) and this producer prefers an attach
   * to `openAnchorStream`: the attach names the ticket's session, which is what lets it adopt the
   * pre-bind. Without it, an attach to a pre-bound anchor is refused and the pre-bind is left alone
   * (knowing a handle is not enough to take a stream). Defaults to none.
   */
  readonly ticket?: string;
  /**
   * What the sender does when its records outrun the consumer's credit (docs/protocol.md §10.9): `'block'`
   * (the default) makes `send()` wait; for a live source that cannot wait, `'drop-oldest'` drops the
   * oldest record waiting for credit once more than `overrunLimit` wait, and the next record the
   * consumer reads carries a gap marker (`anchor.gap`, `consume({ item(value, gap) })`, an MPSC item's
   * `gap`); `'fail'` ends the stream with `ERR_FEED_OVERRUN` instead. Either way `send()` never waits,
   * and `sender.overruns` and `streaming_overruns_total` count what was dropped or refused.
   */
  readonly overrun?: OverrunPolicy;
  /**
   * A live stream's records that may wait for credit (`overrun` other than `'block'`), 1..65,536.
   * Defaults to 256.
   */
  readonly overrunLimit?: number;
}

/** Options of {@link LanemuxNode.openAnchorStream}. */
export type OpenOptions = Pick<AttachOptions, 'signal' | 'overrun' | 'overrunLimit'>;

/** How many times an attach is made again after its link was lost (docs/protocol.md §8.3). */
const ATTACH_RETRIES = 3;

/**
 * True for what a link lost under a request rejects it with: the peer gone (the request may or may
 * not have been answered), or already gone when it was made (it never went out) — not a peer that
 * closed on purpose (a drain's GOAWAY, a close).
 */
function lostWithLink(e: unknown): boolean {
  return (
    e instanceof LanemuxError && (e.code === 'ERR_PEER_GONE' || e.code === 'ERR_UNKNOWN_PEER') && !closedOnPurpose(e)
  );
}

/** How long a remote sender's `detach()` waits for the consumer's acknowledgement (`_anchor_detach`), ms. */
const DETACH_ACK_TIMEOUT = 10_000;

const noop = (): void => {};

/** Builds the sender object of an attach (a plain or an MPSC sender). */
export type SenderFactory<T> = (init: SenderInit) => StreamSender<T>;

/** The plain sender factory, shared (not a closure per stream). */
const plainSender: SenderFactory<unknown> = (init) => new StreamSender<unknown>(init);

/** The error of a refused attach answer: `ERR_DRAINING` when the consumer says it drains (docs/protocol.md §8.4). */
export function attachRefused(what: string, err: { reason: string; code?: string | undefined }): StreamError {
  const message = `${what} refused: ${err.reason}`;
  return err.code === 'ERR_DRAINING' ? drainingError(message) : new StreamError('ERR_ATTACH_REFUSED', message);
}

/** A mux sender's slot callbacks, as one object (not three closures per stream). */
class MuxSenderOwner implements EgressSlotOwner {
  readonly #sender: StreamSender<unknown>;
  readonly #peer: PeerId;
  readonly #drains: PeerDrains;
  constructor(sender: StreamSender<unknown>, peer: PeerId, drains: PeerDrains) {
    this.#sender = sender;
    this.#peer = peer;
    this.#drains = drains;
  }
  onSlotClosed(error: LanemuxError | null): void {
    this.#sender._closed(this.#drains.slotClosed(this.#peer, error));
  }
  adoptWaiters(
    error: LanemuxError | null,
    waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }>,
  ): boolean {
    return failForDrain(this.#drains, this.#peer, error, waiters);
  }
  onLifecycle(cancel: boolean): void {
    this.#sender._lifecycle(cancel);
  }
  onRetired(outcome: Retirement): void {
    this.#sender._retire(outcome);
  }
}

/** Heartbeats of one mux sender at its consumer's interval (the mux schedules them). */
class SenderHeartbeat implements HeartbeatSender {
  readonly #sender: StreamSender<unknown>;
  readonly interval: number;
  constructor(sender: StreamSender<unknown>, interval: number) {
    this.#sender = sender;
    this.interval = interval;
  }
  heartbeat(): void {
    this.#sender._heartbeat();
  }
}

/**
 * `t` if it may open the anchor `h` names: a ticket that says which anchor it was issued for
 * (`anchor_id`, which lanemux always writes) must name this one. Checked before anything is sent,
 * so a ticket handed over with the wrong handle fails here instead of opening a slot nobody reads.
 */
function ticketFor(h: AnchorHandle, t: StreamOpenTicket): StreamOpenTicket {
  if (t.anchor_id !== undefined && t.anchor_id !== h.localId) {
    throw new StreamError(
      'ERR_INVALID_TICKET',
      `the ticket was issued for anchor ${u64Hex(t.anchor_id)}, not for ${u64Hex(h.localId)} (the handle's): pass each anchor's own ticket`,
    );
  }
  return t;
}

/** The producer side of a node: attaching to anchors and opening streams from tickets. */
export class ProducerSide implements ResumeTransport {
  readonly #s: NodeState;
  /** The sender id of each resumable MPSC sender: its resume's answer must name the same one. */
  readonly #mpscIds = new WeakMap<ResumeLink, number>();
  /** How a peer that is not connected is waited for; the node's discovery replaces it (discovery-dial.ts). */
  findPeer: (peer: PeerId, options: WaitOptions) => Promise<PeerId>;

  constructor(state: NodeState) {
    this.#s = state;
    this.findPeer = (peer, options) => waitForPeer(state.messenger, peer, options);
    const o = state.resumeOptions;
    if (o !== null && state.resumePeers !== null) {
      const resume = new ResumeRegistry(o, state.resumePeers, state.messenger, state.runtime, state.metrics, this);
      state.resume = resume;
      // The lanes' replay logs keep live streams' records against the same budget as the rings.
      if (state.mux !== null) state.mux.replay = { budget: resume.budget, ping: resume.lanePing };
    }
  }

  /** See `LanemuxNode.attachAnchor`. */
  async attachAnchor<T = unknown>(handle: string, options: AttachOptions = {}): Promise<StreamSender<T>> {
    this.#s.assertOpen();
    const live = liveFeedOptions(options, 'attachAnchor');
    const h = parseHandle(handle);
    options.signal?.throwIfAborted();
    if ((h.localId & MPSC_ANCHOR_BIT) !== 0n)
      throw new StreamError('ERR_ATTACH_REFUSED', 'the handle is an MPSC anchor: use attachMpscAnchor');
    if (h.workerId === this.#s.workerId) return this.live(this.#attachLocal<T>(h.localId, options), live);
    const peer = await this.peerOf(h, options);
    const raw = await this.#attachAcrossLoss(peer, h, options);
    const parsed = attachResponseSchema.safeParse(raw);
    if (!parsed.success)
      throw new StreamError('ERR_ATTACH_REFUSED', `malformed attach answer: ${parsed.error.issues[0]?.message ?? ''}`);
    if ('Err' in parsed.data) throw attachRefused('attach', parsed.data.Err);
    const sender = await this.openAttached<T>(
      peer,
      h,
      parsed.data.Ok,
      options.signal,
      (init) => new StreamSender<T>(init),
      true,
    );
    return this.live(sender, live);
  }

  /** Make `sender` a live stream when its options asked for one (before the application has it). */
  live<S extends StreamSender<unknown>>(sender: S, options: LiveFeedOptions | null): S {
    if (options !== null && !sender.closed) sender._live(options, this.#s);
    return sender;
  }

  /** Why no mux stream may be opened toward `peer`: its HELLO does not list the mux key (docs/protocol.md §3.1). Null if it may. */
  #noMuxToward(peer: PeerId): StreamError | null {
    const keys = this.#s.messenger.peer(peer)?.transportKeys;
    if (keys === undefined || keys.includes(MESSENGER_MUX_KEY)) return null;
    return new StreamError(
      'ERR_ATTACH_REFUSED',
      `peer ${peer} did not advertise ${MESSENGER_MUX_KEY} in its HELLO (keys: ${keys.join(', ') || 'none'}): no mux stream is opened toward it`,
    );
  }

  /**
   * The connected peer of the handle's worker, waiting for one whose link is coming back (or found
   * through discovery); rejects `ERR_UNKNOWN_PEER`, and at once `ERR_DRAINING` when that peer said it drains.
   */
  peerOf(h: AnchorHandle, options: WaitOptions = {}): Promise<PeerId> {
    const peer = workerKey(h.workerId);
    this.#s.peerDrains.refuseToward(peer);
    return this.findPeer(peer, options);
  }

  /**
   * `_anchor_attach`, made again when its request or answer is lost with the link toward a peer
   * that resumes (docs/protocol.md §8.3 "Attach across a lost link"): once the peer is back, with the
   * same `attach_id`, so a consumer that answered the lost request answers again. Within the
   * attach's `timeoutMs` overall, at most {@link ATTACH_RETRIES} times.
   */
  async #attachAcrossLoss(peer: PeerId, h: AnchorHandle, options: AttachOptions): Promise<unknown> {
    const resume = this.#s.resume;
    if (resume === null || !resume.negotiated(peer)) return this.requestAttach(peer, ATTACH_HANDLER, h, options);
    const rt = this.#s.runtime;
    const id = randomU64(rt);
    const timeoutMs = options.timeoutMs ?? 10_000;
    const until = rt.now() + timeoutMs;
    for (let retries = 0; ; retries++) {
      const left = Math.max(1, until - rt.now());
      try {
        return await this.requestAttach(peer, ATTACH_HANDLER, h, { ...options, timeoutMs: left }, id);
      } catch (e) {
        if (retries >= ATTACH_RETRIES || !lostWithLink(e) || options.signal?.aborted || rt.now() >= until) throw e;
        if (!resume.negotiated(peer)) throw e;
        // Back within the time left, or the wait's own ERR_UNKNOWN_PEER (retryable) ends the attach.
        const wait = Math.max(1, until - rt.now());
        await this.peerOf(h, options.signal ? { timeoutMs: wait, signal: options.signal } : { timeoutMs: wait });
      }
    }
  }

  /** Send an attach request (`_anchor_attach` or `_mpsc_anchor_attach`) offering this node's transports. */
  async requestAttach(
    peer: PeerId,
    handler: string,
    h: AnchorHandle,
    options: AttachOptions,
    attachId?: bigint,
  ): Promise<unknown> {
    // The mux is offered only to a peer whose HELLO lists it (docs/protocol.md §3.1).
    const keys =
      this.#noMuxToward(peer) === null
        ? this.#s.offeredKeys
        : this.#s.offeredKeys.filter((k) => k !== MESSENGER_MUX_KEY);
    const body: Record<string, unknown> = { handle: u128(h.workerId, h.localId), supported_transport_keys: keys };
    if (options.laneKey !== undefined) body['lane_key'] = `0x${BigInt.asUintN(64, options.laneKey).toString(16)}`;
    if (attachId !== undefined) body['attach_id'] = hex(attachId);
    if (options.ticket !== undefined)
      body['session_id'] = `0x${ticketFor(h, parseTicket(options.ticket)).routing_session_id.toString(16)}`;
    try {
      return await this.#s.messenger.request(peer, handler, body, {
        timeoutMs: options.timeoutMs ?? 10_000,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (cause) {
      this.#s.metrics.anchorOperation('attach', 'error', 'none');
      throw cause;
    }
  }

  /** Open what an attach answer settled on: a mux slot, or a per-stream connection. */
  async openAttached<T>(
    peer: PeerId,
    h: AnchorHandle,
    ok: {
      streaming_transport_key: string;
      heartbeat_interval_ms: number;
      routing_session_id: bigint;
      initial_credit: number;
      slot_byte_budget: number;
      lane: number;
      endpoint?: string | undefined;
    },
    signal: AbortSignal | undefined,
    factory: SenderFactory<T>,
    detachAck = false,
  ): Promise<StreamSender<T>> {
    if (ok.streaming_transport_key === MESSENGER_MUX_KEY) {
      if (this.#s.mux === null)
        throw new StreamError(
          'ERR_ATTACH_REFUSED',
          `the consumer answered ${MESSENGER_MUX_KEY}, which this node did not offer`,
        );
      const noMux = this.#noMuxToward(peer);
      if (noMux !== null) throw noMux;
      // Zero credit fails the attach: resolveLimits names the key and "initial_credit = 0".
      const limits = resolveLimits(
        { initialCredit: ok.initial_credit, slotByteBudget: ok.slot_byte_budget },
        { transportKey: ok.streaming_transport_key },
      );
      return this.#openMux<T>(
        peer,
        ok.lane,
        h.localId,
        ok.routing_session_id,
        limits,
        ok.heartbeat_interval_ms,
        signal,
        'attach',
        factory,
        detachAck ? h : null,
        h,
      );
    }
    if (ok.streaming_transport_key === TCP_STREAM_KEY && this.#s.perStream !== null && ok.endpoint !== undefined) {
      const conn = await this.#s.perStream.connect(
        ok.endpoint,
        h.localId,
        ok.routing_session_id,
        signal ? { signal } : {},
      );
      const sender = factory({
        transport: TCP_STREAM_KEY,
        signal,
        onDone: () => this.#senderDone(sender as StreamSender<unknown>),
        onDetach: detachAck ? () => this.#ackDetach(peer, h, ok.routing_session_id) : undefined,
      });
      // Idle heartbeats at the consumer's interval (its watchdog), and its stop request.
      const port = new PerStreamPort(conn, {
        runtime: this.#s.runtime,
        heartbeatMs: ok.heartbeat_interval_ms,
        onStop: () => sender._lifecycle(false),
      });
      conn.onClose((error) => {
        // A lost connection (not a local close): with resume on, say that this path cannot resume.
        sender._closed(
          error !== null && error.code === 'ERR_SENDER_DROPPED' && this.#s.resumeOptions !== null
            ? perStreamLost(error)
            : error,
        );
        // The connection closed: after a clean end every frame was handed on.
        sender._retire(error === null && sender.closed ? 'Sent' : 'Discarded');
      });
      sender._bind(port);
      this.#s.liveSenders.add(sender as StreamSender<unknown>);
      return sender;
    }
    throw new StreamError(
      'ERR_ATTACH_REFUSED',
      `the consumer chose ${ok.streaming_transport_key}, which this node cannot open`,
    );
  }

  /** See `LanemuxNode.openAnchorStream`. */
  openAnchorStream<T = unknown>(handle: string, ticket: string, options: OpenOptions = {}): Promise<StreamSender<T>> {
    // Not `async`: the open's own promise is returned as is (a wrapper cost a promise and ticks per
    // stream); a refusal here still rejects rather than throws.
    try {
      const live = liveFeedOptions(options, 'openAnchorStream');
      const open = this.#openFromTicket<T>(handle, ticket, options.signal);
      return live === null ? open : open.then((s) => this.live(s, live));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #openFromTicket<T>(handle: string, ticket: string, signal: AbortSignal | undefined): Promise<StreamSender<T>> {
    this.#s.assertOpen();
    const h = parseHandle(handle);
    const t = ticketFor(h, parseTicket(ticket));
    if (h.workerId === this.#s.workerId) {
      throw new StreamError(
        'ERR_TRANSPORT_ERROR',
        'this ticket was minted by this worker: use attachAnchor for a same-worker stream',
      );
    }
    if (this.#s.mux === null || t.streaming_transport_key !== MESSENGER_MUX_KEY) {
      throw new StreamError('ERR_ATTACH_REFUSED', `cannot open a ${t.streaming_transport_key} ticket without the mux`);
    }
    const peer = workerKey(h.workerId);
    this.#s.peerDrains.refuseToward(peer);
    if (this.#s.messenger.peer(peer) === undefined)
      return this.findPeer(peer, { signal }).then(() => this.#openFromTicket<T>(handle, ticket, signal));
    const noMux = this.#noMuxToward(peer);
    if (noMux !== null) throw noMux;
    const limits = resolveLimits(
      { initialCredit: t.initial_credit, slotByteBudget: t.slot_byte_budget },
      { transportKey: t.streaming_transport_key },
    );
    return this.#openMux<T>(
      peer,
      t.lane,
      h.localId,
      t.routing_session_id,
      limits,
      t.heartbeat_interval_ms,
      signal,
      'open',
      plainSender as SenderFactory<T>,
      h,
      h,
    );
  }

  async #openMux<T>(
    peer: PeerId,
    lane: number,
    anchorId: bigint,
    session: bigint,
    limits: { initialCredit: number; slotByteBudget: number },
    heartbeatMs: number,
    signal: AbortSignal | undefined,
    op: string,
    factory: SenderFactory<T>,
    /** The anchor of a single-sender stream, whose detach the consumer acknowledges; null for MPSC. */
    detachOf: AnchorHandle | null,
    /** The anchor the stream feeds (a single-sender or an MPSC one). */
    anchor: AnchorHandle,
  ): Promise<StreamSender<T>> {
    const mux = this.#s.mux!;
    // Mux streams — single-sender and MPSC senders alike — resume across a lost link when both
    // nodes advertise it (docs/protocol.md §8.3).
    const resume = this.#s.resume;
    const instance = resume !== null && resume.negotiated(peer) ? this.#s.messenger.peer(peer)?.instanceId : undefined;
    const mpsc = (anchor.localId & MPSC_ANCHOR_BIT) !== 0n;
    let hb: HeartbeatSender | null = null;
    const sender: StreamSender<T> = factory({
      transport: MESSENGER_MUX_KEY,
      signal,
      onDone: () => {
        this.#senderDone(sender as StreamSender<unknown>);
        if (hb !== null) mux.removeHeartbeat(hb);
      },
      onDetach: detachOf === null ? undefined : () => this.#ackDetach(peer, detachOf, session),
    });
    const link =
      instance === undefined
        ? null
        : new ResumeLink(
            resume!,
            sender as StreamSender<unknown>,
            peer,
            instance,
            anchor,
            session,
            limits.initialCredit,
            !mpsc,
          );
    if (link !== null && mpsc) this.#mpscIds.set(link, (sender as { senderId?: number }).senderId ?? 0);
    // Re-attach from a token (docs/protocol.md §8.5) is for single-sender streams.
    if (link !== null && !mpsc && resume!.history !== null) sender._resumeToken = link.token = resume!.issueToken(link);
    const drains = this.#s.peerDrains;
    const owner =
      link === null
        ? new MuxSenderOwner(sender as StreamSender<unknown>, peer, drains)
        : new DrainAwareOwner(link.firstOwner(), peer, drains);
    let slot: EgressSlot;
    try {
      // The slot holds the consumer's window and pauses its producer at the consumer's byte budget.
      slot = await mux.openSlot(peer, lane, anchorId, session, limits.initialCredit, owner, limits.slotByteBudget);
    } catch (e) {
      this.#s.metrics.anchorOperation(op, 'error', 'mux');
      throw e;
    }
    this.#s.metrics.anchorOperation(op, 'success', 'mux');
    if (link !== null) {
      link.bindSlot(slot, this.#s.messenger.peer(peer)?.epoch);
      sender._bind(link);
    } else sender._bind(new MuxPort(slot));
    if (!sender.closed) {
      this.#s.liveSenders.add(sender as StreamSender<unknown>);
      if (heartbeatMs > 0) {
        hb = new SenderHeartbeat(sender as StreamSender<unknown>, heartbeatMs);
        mux.addHeartbeat(hb);
      }
    }
    return sender;
  }

  #attachLocal<T>(localId: bigint, options: AttachOptions): StreamSender<T> {
    const anchor = this.#s.anchors.get(localId);
    if (anchor === undefined || anchor.finished)
      throw new StreamError('ERR_ATTACH_REFUSED', 'unknown or finished anchor');
    const bind = anchor.bind;
    if (!anchor._attachable) {
      // A same-worker attach releases an unclaimed pre-bind; a claimed one is AlreadyAttached.
      if (bind !== null && bind === anchor._tailBind && bind.peer === null && !bind.claimed && !bind.ended) {
        this.#s.mux?.releaseBind(bind);
        anchor._unfeed();
      } else if (anchor._waitingFull) throw new StreamError('ERR_ATTACH_REFUSED', WAITING_FULL);
      else throw new StreamError('ERR_ALREADY_ATTACHED', 'the anchor already has a sender');
    }
    const buffer = new SlotBuffer(ANCHOR_CHANNEL_DEPTH);
    const port = new LocalPort(buffer);
    // At once, or behind a sender that detached (read first).
    anchor._feed(
      buffer,
      'local',
      null,
      () => port.drained(),
      null,
      null,
      (error) => port.fail(error),
    );
    this.#s.locals.set(anchor, port);
    const sender = new StreamSender<T>({
      transport: null,
      signal: options.signal,
      onDone: () => this.#senderDone(sender as StreamSender<unknown>),
      // The anchor is this node's: the detach is known the moment it is handed over.
      onDetach: () => anchor._localDetached(buffer),
    });
    // A same-worker terminal is in the anchor's channel the moment it is handed over.
    port.onTerminal = () => sender._retire('Sent');
    port.onFailed = () => {
      // The consumer cancelled or went away: an idle producer learns it from cancelSignal.
      sender._closed(port.closeError);
      sender._retire('Discarded');
    };
    port.onStop = () => sender._lifecycle(false);
    sender._bind(port);
    this.#s.liveSenders.add(sender as StreamSender<unknown>);
    this.#s.metrics.anchorOperation('attach', 'success', 'local');
    return sender;
  }

  /** A sender is done (terminal handed over, closed or aborted): a drain counts it. */
  #senderDone(sender: StreamSender<unknown>): void {
    if (this.#s.liveSenders.delete(sender)) this.#s.drain?.poke();
  }

  /** ResumeTransport: the attach again after a lost link, naming the stream's last session (docs/protocol.md §8.3). */
  async reattach(
    link: ResumeLink,
    session: bigint,
    sent: number,
    from: number,
  ): Promise<ResumeAnswer | { refused: string; why: string | undefined }> {
    const h = link.handle;
    const body = {
      handle: u128(h.workerId, h.localId),
      supported_transport_keys: [MESSENGER_MUX_KEY],
      resume: { session: hex(session), sent, from },
    };
    // An MPSC sender resumes through the MPSC attach; its answer adds the (same) sender id.
    const mpsc = (h.localId & MPSC_ANCHOR_BIT) !== 0n;
    const raw = await this.#s.messenger.request(link.peer, mpsc ? MPSC_ATTACH_HANDLER : ATTACH_HANDLER, body, {
      timeoutMs: 10_000,
    });
    const parsed = (mpsc ? mpscAttachResponseSchema : attachResponseSchema).safeParse(raw);
    if (!parsed.success) return { refused: 'malformed answer', why: undefined };
    if ('Err' in parsed.data) return { refused: parsed.data.Err.reason, why: parsed.data.Err.resume };
    const ok = parsed.data.Ok;
    if (ok.streaming_transport_key !== MESSENGER_MUX_KEY || ok.resume_offset === undefined || ok.initial_credit === 0)
      return { refused: 'the consumer answered without resuming', why: undefined };
    if (mpsc && 'sender_id' in ok && ok.sender_id !== BigInt(this.#mpscIds.get(link) ?? 0))
      return { refused: `the consumer answered for another MPSC sender (${ok.sender_id})`, why: undefined };
    return {
      session: ok.routing_session_id,
      credit: ok.initial_credit,
      budget: ok.slot_byte_budget,
      lane: ok.lane,
      offset: ok.resume_offset,
    };
  }

  /** ResumeTransport: the new slot of a resumed stream. */
  openSlot(link: ResumeLink, answer: ResumeAnswer, owner: EgressSlotOwner): Promise<EgressSlot> {
    const mux = this.#s.mux;
    if (mux === null) return Promise.reject(new StreamError('ERR_CLOSED', 'no mux'));
    return mux.openSlot(
      link.peer,
      answer.lane,
      link.handle.localId,
      answer.session,
      answer.credit,
      new DrainAwareOwner(owner, link.peer, this.#s.peerDrains),
      answer.budget,
    );
  }

  /**
   * A remote sender's detach: tell the consumer (`_anchor_detach`) and resolve on its answer, so an
   * attach made after `await detach()` finds the anchor free. Never rejects: the Detached is handed
   * over whatever becomes of the request (peer gone, an implementation without the handler, timeout).
   */
  #ackDetach(peer: PeerId, h: AnchorHandle, session: bigint): Promise<void> {
    const body = { handle: u128(h.workerId, h.localId), session_id: u64Hex(session) };
    return this.#s.messenger.request(peer, DETACH_HANDLER, body, { timeoutMs: DETACH_ACK_TIMEOUT }).then(noop, noop);
  }
}
