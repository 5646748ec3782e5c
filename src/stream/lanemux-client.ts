/**
 * `createClient`: a consumer-only lanemux node — what a browser page needs. It connects (WebSocket,
 * WebTransport with fallback), creates anchors and zero-RTT tickets, reads, cancels and resumes
 * streams, and calls a peer's served method with `stream`. It produces nothing: no senders, no MPSC
 * anchors, no `serve`, no relay, no drain, no discovery. Those live in {@link LanemuxNode}
 * (`createNode`), which extends this class, so a bundle that imports only `lanemux/client` leaves the
 * producer side out. One implementation of each protocol piece serves both: the client is the
 * consumer half of a node, not a copy of it.
 *
 * @example
 * ```ts
 * import { createClient, webSocketClientTransport } from 'lanemux/client';
 * const client = await createClient({ transports: [webSocketClientTransport()] });
 * const peer = await client.connect('ws://localhost:8080/lanemux');
 * for await (const token of client.stream<string>(peer, 'chat', { prompt: 'hi' })) console.log(token);
 * ```
 */
import type { CredentialSource } from '../transport/auth.ts';
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
import type { TransportAdapter } from '../transport/port.ts';
import type { MuxConfig, ResolvedMuxConfig } from '../mux/config.ts';
import { Mux } from '../mux/mux.ts';
import type { MuxProducerParts } from '../mux/producer-parts.ts';
import { systemRuntime } from '../runtime/runtime.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { MESSENGER_MUX_KEY, TCP_STREAM_KEY } from '../wire/constants.ts';
import type { StreamAnchor } from './anchor.ts';
import { ATTACH_HANDLER, DETACH_HANDLER } from './attach-messages.ts';
import { ConsumerSide } from './consumer.ts';
import { StreamError } from './errors.ts';
import type { MpscAnchor } from './mpsc-anchor.ts';
import { NodeState } from './node-state.ts';
import type { PerStreamTransport } from './per-stream.ts';
import { UnattachedReaper } from './unattached.ts';
import { resolveResume, type ResumeOptions } from './resume-options.ts';
import { DRAIN_HANDLER, drainRefusal, isResume } from './drain-notice.ts';
import { startCall, type CallOptions, type CallStream } from './call.ts';
import { validateClientOptions } from './client-options.ts';
import { openNodeMessenger } from './node-messenger.ts';

/** Options of {@link createClient}: give either a `messenger`, or `transports` to build one. */
export interface ClientOptions {
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
}

/** @internal How a node (or client) is built: its options with the messenger it rides. */
export interface NodeInit extends ClientOptions {
  readonly messenger: Messenger;
  readonly ownsMessenger?: boolean;
  /** The per-stream (legacy) transport of a node; a client has none. */
  readonly perStream?: PerStreamTransport;
  /** The producer-only parts of a node's mux (staging, heartbeats); a client's mux has none. */
  readonly muxProducer?: MuxProducerParts;
}

/**
 * A consumer-only lanemux node (see {@link createClient}); {@link LanemuxNode} extends it with the
 * producer side.
 */
export class LanemuxClient {
  static {
    // `await using node = …` where the runtime has explicit resource management.
    defineAsyncDispose(LanemuxClient.prototype);
  }

  /** This node's 64-bit worker id (the routing key in its anchor handles). */
  readonly workerId: bigint;
  /** @internal The state every part of the node shares. */
  protected readonly _s: NodeState;
  /** @internal The consumer side: anchors, attach answers, tickets. */
  protected readonly _consumer: ConsumerSide;
  /** @internal Ends anchors no sender attached to. */
  protected readonly _reaper: UnattachedReaper;
  readonly #ownsMessenger: boolean;
  /** The close under way or done (one per node). */
  #closing: Promise<void> | undefined;

  /** @internal Use {@link createClient} (or `createNode`). */
  constructor(options: NodeInit, config: ResolvedMuxConfig) {
    const messenger = options.messenger;
    const metrics = options.metrics ?? new MuxMetrics();
    if (options.logger !== undefined) metrics.logger = options.logger;
    const runtime = options.runtime ?? systemRuntime();
    const perStream = options.perStream ?? null;
    // Its dial and preface deadlines run on the node's clock too.
    perStream?.setRuntime?.(runtime);
    const mux = config.enabled ? new Mux({ config, metrics, runtime, messenger, producer: options.muxProducer }) : null;
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
    this._s = s;
    // The reaper ends an expired anchor through the consumer side, which starts its timers.
    const reaper = new UnattachedReaper(s, (anchor) => consumer.anchorDone(anchor, false));
    const consumer = new ConsumerSide(s, reaper);
    this._reaper = reaper;
    this._consumer = consumer;
    // The attach handlers answer from state, never wait on the caller: no AbortSignal per request.
    // A draining node refuses every new stream; a resume continues a live one (docs/protocol.md §8.4).
    const noSignal = { signal: false } as const;
    messenger.handle(
      ATTACH_HANDLER,
      (from, body) => (s.drain !== null && !isResume(body) ? drainRefusal(s.metrics) : consumer.onAttach(from, body)),
      noSignal,
    );
    messenger.handle(DETACH_HANDLER, (from, body) => consumer.onDetach(from, body), noSignal);
    messenger.on(DRAIN_HANDLER, (from, _lane, payload) => s.peerDrains.onNotice(from, payload));
  }

