/**
 * `createNode`: one lanemux node — a messenger over its transports, the mux, the anchors it
 * consumes and the senders it produces. The public entry point of the SDK.
 *
 * @example
 * ```ts
 * const server = await createNode({ transports: [tcpTransport({ port: 0 })] });
 * const client = await createNode({ transports: [tcpTransport({ listen: false })] });
 * await client.connect(server.address);
 * const anchor = client.createAnchor<string>();        // consumer
 * const sender = await server.attachAnchor<string>(anchor.handle); // producer (after the handle travels)
 * await sender.send('hello'); await sender.finalize();
 * for await (const token of anchor) console.log(token);
 * ```
 */
import type { Authenticate, CredentialSource } from '../transport/auth.ts';
import { defineAsyncDispose } from '../runtime/dispose.ts';
import type { LanemuxError } from '../errors.ts';
import { resolveLimits } from '../credit/negotiate.ts';
import { MuxMetrics } from '../metrics/mux-metrics.ts';
import type { DialEndedEvent, Messenger, PeerId } from '../messenger/types.ts';
import { ConfigError } from '../mux/config.ts';
import { validateNodeOptions } from './node-options.ts';
import { createMessenger } from '../messenger/messenger.ts';
import type { TransportAdapter } from '../transport/port.ts';
import type { MuxConfig, ResolvedMuxConfig } from '../mux/config.ts';
import type { Bind, BindEnd, BindOwner } from '../mux/bind.ts';
import type { EgressSlot, EgressSlotOwner, Retirement } from '../mux/egress-slot.ts';
import { Mux } from '../mux/mux.ts';
import type { HeartbeatSender } from '../mux/mux.ts';
import { SlotBuffer } from '../mux/slot-buffer.ts';
import { randomU64, systemRuntime } from '../runtime/runtime.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { MESSENGER_MUX_KEY } from '../wire/constants.ts';
import { decodeFrameInto, FrameKind } from '../wire/frame.ts';
import type { DecodedFrame } from '../wire/frame.ts';
import { MAX_WAITING_SENDERS, StreamAnchor } from './anchor.ts';
import type { AnchorHost, WaitingFeed } from './anchor.ts';
import {
  ATTACH_HANDLER,
  DETACH_HANDLER,
  MPSC_ATTACH_HANDLER,
  MPSC_CANCEL_HANDLER,
  MPSC_DETACH_HANDLER,
  TCP_STREAM_KEY,
  attachOk,
  attachRequestSchema,
  anchorRefSchema,
  attachResponseSchema,
  encodeTicket,
  mpscAttachOk,
  mpscAttachResponseSchema,
  mpscCancelRequestSchema,
  mpscDetachRequestSchema,
  parseTicket,
  u128,
} from './control.ts';
import type { StreamOpenTicket } from './control.ts';
import { StreamError } from './errors.ts';
import { MPSC_BIT, formatHandle, parseHandle, u64Hex, workerKey } from './handle.ts';
import type { AnchorHandle } from './handle.ts';
import { MPSC_MAX_SENDERS, MpscAnchor, MpscFeed } from './mpsc-anchor.ts';
import type { MpscAnchorOptions, MpscHost } from './mpsc-anchor.ts';
import { MpscSender } from './mpsc-sender.ts';
import { PerStreamWatchdog } from './per-stream.ts';
import type { PerStreamSink, PerStreamTransport } from './per-stream.ts';
import { LocalPort, MuxPort, PerStreamPort } from './port.ts';
import { StreamSender } from './sender.ts';
import type { SenderInit } from './sender.ts';

/** Depth of an anchor's own channel (same-worker and per-stream senders), as in the reference. */
export const ANCHOR_CHANNEL_DEPTH = 256;

/** Options of {@link createNode}: give either a `messenger`, or `transports` to build one. */
export interface NodeOptions {
  /** A messenger this node rides (see `createMessenger`); the node does not own it unless it made it. */
  readonly messenger?: Messenger;
  /** Transports to build the node's own messenger with (e.g. `[tcpTransport({ port: 0 })]`). */
  readonly transports?: readonly TransportAdapter[];
  /** Lanes offered to peers when the node builds its messenger, 1..16. Defaults to 1. */
  readonly lanes?: number;
  /** Largest message accepted when the node builds its messenger. Defaults to 1 MiB. */
  readonly maxMessageSize?: number;
  /** Worker id when the node builds its messenger. Defaults to a random one. */
  readonly workerId?: bigint;
  /**
   * When the node builds its messenger: authenticates inbound links of transports without an
   * `authenticate` of their own (see `Authenticate`, docs/security.md). Defaults to none.
   */
  readonly authenticate?: Authenticate;
  /** When the node builds its messenger: the credential its dials present (a string, or a function called per connect). */
  readonly credential?: CredentialSource;
  /**
   * An anchor no sender attached to within this many ms ends with `ERR_SENDER_DROPPED` and is
   * forgotten (the timer restarts after a detach). An MPSC anchor with no sender for this long
   * ends cleanly (its iteration is done), armed at creation and whenever its last sender's end is
   * read. A finite number of ms above 0, at most one day. Defaults to the mux's accept window (60,000).
   */
  readonly unattachedTimeout?: number;
  /** Mux configuration, validated with zod; a bad value throws naming the field. Defaults: see `MUX_DEFAULTS`. */
  readonly mux?: MuxConfig;
  /** The per-stream (legacy) transport; without one, peers that lack the mux cannot attach. */
  readonly perStream?: PerStreamTransport;
  /** Metrics registry. Defaults to a new `MuxMetrics` with the reference's names. */
  readonly metrics?: MuxMetrics;
  /** Clock, timers and randomness. Defaults to the current runtime's. */
  readonly runtime?: Runtime;
}

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
}

/** How long a remote sender's `detach()` waits for the consumer's acknowledgement (`_anchor_detach`), ms. */
const DETACH_ACK_TIMEOUT = 10_000;

/** Why an attach behind detached senders is refused (see `MAX_WAITING_SENDERS`). */
const WAITING_FULL = `the anchor's consumer has not read the streams of its earlier senders yet (${MAX_WAITING_SENDERS} wait behind the one it reads): attach again once it has read on`;

const noop = (): void => {};

/** A per-stream attach awaiting its connection: the anchor and the buffer it already reads (and the MPSC feed, if any). */
interface PendingPerStream {
  readonly anchor: StreamAnchor<unknown> | MpscAnchor<unknown>;
  readonly buffer: SlotBuffer;
  readonly feed?: MpscFeed;
  stop?: boolean;
  /** Set once the connection arrived: drops it (unless its terminal came), for a sender the anchor will never read. */
  abort?: (error: StreamError) => void;
}

/** The mux side of every MPSC sender's bind: the anchor learns ends from the buffer itself. */
const MPSC_BIND_OWNER: BindOwner = { onClaimed: () => {}, onEnded: () => {} };

/** Builds the sender object of an attach (a plain or an MPSC sender). */
type SenderFactory<T> = (init: SenderInit) => StreamSender<T>;

/** The local-id bits of a single-sender anchor (`~MPSC_BIT` within 64 bits, computed once). */
const LOCAL_ID_MASK = MPSC_BIT - 1n;

/** The plain sender factory, shared (not a closure per stream). */
const plainSender: SenderFactory<unknown> = (init) => new StreamSender<unknown>(init);

