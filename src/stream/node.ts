/**
 * `createNode`: one lanemux node — a messenger over its transports, the mux, the anchors it
 * consumes and the senders it produces. The public entry point of the SDK. The class composes its
 * parts (consumer.ts, producer.ts, mpsc-host.ts, unattached.ts) over one shared NodeState.
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
import { REATTACH_HANDLER, answerReattach, reattach, type ReattachHost, type ReattachOptions } from './reattach.ts';
import type { Authenticate, CredentialSource } from '../transport/auth.ts';
import { defineAsyncDispose } from '../runtime/dispose.ts';
import { MuxMetrics, type NodeLogger } from '../metrics/mux-metrics.ts';
import type {
  ConnectOptions,
  DialEndedEvent,
  Messenger,
  PeerEvent,
  PeerEventsOptions,
  PeerId,
  PeerStateEvent,
  WaitOptions,
} from '../messenger/types.ts';
import { onPeerState, peerEvents, readyAt } from './peer-wait.ts';
import { validateNodeOptions } from './node-options.ts';
import { createMessenger } from '../messenger/messenger.ts';
import type { TransportAdapter } from '../transport/port.ts';
import type { MuxConfig, ResolvedMuxConfig } from '../mux/config.ts';
import { Mux } from '../mux/mux.ts';
import { systemRuntime } from '../runtime/runtime.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { MESSENGER_MUX_KEY, TCP_STREAM_KEY } from '../wire/constants.ts';
import type { StreamAnchor } from './anchor.ts';
import {
  ATTACH_HANDLER,
  DETACH_HANDLER,
  MPSC_ATTACH_HANDLER,
  MPSC_CANCEL_HANDLER,
  MPSC_DETACH_HANDLER,
} from './attach-messages.ts';
import { ConsumerSide } from './consumer.ts';
import { StreamError } from './errors.ts';
import type { MpscAnchor, MpscAnchorOptions } from './mpsc-anchor.ts';
import { MpscHostSide } from './mpsc-host.ts';
import type { MpscSender } from './mpsc-sender.ts';
import { NodeState } from './node-state.ts';
import type { PerStreamTransport } from './per-stream.ts';
import { ProducerSide, type AttachOptions, type OpenOptions } from './producer.ts';
import type { StreamSender } from './sender.ts';
import { UnattachedReaper } from './unattached.ts';
import { RESUME_KEY, resolveResume, type ResumeOptions } from './resume-options.ts';
import type { Discovery } from '../discovery/discovery.ts';
import type { NodeDiscoveryOptions } from './discovery-options.ts';
import { DiscoveryDialer } from './discovery-dial.ts';
import {
  NodeDrain,
  drainRefusal,
  drainTimeout,
  type DrainHost,
  type DrainOptions,
  type DrainSummary,
} from './drain.ts';
import { DRAIN_HANDLER, DRAIN_KEY } from './drain-notice.ts';
import { ServeTable, type CallHandler, type ServeOptions } from './serve.ts';
import { startCall, type CallOptions, type CallStream } from './call.ts';

export { ANCHOR_CHANNEL_DEPTH } from './node-state.ts';
export type { AttachOptions } from './producer.ts';
export type { ResumeOptions } from './resume-options.ts';
export type { NodeDiscoveryOptions, NodeRegistration } from './discovery-options.ts';
export type { DrainOptions, DrainSummary } from './drain.ts';

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
  /**
   * Clock, timers and randomness of the whole node: the mux and streams, and the messenger it builds
   * with its transport and adapters (a messenger passed in keeps its own). Defaults to the current runtime's.
   */
  readonly runtime?: Runtime;
  /**
   * Where the node reports events worth reading (`console` fits): a record for a stream that just
   * ended (a straggler, at debug level), records for slots it never knew (at warning level, at the
   * 1st, 10th, 100th, … of each record type). Defaults to none: counted in `metrics()` only.
   */
  readonly logger?: NodeLogger;
  /**
   * Transparent resume of mux streams across a lost link (docs/protocol.md §8.3): when the
   * link to a peer drops and the same peer (same worker, same instance) links again within the
   * window, every mux stream (single-sender, and each MPSC sender) goes on where it stopped,
   * nothing lost or repeated; the per-stream path never resumes (reason `unsupported`). Applies
   * toward peers that advertise it too (`lanemux-resume-v1` in their HELLO; a messenger passed in
   * must list it in its `transportKeys`). `false` turns it off. Defaults to on: see `ResumeOptions`.
   */
  readonly resume?: ResumeOptions | false;
  /**
   * Discovery (`lanemux/discovery/*`): the node registers where it listens once it does (under the
   * client's lease; `close()` deregisters), and an attach or ticket open toward a worker it has no
   * link to resolves that worker and dials it. A bare client takes every default of
   * `NodeDiscoveryOptions`. Defaults to none: only `connect` makes links.
   */
  readonly discovery?: Discovery | NodeDiscoveryOptions;
}