  /** Addresses this node listens on (first one: {@link address}). */
  get addresses(): readonly string[] {
    return this._s.messenger.addresses;
  }

  /** The address peers dial to reach this node (`node.connect(address)`), or '' if it does not listen. */
  get address(): string {
    return this._s.messenger.addresses[0] ?? '';
  }

  /** True when the mux is installed (enabled and not killed by `LANEMUX_MUX_DISABLE`). */
  get muxEnabled(): boolean {
    return this._s.mux !== null;
  }

  /** The resolved mux configuration. */
  get config(): ResolvedMuxConfig {
    return this._s.config;
  }

  /**
   * Connect to a peer node; resolves with its worker id (hex) once the hello exchange is done, and
   * rejects within `timeoutMs` (default 10,000) otherwise. `reconnect: true` keeps the link up on
   * every transport (TCP and memory too), see `ConnectOptions`.
   */
  async connect(address: string, options: ConnectOptions = {}): Promise<PeerId> {
    const peer = await this._s.messenger.connect(address, options);
    this._s.mux?.touch();
    return peer.id;
  }

  /**
   * Called when the node stops dialling an address for good — a refused `connect`, a reconnect loop
   * that gave up, a link lost on an adapter that does not reconnect — with the address and the final
   * coded error (see `DialEndedEvent`). Not called when the node closes. Returns an unsubscribe function.
   */
  onDialEnded(listener: (event: DialEndedEvent) => void): () => void {
    return this._s.messenger.onDialEnded(listener);
  }

  /**
   * Resolves with the peer's worker id once a link to `address` is up, now or after a reconnect;
   * rejects on timeout (default 10,000 ms), abort, close, or when the peer there is gone with
   * nothing left to dial it (see `Messenger.ready`).
   */
  ready(address: string, options?: WaitOptions): Promise<PeerId> {
    return readyAt(this._s.messenger, address, options);
  }

  /**
   * Called at each step of each peer's life — `up`, `down`, `reconnecting`, `resumed`, `gone`, in
   * that order, and `draining` when the peer says it drains (see `PeerStateType`). Returns an
   * unsubscribe function.
   */
  onPeerState(listener: (event: PeerStateEvent) => void): () => void {
    return onPeerState(this._s.messenger, listener);
  }

  /** The peer lifecycle as an async iterator with a bounded queue (see `Messenger.peerEvents`). */
  peerEvents(options?: PeerEventsOptions): AsyncIterableIterator<PeerEvent> {
    return peerEvents(this._s.messenger, options);
  }

  /** @internal The node's mux (null when disabled), for the simulator's credit check. */
  get _mux(): Mux | null {
    return this._s.mux;
  }

  /** @internal True while streams with `peer` are live or answered (the messenger keeps such links). */
  busy(peer: string): boolean {
    return this._s.mux?.busy(peer) ?? false;
  }

  /** A snapshot of every metric under the reference's names. */
  metrics(): Record<string, number> {
    const out = this._s.metrics.snapshot();
    // Binds waiting for, or held by, a slot: with live_slots, what must return to 0 when streams end.
    out[`${this._s.metrics.prefix}streaming_mux_live_binds`] = this._s.mux?.liveBinds ?? 0;
    // Connections refused or evicted by the transport (bounded label: the reason).
    const refused = this._s.messenger.stats().refused ?? {};
    for (const reason of Object.keys(refused) as Array<keyof typeof refused>) {
      out[`${this._s.metrics.prefix}messenger_connections_refused_total{reason="${reason}"}`] = refused[reason];
    }
    return out;
  }

  /** The live metrics object (fields are updated in place). */
  get metricsRegistry(): MuxMetrics {
    return this._s.metrics;
  }

  // ───────────────────────── consumer side ─────────────────────────