/** The anchor side of a mux bind: a stream that ended dropped or expired is forgotten at once. */
class AnchorBindOwner implements BindOwner {
  readonly #anchor: StreamAnchor<unknown>;
  readonly #forget: (anchor: StreamAnchor<unknown>, bind: Bind) => void;
  constructor(anchor: StreamAnchor<unknown>, forget: (anchor: StreamAnchor<unknown>, bind: Bind) => void) {
    this.#anchor = anchor;
    this.#forget = forget;
  }
  onClaimed(): void {}
  onEnded(bind: Bind, end: BindEnd): void {
    if (end === 'dropped' || end === 'expired') this.#forget(this.#anchor, bind);
  }
}

/** A mux sender's slot callbacks, as one object (not three closures per stream). */
class MuxSenderOwner implements EgressSlotOwner {
  readonly #sender: StreamSender<unknown>;
  constructor(sender: StreamSender<unknown>) {
    this.#sender = sender;
  }
  onSlotClosed(error: LanemuxError | null): void {
    this.#sender._closed(error);
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
    throw new StreamError('ERR_INVALID_TICKET', `the ticket was issued for anchor ${u64Hex(t.anchor_id)}, not for ${u64Hex(h.localId)} (the handle's): pass each anchor's own ticket`);
  }
  return t;
}

/** A lanemux node. Create one with {@link createNode}. */
export class LanemuxNode implements AnchorHost, MpscHost {
  static {
    // `await using node = …` where the runtime has explicit resource management.
    defineAsyncDispose(LanemuxNode.prototype);
  }

  /** This node's 64-bit worker id (the routing key in its anchor handles). */
  readonly workerId: bigint;
  readonly #messenger: Messenger;
  readonly #config: ResolvedMuxConfig;
  readonly #mux: Mux | null;
  readonly #metrics: MuxMetrics;
  readonly #runtime: Runtime;
  readonly #perStream: PerStreamTransport | null;
  #perStreamEndpoint: string | null = null;
  readonly #anchors = new Map<bigint, StreamAnchor<unknown>>();
  readonly #mpscAnchors = new Map<bigint, MpscAnchor<unknown>>();
  readonly #locals = new Map<StreamAnchor<unknown>, LocalPort>();
  /** Per-stream attaches awaiting their connection: the anchor and the buffer it already reads (and the MPSC feed, if any). */
  readonly #perStreamBinds = new Map<string, PendingPerStream>();
  /** Live per-stream connections by anchor: dropping one resets it unless its terminal already arrived. */
  readonly #perStreamDrops = new Map<StreamAnchor<unknown>, (error: StreamError) => void>();
  /** Live per-stream connections by anchor: the consumer's stop request (protocol.md §9). */
  readonly #perStreamStops = new Map<StreamAnchor<unknown>, () => void>();
  readonly #liveSenders = new Set<StreamSender<unknown>>();
  /** The transport keys an attach request offers, sorted (fixed for the node's life; never mutated). */
  readonly #offeredKeys: readonly string[];
  readonly #ownsMessenger: boolean;
  readonly #unattachedTimeout: number;
  /**
   * Unattached deadlines, FIFO (one constant timeout), checked by one timer (`epoch`: MPSC idle period).
   * A stream anchor is queued by local id, not by reference: an anchor that attached and ended
   * long before its deadline (nearly all of them) must not stay reachable, with its bind, ingress
   * slot and slot buffer, for the whole timeout.
   */
  #unattached: Array<{ anchor: bigint | MpscAnchor<unknown>; deadline: number; epoch: number }> = [];
  #unattachedHead = 0;
  #unattachedTimer: unknown = null;
  #closed = false;