/** A lanemux node. Create one with {@link createNode}. */
export class LanemuxNode {
  static {
    // `await using node = …` where the runtime has explicit resource management.
    defineAsyncDispose(LanemuxNode.prototype);
  }

  /** This node's 64-bit worker id (the routing key in its anchor handles). */
  readonly workerId: bigint;
  readonly #s: NodeState;
  readonly #consumer: ConsumerSide;
  readonly #producer: ProducerSide;
  readonly #mpsc: MpscHostSide;
  readonly #reaper: UnattachedReaper;
  readonly #ownsMessenger: boolean;
  readonly #discovery: DiscoveryDialer | null;
  /** The methods `serve` registered. */
  readonly #served: ServeTable;
  /** How a drain ends this node's streams at its deadline. */
  readonly #drainHost: DrainHost;
  /** The close under way or done (one per node). */
  #closing: Promise<void> | undefined;

  /** @internal Use {@link createNode}. */
  constructor(
    options: NodeOptions & { readonly messenger: Messenger; readonly ownsMessenger?: boolean },
    config: ResolvedMuxConfig,
  ) {
    const messenger = options.messenger;
    const metrics = options.metrics ?? new MuxMetrics();
    if (options.logger !== undefined) metrics.logger = options.logger;
    const runtime = options.runtime ?? systemRuntime();
    const perStream = options.perStream ?? null;
    // Its dial and preface deadlines run on the node's clock too.
    perStream?.setRuntime?.(runtime);
    const mux = config.enabled ? new Mux({ config, metrics, runtime, messenger }) : null;
    const keys: string[] = [];
    if (mux !== null) keys.push(MESSENGER_MUX_KEY);
    if (perStream !== null) keys.push(TCP_STREAM_KEY);
    this.#ownsMessenger = options.ownsMessenger ?? false;
    this.workerId = messenger.self.workerId;
    const s = new NodeState({
      workerId: this.workerId,
      messenger,
      config,
      mux,
      metrics,
      runtime,
      perStream,
      offeredKeys: Object.freeze(keys.sort()),
      unattachedTimeout: options.unattachedTimeout ?? config.acceptWindow,
      resumeOptions: mux === null ? null : resolveResume(options.resume, config.slotByteBudget),
    });
    this.#s = s;
    // The reaper ends an expired anchor through the consumer side, which starts its timers.
    const reaper = new UnattachedReaper(s, (anchor) => consumer.anchorDone(anchor, false));
    const consumer = new ConsumerSide(s, reaper);
    const producer = new ProducerSide(s);
    const mpsc = new MpscHostSide(s, reaper, producer, consumer.resumes);
    this.#reaper = reaper;
    this.#consumer = consumer;
    this.#producer = producer;
    this.#mpsc = mpsc;
    const dialer = DiscoveryDialer.of(options.discovery, options.transports, messenger, runtime);
    if (dialer !== null) producer.findPeer = (peer, o) => dialer.peer(peer, o);
    this.#discovery = dialer;
    this.#drainHost = {
      endAnchor: (anchor, error) => {
        const local = s.locals.get(anchor);
        anchor._fail(error);
        local?.fail(error);
        consumer.anchorDone(anchor, false);
      },
      endMpsc: (anchor, error) => {
        anchor._fail(error);
        mpsc.mpscDone(anchor, false);
      },
    };
    // The attach handlers answer from state, never wait on the caller: no AbortSignal per request.
    // A draining node refuses every new stream; a resume continues a live one (docs/protocol.md §8.4).
    const noSignal = { signal: false } as const;
    messenger.handle(
      ATTACH_HANDLER,
      (from, body) => (s.drain !== null && !isResume(body) ? drainRefusal(s.metrics) : consumer.onAttach(from, body)),
      noSignal,
    );
    messenger.handle(DETACH_HANDLER, (from, body) => consumer.onDetach(from, body), noSignal);
    messenger.handle(
      MPSC_ATTACH_HANDLER,
      (from, body) => (s.drain !== null && !isResume(body) ? drainRefusal(s.metrics) : mpsc.onMpscAttach(from, body)),
      noSignal,
    );
    messenger.handle(MPSC_DETACH_HANDLER, (from, body) => mpsc.onMpscDetach(from, body), noSignal);
    messenger.handle(MPSC_CANCEL_HANDLER, (_from, body) => mpsc.onMpscCancel(body), noSignal);
    messenger.handle(REATTACH_HANDLER, (from, body) => answerReattach(this.#s, from, body), noSignal);
    messenger.on(DRAIN_HANDLER, (from, _lane, payload) => s.peerDrains.onNotice(from, payload));
    this.#served = new ServeTable(messenger, producer);
  }

  /** @internal */
  async _start(): Promise<void> {
    const s = this.#s;
    if (s.perStream !== null && !(s.config.muxOnly && s.mux !== null)) {
      const consumer = this.#consumer;
      s.perStreamEndpoint = await s.perStream.listen((anchorId, sessionId) =>
        consumer.acceptPerStream(anchorId, sessionId),
      );
    }
    await this.#discovery?.register();
  }

  /** Addresses this node listens on (first one: {@link address}). */
  get addresses(): readonly string[] {
    return this.#s.messenger.addresses;
  }

  /** The address peers dial to reach this node (`node.connect(address)`), or '' if it does not listen. */
  get address(): string {
    return this.#s.messenger.addresses[0] ?? '';
  }

  /** True when the mux is installed (enabled and not killed by `LANEMUX_MUX_DISABLE`). */
  get muxEnabled(): boolean {
    return this.#s.mux !== null;
  }

  /** The resolved mux configuration. */
  get config(): ResolvedMuxConfig {
    return this.#s.config;
  }

  /**
   * Connect to a peer node; resolves with its worker id (hex) once the hello exchange is done, and
   * rejects within `timeoutMs` (default 10,000) otherwise. `reconnect: true` keeps the link up on
   * every transport (TCP and memory too), see `ConnectOptions`.
   */
  async connect(address: string, options: ConnectOptions = {}): Promise<PeerId> {
    const peer = await this.#s.messenger.connect(address, options);
    this.#s.mux?.touch();
    return peer.id;
  }

  /**
   * Called when the node stops dialling an address for good — a refused `connect`, a reconnect loop
   * that gave up, a link lost on an adapter that does not reconnect — with the address and the final
   * coded error (see `DialEndedEvent`). Not called when the node closes. Returns an unsubscribe function.
   */
  onDialEnded(listener: (event: DialEndedEvent) => void): () => void {
    return this.#s.messenger.onDialEnded(listener);
  }

  /**
   * Resolves with the peer's worker id once a link to `address` is up, now or after a reconnect;
   * rejects on timeout (default 10,000 ms), abort, close, or when the peer there is gone with
   * nothing left to dial it (see `Messenger.ready`).
   */
  ready(address: string, options?: WaitOptions): Promise<PeerId> {
    return readyAt(this.#s.messenger, address, options);
  }

  /**
   * Called at each step of each peer's life — `up`, `down`, `reconnecting`, `resumed`, `gone`, in
   * that order, and `draining` when the peer says it drains (see `PeerStateType`). Returns an
   * unsubscribe function.
   */
  onPeerState(listener: (event: PeerStateEvent) => void): () => void {
    return onPeerState(this.#s.messenger, listener);
  }

  /** The peer lifecycle as an async iterator with a bounded queue (see `Messenger.peerEvents`). */
  peerEvents(options?: PeerEventsOptions): AsyncIterableIterator<PeerEvent> {
    return peerEvents(this.#s.messenger, options);
  }

  /** @internal The node's mux (null when disabled), for the simulator's credit check. */
  get _mux(): Mux | null {
    return this.#s.mux;
  }

  /** @internal True while streams with `peer` are live or answered (the messenger keeps such links). */
  busy(peer: string): boolean {
    return this.#s.mux?.busy(peer) ?? false;
  }

  /** A snapshot of every metric under the reference's names. */
  metrics(): Record<string, number> {
    const out = this.#s.metrics.snapshot();
    // Binds waiting for, or held by, a slot: with live_slots, what must return to 0 when streams end.
    out[`${this.#s.metrics.prefix}streaming_mux_live_binds`] = this.#s.mux?.liveBinds ?? 0;
    // Connections refused or evicted by the transport (bounded label: the reason).
    const refused = this.#s.messenger.stats().refused ?? {};
    for (const reason of Object.keys(refused) as Array<keyof typeof refused>) {
      out[`${this.#s.metrics.prefix}messenger_connections_refused_total{reason="${reason}"}`] = refused[reason];
    }
    return out;
  }

  /** The live metrics object (fields are updated in place). */
  get metricsRegistry(): MuxMetrics {
    return this.#s.metrics;
  }

  /** Writes made by the per-stream (legacy) transport, if any. */
  get perStreamWrites(): number {
    return this.#s.perStream?.writes ?? 0;
  }

  // ───────────────────────── consumer side ─────────────────────────

  /** Create an anchor: the consumer's end of a new stream. Its `handle` goes to the producer. */
  createAnchor<T = unknown>(): StreamAnchor<T> {
    return this.#consumer.createAnchor<T>();
  }

  /**
   * Re-attach to a stream of `peer` from its resume token (docs/protocol.md §8.5), for example
   * after a page reload: a new anchor receives items `offset + 1`… of the stream — what the
   * producer's history still holds, then the rest, live. The producer must keep history
   * (`createNode({ resume: { history: true } })`) and both nodes have resume on; the token is the
   * producer's `sender.resumeToken`, which the application handed to the first consumer. Rejects
   * `ERR_ATTACH_REFUSED` saying why when the stream is unknown (wrong token, ended longer ago than
   * `history.keepMs`, evicted) or its history no longer reaches back to `offset + 1`.
   */
  reattach<T = unknown>(peer: PeerId, token: string, options: ReattachOptions): Promise<StreamAnchor<T>> {
    return reattach<T>(this.#s, this.#consumer as ReattachHost, peer, token, options);
  }

  /**
   * Pre-bind an anchor for zero-RTT opening: returns a ticket (a string for the application's own
   * request) that lets the producer open the stream with `openAnchorStream(handle, ticket)` and no
   * attach round trip. Returns undefined when no mux is installed or the anchor is not eligible
   * (an MPSC anchor never is: it counts `{prebind, error}`).
   */
  prebindAnchor(
    target: StreamAnchor<unknown> | MpscAnchor<unknown> | string,
    options: { laneKey?: bigint } = {},
  ): string | undefined {
    return this.#consumer.prebindAnchor(target, options);
  }

  /**
   * `prebindAnchor` with a placement key (the reference's `prebind_anchor_keyed`): the stream rides
   * lane `splitmix64(key) % lanes` on this node.
   */
  prebindAnchorKeyed(target: StreamAnchor<unknown> | string, key: bigint): string | undefined {
    return this.prebindAnchor(target, { laneKey: key });
  }

  /** `attachAnchor` with a placement key (the reference's `attach_anchor_keyed`). */
  attachAnchorKeyed<T = unknown>(
    handle: string,
    key: bigint,
    options: Omit<AttachOptions, 'laneKey'> = {},
  ): Promise<StreamSender<T>> {
    return this.attachAnchor<T>(handle, { ...options, laneKey: key });
  }

  /** `attachMpscAnchor` with a placement key (the reference's `attach_mpsc_anchor_keyed`). */
  attachMpscAnchorKeyed<T = unknown>(
    handle: string,
    key: bigint,
    options: Omit<AttachOptions, 'laneKey'> = {},
  ): Promise<MpscSender<T>> {
    return this.attachMpscAnchor<T>(handle, { ...options, laneKey: key });
  }

  // ───────────────────────── producer side ─────────────────────────

  /**
   * Attach a producer to an anchor handle. Same worker → writes into the anchor directly.
   * Otherwise `_anchor_attach` negotiates: the mux (`messenger-mux-v2`) when both sides offer it,
   * else the per-stream path (`tcp-stream`). A mux answer with zero credit fails the attach.
   */
  attachAnchor<T = unknown>(handle: string, options: AttachOptions = {}): Promise<StreamSender<T>> {
    return this.#producer.attachAnchor<T>(handle, options);
  }

  /**
   * Open a stream from a zero-RTT ticket: the first batch's OpenSlot claims the consumer's
   * pre-bind; no attach message crosses the wire.
   */
  openAnchorStream<T = unknown>(handle: string, ticket: string, options: OpenOptions = {}): Promise<StreamSender<T>> {
    return this.#producer.openAnchorStream<T>(handle, ticket, options);
  }

  // ───────────────────────── calls ─────────────────────────

  /**
   * Serve `method` (docs/protocol.md §8.6): a peer's {@link stream} call opens a stream from its ticket and runs
   * `handler(request, sender, { signal, peer })`. Resolving finishes the stream, throwing fails it (a `CallError`
   * at the caller); `signal` aborts when the caller cancels or goes away. Limits per method, see `ServeOptions`:
   * `maxCallsPerPeer` (256), `maxCalls` (4,096) → `ERR_CALL_LIMIT`; `maxRequestBytes` (64 KiB) →
   * `ERR_REQUEST_TOO_LARGE`. Returns the disposer (new calls then get `ERR_UNKNOWN_METHOD`; running ones go on).
   * A bad name or option, or a method already served, throws a `ConfigError`.
   */
  serve<Req = unknown, T = unknown>(method: string, handler: CallHandler<Req, T>, options?: ServeOptions): () => void {
    return this.#served.serve(method, handler as CallHandler, options);
  }

  /**
   * Call `method` on `peer` and stream its answer in one round trip (the anchor's zero-RTT ticket travels in the
   * request). Returns at once a {@link CallStream} (async iterable, `.readable`, `.cancel()`) whose reads reject
   * with every failure: `ERR_UNKNOWN_METHOD`, a refusal, the handler's throw, the stream's own errors.
   */
  stream<T = unknown>(peer: PeerId, method: string, request: unknown, options?: CallOptions): CallStream<T> {
    return startCall<T>(this.#s.messenger, this.#consumer, peer, method, request, options);
  }

  // ───────────────────────── MPSC ─────────────────────────

  /**
   * Create an MPSC anchor: one consumer end that many senders attach to (`attachMpscAnchor`),
   * each on its own slot and credit window. Its events carry the sender id; a sender's terminal
   * ends only its own part. See {@link MpscAnchor} for how the whole anchor ends.
   */
  createMpscAnchor<T = unknown>(options: MpscAnchorOptions = {}): MpscAnchor<T> {
    return this.#mpsc.createMpscAnchor<T>(options);
  }

  /**
   * Attach one more producer to an MPSC anchor handle. Same worker → writes into the anchor's
   * per-sender buffer directly. Otherwise `_mpsc_anchor_attach` negotiates exactly as
   * {@link attachAnchor} does (`laneKey` places this sender's slot). The returned sender's
   * terminal (`finalize`, `detach`) ends only its own part of the stream.
   */
  attachMpscAnchor<T = unknown>(handle: string, options: AttachOptions = {}): Promise<MpscSender<T>> {
    return this.#mpsc.attachMpscAnchor<T>(handle, options);
  }

  /**
   * Kick every batcher: under `manual` this is the write; under `auto` it writes before the
   * batcher's own conditions. Synchronous, never throws, does nothing without a mux. It is not a
   * back-pressure point. Under `manual`, records released by credit that arrives after this call
   * wait for the next call.
   */
  flushBatch(): void {
    this.#s.mux?.flushBatch();
  }

  /** True once {@link drain} was called: the node takes no new streams (until it closes). */
  get draining(): boolean {
    return this.#s.drain !== null;
  }

  /**
   * Drain the node for a deploy; then `close()` it. At once the node takes no new streams: its
   * own `createAnchor`, `createMpscAnchor`, `attachAnchor`, `attachMpscAnchor` and
   * `openAnchorStream` throw or reject `ERR_DRAINING` (a `StreamError`, retryable), and so do
   * peers' attaches, MPSC attaches and zero-RTT opens (a resume of a live stream goes on). Every
   * peer is told with a draining notice that keeps the link up (docs/protocol.md §8.4): it reports
   * a `draining` peer state and fails new streams toward this node at once. Anchors that wait for a
   * sender (none attached, an unclaimed pre-bind, or their sender detached) end `ERR_DRAINING` now.
   * Every other stream, both ways and MPSC too, goes on; the drain resolves as soon as the last
   * one has ended and what it handed over is written, or at `timeout` (ms, an integer from 0 to
   * 86,400,000; defaults to 30,000), when the streams left end with `ERR_DRAINING`, their peers'
   * ends too. A second call returns the same promise (its `timeout` does not change the first's); `close()`
   * during a drain ends it. Resolves with a {@link DrainSummary}; a bad `timeout` throws a
   * `ConfigError`; on a closed node it rejects `ERR_CLOSED`.
   */
  drain(options?: DrainOptions): Promise<DrainSummary> {
    const s = this.#s;
    const timeout = drainTimeout(options);
    if (s.drain !== null) return s.drain.promise;
    if (s.closed) return Promise.reject(new StreamError('ERR_CLOSED', 'the node is closed'));
    const drain = new NodeDrain(s, this.#drainHost, timeout);
    s.drain = drain;
    drain.start();
    return drain.promise;
  }

  /**
   * Close the node: every stream ends, every connection closes; `live_slots` returns to 0. A second
   * call returns the first one's promise, so it too resolves only once the node has closed.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    // A drain under way ends here: the streams left end ERR_DRAINING (peers told first).
    this.#s.drain?.closing();
    this.#s.drain?.dispose();
    this.#s.closed = true;
    // Deregistered first, while the rest closes, so no new attach is sent here.
    const deregistered = this.#discovery?.close();
    this.#s.mux?.close();
    this.#s.resume?.close();
    this.#consumer.close();
    const dropped = new StreamError('ERR_SENDER_DROPPED', 'the node closed', { retryable: true });
    for (const a of [...this.#s.anchors.values()]) a._fail(dropped);
    for (const a of [...this.#s.mpscAnchors.values()]) a._fail(dropped);
    // Anchors a failure did not forget (no sender, a per-stream answer never dialled, MPSC) leave the
    // gauge here: `active_anchors` returns to 0 with the node.
    this.#s.metrics.activeAnchors -= this.#s.anchors.size + this.#s.mpscAnchors.size;
    this.#s.anchors.clear();
    this.#s.mpscAnchors.clear();
    for (const p of this.#s.locals.values()) p.fail(dropped);
    this.#s.locals.clear();
    for (const s of [...this.#s.liveSenders]) s._closed(dropped);
    this.#s.liveSenders.clear();
    this.#reaper.close();
    await this.#s.perStream?.close();
    // A messenger the caller passed in is the caller's to close.
    if (this.#ownsMessenger) await this.#s.messenger.close();
    await deregistered;
  }
}

/** An attach that resumes a stream whose link was lost (docs/protocol.md §8.3): a draining node answers it. */
function isResume(body: unknown): boolean {
  return typeof body === 'object' && body !== null && (body as { resume?: unknown }).resume !== undefined;
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
    // Every node hears and sends draining notices (docs/protocol.md §8.4).
    const keys: string[] = [DRAIN_KEY];
    if (config.enabled) keys.push(MESSENGER_MUX_KEY);
    if (config.enabled && resolveResume(options.resume, config.slotByteBudget) !== null) keys.push(RESUME_KEY);
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
      // One clock for the whole node: the messenger, its transport and the adapters' connections too.
      runtime,
    });
  }
  const node = new LanemuxNode(
    { ...options, messenger, runtime, ownsMessenger: options.messenger === undefined },
    config,
  );
  built = node;
  try {
    await node._start();
  } catch (e) {
    // A registration refused (or a per-stream listen that failed) frees what the node holds.
    await node.close();
    throw e;
  }
  return node;
}