  /** Create an anchor: the consumer's end of a new stream. Its `handle` goes to the producer. */
  createAnchor<T = unknown>(): StreamAnchor<T> {
    return this._consumer.createAnchor<T>();
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
    return this._consumer.prebindAnchor(target, options);
  }

  /**
   * `prebindAnchor` with a placement key (the reference's `prebind_anchor_keyed`): the stream rides
   * lane `splitmix64(key) % lanes` on this node.
   */
  prebindAnchorKeyed(target: StreamAnchor<unknown> | string, key: bigint): string | undefined {
    return this.prebindAnchor(target, { laneKey: key });
  }

  // ───────────────────────── calls ─────────────────────────

  /**
   * Call `method` on `peer` and stream its answer in one round trip (the anchor's zero-RTT ticket travels in the
   * request). Returns at once a {@link CallStream} (async iterable, `.readable`, `.cancel()`) whose reads reject
   * with every failure: `ERR_UNKNOWN_METHOD`, a refusal, the handler's throw, the stream's own errors.
   */
  stream<T = unknown>(peer: PeerId, method: string, request: unknown, options?: CallOptions): CallStream<T> {
    return startCall<T>(this._s.messenger, this._consumer, peer, method, request, options);
  }

  /**
   * Kick every batcher: under `manual` this is the write; under `auto` it writes before the
   * batcher's own conditions. Synchronous, never throws, does nothing without a mux. It is not a
   * back-pressure point. Under `manual`, records released by credit that arrives after this call
   * wait for the next call.
   */
  flushBatch(): void {
    this._s.mux?.flushBatch();
  }

  /**
   * Close the node: every stream ends, every connection closes; `live_slots` returns to 0. A second
   * call returns the first one's promise, so it too resolves only once the node has closed.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  /** @internal What a node ends first when it closes and awaits last (its deregistration from discovery). */
  protected _closeFirst(): Promise<void> | undefined {
    return undefined;
  }

  async #close(): Promise<void> {
    // A drain under way ends here: the streams left end ERR_DRAINING (peers told first).
    this._s.drain?.closing();
    this._s.drain?.dispose();
    this._s.closed = true;
    // Deregistered first, while the rest closes, so no new attach is sent here.
    const deregistered = this._closeFirst();
    this._s.mux?.close();
    this._s.resume?.close();
    this._s.resumePeers?.close();
    this._consumer.close();
    const dropped = new StreamError('ERR_SENDER_DROPPED', 'the node closed', { retryable: true });
    for (const a of [...this._s.anchors.values()]) a._fail(dropped);
    for (const a of [...this._s.mpscAnchors.values()]) a._fail(dropped);
    // Anchors a failure did not forget (no sender, a per-stream answer never dialled, MPSC) leave the
    // gauge here: `active_anchors` returns to 0 with the node.
    this._s.metrics.activeAnchors -= this._s.anchors.size + this._s.mpscAnchors.size;
    this._s.anchors.clear();
    this._s.mpscAnchors.clear();
    for (const p of this._s.locals.values()) p.fail(dropped);
    this._s.locals.clear();
    for (const s of [...this._s.liveSenders]) s._closed(dropped);
    this._s.liveSenders.clear();
    this._reaper.close();
    await this._s.perStream?.close();
    // A messenger the caller passed in is the caller's to close.
    if (this.#ownsMessenger) await this._s.messenger.close();
    await deregistered;
  }
}

/**
 * Create a consumer-only node (a browser page's): it connects, creates anchors and tickets, and calls
 * served methods with `stream`; a peer's `createNode` produces. Validates every option, `mux`
 * included: a bad value rejects with one `ConfigError` (`ERR_INVALID_CONFIG`) naming every bad field,
 * as do unknown options (a producer's, such as `perStream` or `discovery`, included), options that
 * only shape a messenger the client builds beside a ready-made `messenger`, and a `messenger` that
 * does not advertise `messenger-mux-v2` while the mux is on. Honours the kill switch
 * `LANEMUX_MUX_DISABLE` (or `VELO_MESSENGER_MUX_DISABLE`) ∈ {1, true, yes, on}.
 */
export async function createClient(options: ClientOptions): Promise<LanemuxClient> {
  const config = await validateClientOptions(options);
  const runtime = options.runtime ?? systemRuntime();
  let built: LanemuxClient | undefined;
  const messenger =
    options.messenger ?? (await openNodeMessenger(options, config, runtime, (peer) => built?.busy(peer.id) ?? false));
  const client = new LanemuxClient(
    { ...options, messenger, runtime, ownsMessenger: options.messenger === undefined },
    config,
  );
  built = client;
  return client;
}