  /** @internal Use {@link createNode}. */
  constructor(options: NodeOptions & { readonly messenger: Messenger; readonly ownsMessenger?: boolean }, config: ResolvedMuxConfig) {
    this.#messenger = options.messenger;
    this.#ownsMessenger = options.ownsMessenger ?? false;
    this.#unattachedTimeout = options.unattachedTimeout ?? config.acceptWindow;
    this.#config = config;
    this.#metrics = options.metrics ?? new MuxMetrics();
    this.#runtime = options.runtime ?? systemRuntime();
    this.#perStream = options.perStream ?? null;
    this.workerId = options.messenger.self.workerId;
    this.#mux = config.enabled ? new Mux({ config, metrics: this.#metrics, runtime: this.#runtime, messenger: options.messenger }) : null;
    const keys: string[] = [];
    if (this.#mux !== null) keys.push(MESSENGER_MUX_KEY);
    if (this.#perStream !== null) keys.push(TCP_STREAM_KEY);
    this.#offeredKeys = Object.freeze(keys.sort());
    // The attach handlers answer from state, never wait on the caller: no AbortSignal per request.
    const noSignal = { signal: false } as const;
    this.#messenger.handle(ATTACH_HANDLER, (from, body) => this.#onAttach(from, body), noSignal);
    this.#messenger.handle(DETACH_HANDLER, (from, body) => this.#onDetach(from, body), noSignal);
    this.#messenger.handle(MPSC_ATTACH_HANDLER, (from, body) => this.#onMpscAttach(from, body), noSignal);
    this.#messenger.handle(MPSC_DETACH_HANDLER, (from, body) => this.#onMpscDetach(from, body), noSignal);
    this.#messenger.handle(MPSC_CANCEL_HANDLER, (_from, body) => this.#onMpscCancel(body), noSignal);
  }

  /** @internal */
  async _start(): Promise<void> {
    if (this.#perStream !== null && !(this.#config.muxOnly && this.#mux !== null)) {
      this.#perStreamEndpoint = await this.#perStream.listen((anchorId, sessionId) => this.#acceptPerStream(anchorId, sessionId));
    }
  }

  /** Addresses this node listens on (first one: {@link address}). */
  get addresses(): readonly string[] {
    return this.#messenger.addresses;
  }

  /** The address peers dial to reach this node (`node.connect(address)`), or '' if it does not listen. */
  get address(): string {
    return this.#messenger.addresses[0] ?? '';
  }

  /** True when the mux is installed (enabled and not killed by `LANEMUX_MUX_DISABLE`). */
  get muxEnabled(): boolean {
    return this.#mux !== null;
  }

  /** The resolved mux configuration. */
  get config(): ResolvedMuxConfig {
    return this.#config;
  }

  /** Connect to a peer node; resolves with its worker id (hex) once the hello exchange is done. */
  async connect(address: string, options: { signal?: AbortSignal } = {}): Promise<PeerId> {
    const peer = await this.#messenger.connect(address, options);
    this.#mux?.touch();
    return peer.id;
  }

  /**
   * Called when the node stops dialling an address for good — a refused `connect`, a reconnect loop
   * that gave up, a link lost on an adapter that does not reconnect — with the address and the final
   * coded error (see `DialEndedEvent`). Not called when the node closes. Returns an unsubscribe function.
   */
  onDialEnded(listener: (event: DialEndedEvent) => void): () => void {
    return this.#messenger.onDialEnded(listener);
  }

  /** A snapshot of every metric under the reference's names. */
  /** @internal True while streams with `peer` are live or answered (the messenger keeps such links). */
  busy(peer: string): boolean {
    return this.#mux?.busy(peer) ?? false;
  }

  metrics(): Record<string, number> {
    const out = this.#metrics.snapshot();
    // Connections refused or evicted by the transport (bounded label: the reason).
    const refused = this.#messenger.stats().refused ?? {};
    for (const reason of Object.keys(refused) as Array<keyof typeof refused>) {
      out[`${this.#metrics.prefix}messenger_connections_refused_total{reason="${reason}"}`] = refused[reason];
    }
    return out;
  }

  /** The live metrics object (fields are updated in place). */
  get metricsRegistry(): MuxMetrics {
    return this.#metrics;
  }

  /** Writes made by the per-stream (legacy) transport, if any. */
  get perStreamWrites(): number {
    return this.#perStream?.writes ?? 0;
  }

  // ───────────────────────── consumer side ─────────────────────────

  /** Create an anchor: the consumer's end of a new stream. Its `handle` goes to the producer. */
  createAnchor<T = unknown>(): StreamAnchor<T> {
    this.#assertOpen();
    let localId: bigint;
    do localId = randomU64(this.#runtime) & LOCAL_ID_MASK;
    while (localId === 0n || this.#anchors.has(localId));
    const anchor = new StreamAnchor<T>(this, formatHandle({ workerId: this.workerId, localId }), localId);
    this.#anchors.set(localId, anchor as StreamAnchor<unknown>);
    this.#metrics.activeAnchors++;
    this.anchorUnattached(anchor as StreamAnchor<unknown>);
    return anchor;
  }

  /**
   * Pre-bind an anchor for zero-RTT opening: returns a ticket (a string for the application's own
   * request) that lets the producer open the stream with `openAnchorStream(handle, ticket)` and no
   * attach round trip. Returns undefined when no mux is installed or the anchor is not eligible
   * (an MPSC anchor never is: it counts `{prebind, error}`).
   */
  prebindAnchor(target: StreamAnchor<unknown> | MpscAnchor<unknown> | string, options: { laneKey?: bigint } = {}): string | undefined {
    const mux = this.#mux;
    if (mux === null) return undefined;
    const anchor = typeof target === 'string' ? this.#localAnchor(target) : target;
    if (anchor === undefined) {
      this.#metrics.anchorOperation('prebind', 'error', 'mux');
      return undefined;
    }
    // MPSC anchors have no zero-RTT path (protocol.md §11 item 1).
    if (!(anchor instanceof StreamAnchor) || (anchor.localId & MPSC_BIT) !== 0n || this.#anchors.get(anchor.localId) !== anchor || anchor.feedKind !== 'none' || anchor.finished) {
      this.#metrics.anchorOperation('prebind', 'error', 'mux');
      return undefined;
    }
    const bind = mux.bind(anchor.localId, this.#bindOwner(anchor), null, options.laneKey);
    anchor._feed(bind.buffer, 'mux', bind);
    this.#metrics.anchorOperation('prebind', 'success', 'mux');
    return encodeTicket({
      streaming_transport_key: MESSENGER_MUX_KEY,
      heartbeat_interval_ms: this.#config.heartbeatInterval,
      routing_session_id: bind.sessionId,
      initial_credit: bind.limit,
      slot_byte_budget: bind.slotByteBudget,
      lane: bind.lane,
      anchor_id: anchor.localId,
    });
  }

  /**
   * `prebindAnchor` with a placement key (the reference's `prebind_anchor_keyed`): the stream rides
   * lane `splitmix64(key) % lanes` on this node.
   */
  prebindAnchorKeyed(target: StreamAnchor<unknown> | string, key: bigint): string | undefined {
    return this.prebindAnchor(target, { laneKey: key });
  }

  /** `attachAnchor` with a placement key (the reference's `attach_anchor_keyed`). */
  attachAnchorKeyed<T = unknown>(handle: string, key: bigint, options: Omit<AttachOptions, 'laneKey'> = {}): Promise<StreamSender<T>> {
    return this.attachAnchor<T>(handle, { ...options, laneKey: key });
  }

  /** `attachMpscAnchor` with a placement key (the reference's `attach_mpsc_anchor_keyed`). */
  attachMpscAnchorKeyed<T = unknown>(handle: string, key: bigint, options: Omit<AttachOptions, 'laneKey'> = {}): Promise<MpscSender<T>> {
    return this.attachMpscAnchor<T>(handle, { ...options, laneKey: key });
  }

  /** A single-sender anchor of this node named by its handle string, if it exists. */
  #localAnchor(handle: string): StreamAnchor<unknown> | undefined {
    let h: ReturnType<typeof parseHandle>;
    try {
      h = parseHandle(handle);
    } catch {
      return undefined;
    }
    if (h.workerId !== this.workerId) return undefined;
    const a = this.#anchors.get(h.localId);
    return a instanceof StreamAnchor ? a : undefined;
  }

  /** @internal AnchorHost */
  anchorDone(anchor: StreamAnchor<unknown>, cancelled: boolean): void {
    if (this.#anchors.get(anchor.localId) !== anchor) return;
    this.#anchors.delete(anchor.localId);
    this.#metrics.activeAnchors--;
    const bind = anchor.bind;
    if (bind !== null && this.#mux !== null) {
      // A consumer cancel is a LifecycleSlot{cancel} naming the session (§13.2-3); before the OpenSlot
      // arrived, the mux answers that OpenSlot with it.
      if (cancelled && !bind.ended) this.#mux.signalLifecycle(bind, true);
      this.#mux.releaseBind(bind);
    }
    const waiting = anchor._takeWaiting();
    if (waiting !== null) {
      this.#letGo(waiting, cancelled, cancelled ? new StreamError('ERR_STREAM_CANCELLED', 'the consumer cancelled the stream') : new StreamError('ERR_STREAM_CLOSED', 'the anchor ended before its consumer read this sender'));
    }
    const local = this.#locals.get(anchor);
    if (local) {
      this.#locals.delete(anchor);
      if (cancelled) local.fail(new StreamError('ERR_STREAM_CANCELLED', 'the consumer cancelled the stream'));
    }
    for (const [key, b] of this.#perStreamBinds) if (b.anchor === anchor) this.#perStreamBinds.delete(key);
    this.#perStreamStops.delete(anchor);
    const drop = this.#perStreamDrops.get(anchor);
    if (drop !== undefined) {
      this.#perStreamDrops.delete(anchor);
      // Nobody reads this anchor any more: drop the connection, or the producer blocks once buffers fill.
      drop(cancelled ? new StreamError('ERR_STREAM_CANCELLED', 'the consumer cancelled the stream') : new StreamError('ERR_STREAM_CLOSED', 'the anchor failed'));
    }
    if (cancelled) this.#metrics.anchorOperation('cancel', 'success', anchor.feedKind);
  }

  /** @internal AnchorHost: start (or restart) the anchor's unattached timer. */
  anchorUnattached(anchor: StreamAnchor<unknown>): void {
    if (this.#closed) return;
    this.#unattached.push({ anchor: anchor.localId, deadline: this.#runtime.now() + this.#unattachedTimeout, epoch: 0 });
    this.#armUnattached();
  }

  #armUnattached(): void {
    if (this.#unattachedTimer !== null || this.#unattachedHead >= this.#unattached.length) return;
    const head = this.#unattached[this.#unattachedHead]!;
    this.#unattachedTimer = this.#runtime.setTimer(() => {
      this.#unattachedTimer = null;
      this.#expireUnattached();
    }, Math.max(0, head.deadline - this.#runtime.now()));
  }

  #expireUnattached(): void {
    const now = this.#runtime.now();
    const q = this.#unattached;
    while (this.#unattachedHead < q.length && q[this.#unattachedHead]!.deadline <= now) {
      const { anchor: entry, epoch } = q[this.#unattachedHead++]!;
      if (entry instanceof MpscAnchor) {
        // Still without a sender since it became idle at `epoch`: it ends (cleanly, as in the reference).
        entry._expire(epoch);
        continue;
      }
      // Still registered, still without a sender: nobody will ever feed it.
      const anchor = this.#anchors.get(entry);
      if (anchor !== undefined && anchor.feedKind === 'none' && !anchor.finished) {
        anchor._fail(new StreamError('ERR_SENDER_DROPPED', `no sender attached within ${this.#unattachedTimeout} ms`, { retryable: true }));
        this.anchorDone(anchor, false);
      }
    }
    if (this.#unattachedHead > 1024 && this.#unattachedHead * 2 > q.length) {
      q.splice(0, this.#unattachedHead);
      this.#unattachedHead = 0;
    }
    this.#armUnattached();
  }

  /** The anchor side of a mux bind (one small object per bind; the node's part is shared). */
  #bindOwner(anchor: StreamAnchor<unknown>): BindOwner {
    return new AnchorBindOwner(anchor, this.#forgetEnded);
  }

  /** A bound stream ended dropped or expired: the anchor is forgotten at once. */
  readonly #forgetEnded = (anchor: StreamAnchor<unknown>, bind: Bind): void => {
    // The consumer still reads the Dropped it holds; the node need not keep the anchor for it.
    if (this.#anchors.get(anchor.localId) !== anchor) return;
    this.#anchors.delete(anchor.localId);
    this.#metrics.activeAnchors--;
    // Senders waiting behind this one are never read (the stream ends at its Dropped): let them go now.
    const cut = anchor._cutAfter(bind);
    if (cut !== null) {
      this.#letGo(cut, false, new StreamError('ERR_STREAM_CLOSED', 'an earlier sender of the anchor went away: its consumer never reads this sender'));
      this.#locals.delete(anchor);
      this.#perStreamDrops.delete(anchor);
      this.#perStreamStops.delete(anchor);
    }
  };

  /** Let go the senders of feeds the anchor will never read (it ended, or ends before them). */
  #letGo(feeds: readonly WaitingFeed[], cancelled: boolean, error: StreamError): void {
    const mux = this.#mux;
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
    if (bind !== null) this.#mux?.signalLifecycle(bind, cancel);
    else if (!cancel) {
      this.#locals.get(anchor)?.onStop?.();
      const stop = this.#perStreamStops.get(anchor);
      if (stop !== undefined) stop();
      // Asked before the connection arrived: it goes out when it does (the mux's early signal).
      else for (const b of this.#perStreamBinds.values()) if (b.anchor === anchor) b.stop = true;
    }
  }

  #onAttach(from: PeerId, body: unknown): unknown {
    const req = attachRequestSchema.safeParse(body);
    if (!req.success) return { Err: { reason: `malformed attach request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle, supported_transport_keys: keys, lane_key: laneKey, session_id: claimedSession } = req.data;
    if (handle.hi !== this.workerId) return { Err: { reason: 'the handle belongs to another worker' } };
    if ((handle.lo & MPSC_BIT) !== 0n) return this.#refuse('the anchor is MPSC; use _mpsc_anchor_attach');
    const anchor = this.#anchors.get(handle.lo);
    if (anchor === undefined || anchor.finished) return this.#refuse('unknown or finished anchor');
    const mux = this.#mux;
    const offersMux = mux !== null && keys.includes(MESSENGER_MUX_KEY);
    if (!anchor._attachable) {
      const bind = anchor.bind;
      if (bind !== null && bind === anchor._tailBind && bind.peer === null && !bind.ended) {
        if (bind.claimed) return this.#refuse('already streaming through a pre-bound slot');
        // A pre-bind is the ticket holder's: only an attach naming the ticket's session may adopt or
        // release it. Anyone else who knows the handle is refused and changes nothing.
        if (claimedSession !== bind.sessionId) {
          this.#metrics.anchorOperation('attach', 'error', 'mux');
          return this.#refuse('the anchor is pre-bound: attach with its ticket (AttachOptions.ticket) or open it with openAnchorStream');
        }
        if (!offersMux) {
          mux?.releaseBind(bind);
          anchor._unfeed();
          // No sender and no bind any more: the unattached timer runs again (every limit finite).
          this.anchorUnattached(anchor);
          return this.#refuse(`the anchor is pre-bound to ${MESSENGER_MUX_KEY}, which the sender does not offer`);
        }
        // Adopt the unclaimed pre-bind: the ticket's session and terms.
        this.#metrics.anchorOperation('attach', 'success', 'mux');
        return attachOk({ key: MESSENGER_MUX_KEY, heartbeatMs: this.#config.heartbeatInterval, session: bind.sessionId, credit: bind.limit, budget: bind.slotByteBudget, lane: bind.lane });
      }
      return this.#refuse(anchor._waitingFull ? WAITING_FULL : 'the anchor already has a sender (AlreadyAttached)');
    }
    // From here the anchor takes this sender: at once, or behind one that detached (read first).
    if (offersMux) {
      const bind = mux!.bind(anchor.localId, this.#bindOwner(anchor), from, laneKey);
      anchor._feed(bind.buffer, 'mux', bind);
      this.#metrics.anchorOperation('attach', 'success', 'mux');
      return attachOk({ key: MESSENGER_MUX_KEY, heartbeatMs: this.#config.heartbeatInterval, session: bind.sessionId, credit: bind.limit, budget: bind.slotByteBudget, lane: bind.lane });
    }
    if (this.#perStreamEndpoint !== null && (keys.length === 0 || keys.includes(TCP_STREAM_KEY))) {
      const session = randomU64(this.#runtime);
      // The anchor waits on the buffer the connection will fill, so a reader parked on it is woken by
      // the first frame; feeding it also marks the anchor taken (a second attach is refused).
      const buffer = new SlotBuffer(ANCHOR_CHANNEL_DEPTH);
      const key = `${anchor.localId}:${session}`;
      const pending: PendingPerStream = { anchor, buffer };
      this.#perStreamBinds.set(key, pending);
      // The accept window: a producer that never dials must not leave the anchor waiting forever.
      // (The legacy path keeps one timer per pending attach, as it did per stream.)
      this.#runtime.setTimer(() => {
        const pending = this.#perStreamBinds.get(key);
        if (pending === undefined || pending.anchor !== anchor) return;
        this.#perStreamBinds.delete(key);
        this.#metrics.unclaimedBindReaped++;
        buffer.pushForced(FrameKind.Dropped, undefined);
        buffer.close();
      }, this.#config.acceptWindow);
      anchor._feed(buffer, 'legacy', null, null, session, from, (error) => {
        // A waiting sender the anchor will never read: forget its pending attach, or drop its connection.
        if (this.#perStreamBinds.get(key) === pending) this.#perStreamBinds.delete(key);
        pending.abort?.(error);
      });
      this.#metrics.anchorOperation('attach', 'success', TCP_STREAM_KEY);
      return attachOk({ key: TCP_STREAM_KEY, heartbeatMs: this.#config.heartbeatInterval, session, credit: 0, budget: 0, lane: 0, endpoint: this.#perStreamEndpoint });
    }
    return this.#refuse(`no common streaming transport (offered: ${keys.join(', ') || 'none'})`);
  }

  #refuse(reason: string): unknown {
    this.#metrics.anchorOperation('attach', 'error', 'none');
    return { Err: { reason } };
  }

  /**
   * `_anchor_detach {handle, session_id}`: the sender of that session handed over its Detached. From
   * here a new sender may attach (read after the rest of this one's frames), even before the
   * Detached record arrives or the consumer reads it. Answers `{Ok: null}` for a live anchor.
   */
  #onDetach(from: PeerId, body: unknown): unknown {
    const req = anchorRefSchema.safeParse(body);
    if (!req.success) return { Err: { reason: `malformed detach request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle, session_id: session } = req.data;
    const anchor = handle.hi === this.workerId && (handle.lo & MPSC_BIT) === 0n ? this.#anchors.get(handle.lo) : undefined;
    if (anchor === undefined || anchor.finished) return { Err: { reason: 'unknown or finished anchor' } };
    // Only the last sender to attach counts: an earlier one's late request, or a stranger's, changes nothing.
    if (session !== undefined) anchor._remoteDetached(session, from);
    return { Ok: null };
  }

  /**
   * A remote sender's detach: tell the consumer (`_anchor_detach`) and resolve on its answer, so an
   * attach made after `await detach()` finds the anchor free. Never rejects: the Detached is handed
   * over whatever becomes of the request (peer gone, an implementation without the handler, timeout).
   */
  #ackDetach(peer: PeerId, h: AnchorHandle, session: bigint): Promise<void> {
    const body = { handle: u128(h.workerId, h.localId), session_id: u64Hex(session) };
    return this.#messenger.request(peer, DETACH_HANDLER, body, { timeoutMs: DETACH_ACK_TIMEOUT }).then(noop, noop);
  }

  /** Consumer side of a per-stream connection: frames into the anchor's own channel. */
  #acceptPerStream(anchorId: bigint, sessionId: bigint): PerStreamSink | null {
    const key = `${anchorId}:${sessionId}`;
    const bind = this.#perStreamBinds.get(key);
    if (bind === undefined) return null;
    this.#perStreamBinds.delete(key);
    const { anchor, buffer, feed } = bind;
    if (feed !== undefined && feed.ended) return null;
    const frame: DecodedFrame = { kind: 0, value: undefined, terminal: false };
    let ended = false;
    const drop = (error: StreamError): void => {
      if (!ended) sink.abort?.(error);
    };
    const stop = (): void => sink.stop?.();
    // The mux's watchdog, per connection: three silent windows end the stream Dropped (§9).
    const watchdog = new PerStreamWatchdog(this.#runtime, this.#config.heartbeatInterval, this.#config.detectionMultiplier, () => buffer.length >= buffer.capacity, (error) => {
      // As on the mux, an MPSC anchor's senders never count firings.
      if (feed === undefined) this.#metrics.watchdogFirings++;
      sink.abort?.(error);
    });
    const sink: PerStreamSink = {
      resume: null,
      frame: (body) => {
        watchdog.alive = true;
        decodeFrameInto(body, frame);
        const ok = buffer.push(frame.kind, frame.value, body.byteLength);
        frame.value = undefined;
        if (frame.terminal) ended = true;
        return ok && buffer.length < buffer.capacity;
      },
      end: () => {
        watchdog.stop();
        if (anchor instanceof StreamAnchor) {
          // Only this connection's own entries: a later sender of the anchor may hold them now.
          if (this.#perStreamDrops.get(anchor) === drop) this.#perStreamDrops.delete(anchor);
          if (this.#perStreamStops.get(anchor) === stop) this.#perStreamStops.delete(anchor);
        }
        if (!ended) buffer.pushForced(FrameKind.Dropped, undefined);
        buffer.close();
      },
    };
    // The transport installs `sink.stop` once this returns.
    if (bind.stop === true) queueMicrotask(() => sink.stop?.());
    if (feed !== undefined) {
      feed.lifecycle = (cancel) => {
        if (!cancel) sink.stop?.();
      };
      // One MPSC sender's connection: closing the feed drops just this connection.
      feed.release = (error) => {
        if (!ended) sink.abort?.(error);
      };
      feed.onTake = () => {
        if (buffer.length < buffer.capacity) sink.resume?.();
      };
      return sink;
    }
    if (!(anchor instanceof StreamAnchor)) return null;
    bind.abort = drop;
    // Only the last sender to attach is live; one that detached needs neither (its connection is ending).
    if (anchor._isTail(buffer)) {
      this.#perStreamDrops.set(anchor, drop);
      this.#perStreamStops.set(anchor, stop);
    }
    anchor._setOnTake(buffer, () => {
      if (buffer.length < buffer.capacity) sink.resume?.();
    });
    return sink;
  }

  // ───────────────────────── producer side ─────────────────────────

  /**
   * Attach a producer to an anchor handle. Same worker → writes into the anchor directly.
   * Otherwise `_anchor_attach` negotiates: the mux (`messenger-mux-v2`) when both sides offer it,
   * else the per-stream path (`tcp-stream`). A mux answer with zero credit fails the attach.
   */
  async attachAnchor<T = unknown>(handle: string, options: AttachOptions = {}): Promise<StreamSender<T>> {
    this.#assertOpen();
    const h = parseHandle(handle);
    options.signal?.throwIfAborted();
    if ((h.localId & MPSC_BIT) !== 0n) throw new StreamError('ERR_ATTACH_REFUSED', 'the handle is an MPSC anchor: use attachMpscAnchor');
    if (h.workerId === this.workerId) return this.#attachLocal<T>(h.localId, options);
    const peer = this.#peerOf(h);
    const raw = await this.#requestAttach(peer, ATTACH_HANDLER, h, options);
    const parsed = attachResponseSchema.safeParse(raw);
    if (!parsed.success) throw new StreamError('ERR_ATTACH_REFUSED', `malformed attach answer: ${parsed.error.issues[0]?.message ?? ''}`);
    if ('Err' in parsed.data) throw new StreamError('ERR_ATTACH_REFUSED', `attach refused: ${parsed.data.Err.reason}`);
    return this.#openAttached<T>(peer, h, parsed.data.Ok, options.signal, (init) => new StreamSender<T>(init), true);
  }

  /** Why no mux stream may be opened toward `peer`: its HELLO does not list the mux key (docs/protocol.md §3.1). Null if it may. */
  #noMuxToward(peer: PeerId): StreamError | null {
    const keys = this.#messenger.peer(peer)?.transportKeys;
    if (keys === undefined || keys.includes(MESSENGER_MUX_KEY)) return null;
    return new StreamError('ERR_ATTACH_REFUSED', `peer ${peer} did not advertise ${MESSENGER_MUX_KEY} in its HELLO (keys: ${keys.join(', ') || 'none'}): no mux stream is opened toward it`);
  }

  #peerOf(h: AnchorHandle): PeerId {
    const peer = workerKey(h.workerId);
    if (this.#messenger.peer(peer) === undefined) {
      throw new StreamError('ERR_UNKNOWN_PEER', `no connected peer has worker id ${peer}; connect to it first`);
    }
    return peer;
  }

  /** Send an attach request (`_anchor_attach` or `_mpsc_anchor_attach`) offering this node's transports. */
  async #requestAttach(peer: PeerId, handler: string, h: AnchorHandle, options: AttachOptions): Promise<unknown> {
    // The mux is offered only to a peer whose HELLO lists it (docs/protocol.md §3.1).
    const keys = this.#noMuxToward(peer) === null ? this.#offeredKeys : this.#offeredKeys.filter((k) => k !== MESSENGER_MUX_KEY);
    const body: Record<string, unknown> = { handle: u128(h.workerId, h.localId), supported_transport_keys: keys };
    if (options.laneKey !== undefined) body['lane_key'] = `0x${BigInt.asUintN(64, options.laneKey).toString(16)}`;
    if (options.ticket !== undefined) body['session_id'] = `0x${ticketFor(h, parseTicket(options.ticket)).routing_session_id.toString(16)}`;
    try {
      return await this.#messenger.request(peer, handler, body, {
        timeoutMs: options.timeoutMs ?? 10_000,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (cause) {
      this.#metrics.anchorOperation('attach', 'error', 'none');
      throw cause;
    }
  }

  /** Open what an attach answer settled on: a mux slot, or a per-stream connection. */
  async #openAttached<T>(
    peer: PeerId,
    h: AnchorHandle,
    ok: { streaming_transport_key: string; heartbeat_interval_ms: number; routing_session_id: bigint; initial_credit: number; slot_byte_budget: number; lane: number; endpoint?: string | undefined },
    signal: AbortSignal | undefined,
    factory: SenderFactory<T>,
    detachAck = false,
  ): Promise<StreamSender<T>> {
    if (ok.streaming_transport_key === MESSENGER_MUX_KEY) {
      if (this.#mux === null) throw new StreamError('ERR_ATTACH_REFUSED', `the consumer answered ${MESSENGER_MUX_KEY}, which this node did not offer`);
      const noMux = this.#noMuxToward(peer);
      if (noMux !== null) throw noMux;
      // Zero credit fails the attach: resolveLimits names the key and "initial_credit = 0".
      const limits = resolveLimits({ initialCredit: ok.initial_credit, slotByteBudget: ok.slot_byte_budget }, { transportKey: ok.streaming_transport_key });
      return this.#openMux<T>(peer, ok.lane, h.localId, ok.routing_session_id, limits, ok.heartbeat_interval_ms, signal, 'attach', factory, detachAck ? h : null);
    }
    if (ok.streaming_transport_key === TCP_STREAM_KEY && this.#perStream !== null && ok.endpoint !== undefined) {
      const conn = await this.#perStream.connect(ok.endpoint, h.localId, ok.routing_session_id, signal ? { signal } : {});
      const sender = factory({
        transport: TCP_STREAM_KEY,
        signal,
        onDone: () => this.#liveSenders.delete(sender as StreamSender<unknown>),
        onDetach: detachAck ? () => this.#ackDetach(peer, h, ok.routing_session_id) : undefined,
      });
      // Idle heartbeats at the consumer's interval (its watchdog), and its stop request.
      const port = new PerStreamPort(conn, { runtime: this.#runtime, heartbeatMs: ok.heartbeat_interval_ms, onStop: () => sender._lifecycle(false) });
      conn.onClose((error) => {
        sender._closed(error);
        // The connection closed: after a clean end every frame was handed on.
        sender._retire(error === null && sender.closed ? 'Sent' : 'Discarded');
      });
      sender._bind(port);
      this.#liveSenders.add(sender as StreamSender<unknown>);
      return sender;
    }
    throw new StreamError('ERR_ATTACH_REFUSED', `the consumer chose ${ok.streaming_transport_key}, which this node cannot open`);
  }

  /**
   * Open a stream from a zero-RTT ticket: the first batch's OpenSlot claims the consumer's
   * pre-bind; no attach message crosses the wire.
   */
  openAnchorStream<T = unknown>(handle: string, ticket: string, options: { signal?: AbortSignal } = {}): Promise<StreamSender<T>> {
    // Not `async`: the open's own promise is returned as is (a wrapper cost a promise and ticks per
    // stream); a refusal here still rejects rather than throws.
    try {
      return this.#openFromTicket<T>(handle, ticket, options.signal);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #openFromTicket<T>(handle: string, ticket: string, signal: AbortSignal | undefined): Promise<StreamSender<T>> {
    this.#assertOpen();
    const h = parseHandle(handle);
    const t = ticketFor(h, parseTicket(ticket));
    if (h.workerId === this.workerId) {
      throw new StreamError('ERR_TRANSPORT_ERROR', 'this ticket was minted by this worker: use attachAnchor for a same-worker stream');
    }
    if (this.#mux === null || t.streaming_transport_key !== MESSENGER_MUX_KEY) {
      throw new StreamError('ERR_ATTACH_REFUSED', `cannot open a ${t.streaming_transport_key} ticket without the mux`);
    }
    const peer = workerKey(h.workerId);
    if (this.#messenger.peer(peer) === undefined) throw new StreamError('ERR_UNKNOWN_PEER', `no connected peer has worker id ${peer}`);
    const noMux = this.#noMuxToward(peer);
    if (noMux !== null) throw noMux;
    const limits = resolveLimits({ initialCredit: t.initial_credit, slotByteBudget: t.slot_byte_budget }, { transportKey: t.streaming_transport_key });
    return this.#openMux<T>(peer, t.lane, h.localId, t.routing_session_id, limits, t.heartbeat_interval_ms, signal, 'open', plainSender as SenderFactory<T>, h);
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
  ): Promise<StreamSender<T>> {
    const mux = this.#mux!;
    const node = this;
    let hb: HeartbeatSender | null = null;
    const sender: StreamSender<T> = factory({
      transport: MESSENGER_MUX_KEY,
      signal,
      onDone: () => {
        this.#liveSenders.delete(sender as StreamSender<unknown>);
        if (hb !== null) mux.removeHeartbeat(hb);
      },
      onDetach: detachOf === null ? undefined : () => this.#ackDetach(peer, detachOf, session),
    });
    const owner = new MuxSenderOwner(sender as StreamSender<unknown>);
    let slot: EgressSlot;
    try {
      // The slot holds the consumer's window and pauses its producer at the consumer's byte budget.
      slot = await mux.openSlot(peer, lane, anchorId, session, limits.initialCredit, owner, limits.slotByteBudget);
    } catch (e) {
      node.#metrics.anchorOperation(op, 'error', 'mux');
      throw e;
    }
    node.#metrics.anchorOperation(op, 'success', 'mux');
    sender._bind(new MuxPort(slot));
    if (!sender.closed) {
      this.#liveSenders.add(sender as StreamSender<unknown>);
      if (heartbeatMs > 0) {
        hb = new SenderHeartbeat(sender as StreamSender<unknown>, heartbeatMs);
        mux.addHeartbeat(hb);
      }
    }
    return sender;
  }

  #attachLocal<T>(localId: bigint, options: AttachOptions): StreamSender<T> {
    const anchor = this.#anchors.get(localId);
    if (anchor === undefined || anchor.finished) throw new StreamError('ERR_ATTACH_REFUSED', 'unknown or finished anchor');
    const bind = anchor.bind;
    if (!anchor._attachable) {
      // A same-worker attach releases an unclaimed pre-bind; a claimed one is AlreadyAttached.
      if (bind !== null && bind === anchor._tailBind && bind.peer === null && !bind.claimed && !bind.ended) {
        this.#mux?.releaseBind(bind);
        anchor._unfeed();
      } else if (anchor._waitingFull) throw new StreamError('ERR_ATTACH_REFUSED', WAITING_FULL);
      else throw new StreamError('ERR_ALREADY_ATTACHED', 'the anchor already has a sender');
    }
    const buffer = new SlotBuffer(ANCHOR_CHANNEL_DEPTH);
    const port = new LocalPort(buffer);
    // At once, or behind a sender that detached (read first).
    anchor._feed(buffer, 'local', null, () => port.drained(), null, null, (error) => port.fail(error));
    this.#locals.set(anchor, port);
    const sender = new StreamSender<T>({
      transport: null,
      signal: options.signal,
      onDone: () => this.#liveSenders.delete(sender as StreamSender<unknown>),
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
    this.#liveSenders.add(sender as StreamSender<unknown>);
    this.#metrics.anchorOperation('attach', 'success', 'local');
    return sender;
  }

  // ───────────────────────── MPSC ─────────────────────────

  /**
   * Create an MPSC anchor: one consumer end that many senders attach to (`attachMpscAnchor`),
   * each on its own slot and credit window. Its events carry the sender id; a sender's terminal
   * ends only its own part. See {@link MpscAnchor} for how the whole anchor ends.
   */
  createMpscAnchor<T = unknown>(options: MpscAnchorOptions = {}): MpscAnchor<T> {
    this.#assertOpen();
    const maxSenders = options.maxSenders ?? MPSC_MAX_SENDERS;
    if (!Number.isInteger(maxSenders) || maxSenders < 1) throw new ConfigError('maxSenders', `must be a positive integer, got ${String(maxSenders)}`);
    let localId: bigint;
    do localId = randomU64(this.#runtime) | MPSC_BIT;
    while (this.#mpscAnchors.has(localId));
    const anchor = new MpscAnchor<T>(this, formatHandle({ workerId: this.workerId, localId }), localId, maxSenders);
    this.#mpscAnchors.set(localId, anchor as MpscAnchor<unknown>);
    this.#metrics.activeAnchors++;
    this.mpscIdle(anchor as MpscAnchor<unknown>);
    return anchor;
  }

  /** @internal MpscHost */
  mpscDone(anchor: MpscAnchor<unknown>, cancelled: boolean): void {
    if (this.#mpscAnchors.get(anchor.localId) !== anchor) return;
    this.#mpscAnchors.delete(anchor.localId);
    this.#metrics.activeAnchors--;
    if (cancelled) this.#metrics.anchorOperation('cancel', 'success', 'mpsc');
  }

  /** @internal MpscHost: the anchor has no sender; it ends after the unattached timeout unless one attaches. */
  mpscIdle(anchor: MpscAnchor<unknown>): void {
    if (this.#closed) return;
    this.#unattached.push({ anchor, deadline: this.#runtime.now() + this.#unattachedTimeout, epoch: anchor.idleEpoch });
    this.#armUnattached();
  }

  /**
   * `_mpsc_anchor_attach`: negotiated as `_anchor_attach` is (the mux when both sides offer it,
   * else the per-stream path). Every sender gets its own bind — session, slot, credit — and a
   * sender id.
   */
  #onMpscAttach(from: PeerId, body: unknown): unknown {
    const req = attachRequestSchema.safeParse(body);
    if (!req.success) return { Err: { reason: `malformed attach request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle, supported_transport_keys: keys, lane_key: laneKey } = req.data;
    if (handle.hi !== this.workerId) return { Err: { reason: 'the handle belongs to another worker' } };
    if ((handle.lo & MPSC_BIT) === 0n) return this.#refuse('the anchor is not MPSC; use _anchor_attach');
    const anchor = this.#mpscAnchors.get(handle.lo);
    if (anchor === undefined) return this.#refuse('unknown or finished anchor');
    const refusal = anchor._refusal();
    if (refusal !== null) return this.#refuse(refusal);
    const mux = this.#mux;
    if (mux !== null && keys.includes(MESSENGER_MUX_KEY)) {
      const senderId = anchor._nextSenderId();
      const bind = mux.bind(anchor.localId, MPSC_BIND_OWNER, from, laneKey);
      const feed = new MpscFeed(senderId, 'mux', bind.buffer, from, bind);
      feed.release = () => mux.releaseBind(bind);
      feed.lifecycle = (cancel) => mux.signalLifecycle(bind, cancel);
      anchor._add(feed);
      this.#metrics.anchorOperation('attach', 'success', 'mux');
      return mpscAttachOk({ key: MESSENGER_MUX_KEY, heartbeatMs: this.#config.heartbeatInterval, session: bind.sessionId, credit: bind.limit, budget: bind.slotByteBudget, lane: bind.lane, senderId });
    }
    if (this.#perStreamEndpoint !== null && (keys.length === 0 || keys.includes(TCP_STREAM_KEY))) {
      const senderId = anchor._nextSenderId();
      const session = randomU64(this.#runtime);
      const buffer = new SlotBuffer(ANCHOR_CHANNEL_DEPTH);
      const feed = new MpscFeed(senderId, 'legacy', buffer, from, null);
      const key = `${anchor.localId}:${session}`;
      const pending: { anchor: MpscAnchor<unknown>; buffer: SlotBuffer; feed: MpscFeed; stop?: boolean } = { anchor, buffer, feed };
      this.#perStreamBinds.set(key, pending);
      // Until the connection arrives, closing the feed just forgets the pending attach, and a stop waits for it.
      feed.release = () => this.#perStreamBinds.delete(key);
      feed.lifecycle = (cancel) => {
        if (!cancel) pending.stop = true;
      };
      this.#runtime.setTimer(() => {
        if (this.#perStreamBinds.get(key)?.feed !== feed) return;
        this.#perStreamBinds.delete(key);
        this.#metrics.unclaimedBindReaped++;
        buffer.pushForced(FrameKind.Dropped, undefined);
        buffer.close();
      }, this.#config.acceptWindow);
      anchor._add(feed);
      this.#metrics.anchorOperation('attach', 'success', TCP_STREAM_KEY);
      return mpscAttachOk({ key: TCP_STREAM_KEY, heartbeatMs: this.#config.heartbeatInterval, session, credit: 0, budget: 0, lane: 0, endpoint: this.#perStreamEndpoint, senderId });
    }
    return this.#refuse(`no common streaming transport (offered: ${keys.join(', ') || 'none'})`);
  }

  /** `_mpsc_anchor_detach`: the sender's own peer removes it (its slot closes; the consumer reads `detached`). */
  #onMpscDetach(from: PeerId, body: unknown): unknown {
    const req = mpscDetachRequestSchema.safeParse(body);
    if (!req.success) return { Err: { reason: `malformed detach request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle, sender_id: senderId } = req.data;
    const anchor = handle.hi === this.workerId ? this.#mpscAnchors.get(handle.lo) : undefined;
    if (anchor === undefined || !anchor._detachSender(Number(senderId), from)) return { Err: { reason: 'unknown MPSC anchor or sender' } };
    this.#metrics.anchorOperation('detach', 'success', 'mpsc');
    return { Ok: null };
  }

  /** `_mpsc_anchor_cancel`: cancel the whole anchor (every sender's slot closes). */
  #onMpscCancel(body: unknown): unknown {
    const req = mpscCancelRequestSchema.safeParse(body);
    if (!req.success) return { Err: { reason: `malformed cancel request: ${req.error.issues[0]?.message ?? 'invalid'}` } };
    const { handle } = req.data;
    const anchor = handle.hi === this.workerId ? this.#mpscAnchors.get(handle.lo) : undefined;
    if (anchor === undefined) return { Err: { reason: 'unknown MPSC anchor' } };
    anchor.cancel();
    return { Ok: null };
  }

  /**
   * Attach one more producer to an MPSC anchor handle. Same worker → writes into the anchor's
   * per-sender buffer directly. Otherwise `_mpsc_anchor_attach` negotiates exactly as
   * {@link attachAnchor} does (`laneKey` places this sender's slot). The returned sender's
   * terminal (`finalize`, `detach`) ends only its own part of the stream.
   */
  async attachMpscAnchor<T = unknown>(handle: string, options: AttachOptions = {}): Promise<MpscSender<T>> {
    this.#assertOpen();
    const h = parseHandle(handle);
    options.signal?.throwIfAborted();
    if ((h.localId & MPSC_BIT) === 0n) throw new StreamError('ERR_ATTACH_REFUSED', 'the handle is not an MPSC anchor: use attachAnchor');
    if (h.workerId === this.workerId) return this.#attachMpscLocal<T>(h.localId, options);
    const peer = this.#peerOf(h);
    const raw = await this.#requestAttach(peer, MPSC_ATTACH_HANDLER, h, options);
    const parsed = mpscAttachResponseSchema.safeParse(raw);
    if (!parsed.success) throw new StreamError('ERR_ATTACH_REFUSED', `malformed MPSC attach answer: ${parsed.error.issues[0]?.message ?? ''}`);
    if ('Err' in parsed.data) throw new StreamError('ERR_ATTACH_REFUSED', `MPSC attach refused: ${parsed.data.Err.reason}`);
    const ok = parsed.data.Ok;
    const senderId = Number(ok.sender_id);
    return (await this.#openAttached<T>(peer, h, ok, options.signal, (init) => new MpscSender<T>(init, senderId))) as MpscSender<T>;
  }

  #attachMpscLocal<T>(localId: bigint, options: AttachOptions): MpscSender<T> {
    const anchor = this.#mpscAnchors.get(localId);
    const refusal = anchor === undefined ? 'unknown or finished anchor' : anchor._refusal();
    if (anchor === undefined || refusal !== null) {
      this.#metrics.anchorOperation('attach', 'error', 'local');
      throw new StreamError('ERR_ATTACH_REFUSED', refusal ?? 'unknown or finished anchor');
    }
    const buffer = new SlotBuffer(ANCHOR_CHANNEL_DEPTH);
    const port = new LocalPort(buffer);
    const feed = new MpscFeed(anchor._nextSenderId(), 'local', buffer, null, null);
    feed.onTake = () => port.drained();
    feed.release = (error) => port.fail(error);
    const sender: MpscSender<T> = new MpscSender<T>({ transport: null, signal: options.signal, onDone: () => this.#liveSenders.delete(sender as StreamSender<unknown>) }, feed.senderId);
    port.onTerminal = () => sender._retire('Sent');
    port.onFailed = () => {
      // The anchor was cancelled or went away: an idle producer learns it from cancelSignal.
      sender._closed(port.closeError);
      sender._retire('Discarded');
    };
    sender._bind(port);
    this.#liveSenders.add(sender as StreamSender<unknown>);
    anchor._add(feed);
    this.#metrics.anchorOperation('attach', 'success', 'local');
    return sender;
  }

  /**
   * Kick every batcher: under `manual` this is the write; under `auto` it writes before the
   * batcher's own conditions. Synchronous, never throws, does nothing without a mux. It is not a
   * back-pressure point. Under `manual`, records released by credit that arrives after this call
   * wait for the next call.
   */
  flushBatch(): void {
    this.#mux?.flushBatch();
  }

  #assertOpen(): void {
    if (this.#closed) throw new StreamError('ERR_CLOSED', 'the node is closed');
  }

  /** Close the node: every stream ends, every connection closes; `live_slots` returns to 0. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#mux?.close();
    const dropped = new StreamError('ERR_SENDER_DROPPED', 'the node closed', { retryable: true });
    for (const a of [...this.#anchors.values()]) a._fail(dropped);
    for (const a of [...this.#mpscAnchors.values()]) a._fail(dropped);
    // Anchors a failure did not forget (no sender, a per-stream answer never dialled, MPSC) leave the
    // gauge here: `active_anchors` returns to 0 with the node.
    this.#metrics.activeAnchors -= this.#anchors.size + this.#mpscAnchors.size;
    this.#anchors.clear();
    this.#mpscAnchors.clear();
    for (const p of this.#locals.values()) p.fail(dropped);
    this.#locals.clear();
    for (const s of [...this.#liveSenders]) s._closed(dropped);
    this.#liveSenders.clear();
    if (this.#unattachedTimer !== null) this.#runtime.clearTimer(this.#unattachedTimer);
    this.#unattachedTimer = null;
    this.#unattached = [];
    await this.#perStream?.close();
    // A messenger the caller passed in is the caller's to close.
    if (this.#ownsMessenger) await this.#messenger.close();
  }
}

/**
 * Create a node. Validates every option, `mux` included: a bad value rejects with one `ConfigError`
 * (`ERR_INVALID_CONFIG`) naming every bad field, as do unknown options, options that only shape a
 * messenger the node builds beside a ready-made `messenger`, and a `messenger` that does not advertise
 * `messenger-mux-v2` while the mux is on. Honours the kill switch `LANEMUX_MUX_DISABLE` (or `VELO_MESSENGER_MUX_DISABLE`) ∈ {1, true, yes, on}.
 */
export async function createNode(options: NodeOptions): Promise<LanemuxNode> {
  // Every option, the mux config and the kill switch: one ConfigError naming every bad field.
  const config = validateNodeOptions(options);
  const runtime = options.runtime ?? systemRuntime();
  let messenger = options.messenger;
  let built: LanemuxNode | undefined;
  if (messenger === undefined) {
    const keys: string[] = [];
    if (config.enabled) keys.push(MESSENGER_MUX_KEY);
    if (options.perStream) keys.push(options.perStream.key);
    messenger = await createMessenger({
      transports: options.transports!,
      transportKeys: keys,
      // Every link is health-checked (a dead one closes, so idle sockets cannot pin a peer place); the
      // mux adds its own check for peers with live slots (epoch death on failure).
      ...(options.lanes !== undefined ? { lanes: options.lanes } : {}),
      ...(options.maxMessageSize !== undefined ? { maxMessageSize: options.maxMessageSize } : {}),
      ...(options.workerId !== undefined ? { workerId: options.workerId } : {}),
      ...(options.authenticate !== undefined ? { authenticate: options.authenticate } : {}),
      // Links with live streams are never idle-closed or evicted (the node is built right after).
      isBusy: (peer) => built?.busy(peer.id) ?? false,
      ...(options.credential !== undefined ? { credential: options.credential } : {}),
      // The sender toward us keeps at most this many bytes of mux data unreleased (docs/protocol.md §3.3).
      ...(config.enabled ? { receiveWindow: config.peerByteBudget } : {}),
    });
  }
  const node = new LanemuxNode({ ...options, messenger, runtime, ownsMessenger: options.messenger === undefined }, config);
  built = node;
  await node._start();
  return node;
}
