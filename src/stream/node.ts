/**
 * `createNode`: one lanemux node — a messenger over its transports, the mux, the anchors it
 * consumes and the senders it produces. The public entry point of the SDK. The class extends the
 * consumer-only {@link LanemuxClient} (lanemux-client.ts: consumer.ts, unattached.ts, calls) with the
 * producer's parts (producer.ts, mpsc-host.ts, serve, drain, discovery) over the same NodeState.
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
import { MUX_PRODUCER_PARTS } from '../mux/producer-parts.ts';
import { REATTACH_HANDLER, answerReattach, reattach, type ReattachHost, type ReattachOptions } from './reattach.ts';
import type { Authenticate } from '../transport/auth.ts';
import type { Messenger, PeerId } from '../messenger/types.ts';
import type { ResolvedMuxConfig } from '../mux/config.ts';
import { systemRuntime } from '../runtime/runtime.ts';
import type { StreamAnchor } from './anchor.ts';
import { MPSC_ATTACH_HANDLER, MPSC_CANCEL_HANDLER, MPSC_DETACH_HANDLER } from './attach-messages.ts';
import { StreamError } from './errors.ts';
import type { MpscAnchor, MpscAnchorOptions } from './mpsc-anchor.ts';
import { MpscHostSide } from './mpsc-host.ts';
import type { MpscSender } from './mpsc-sender.ts';
import type { PerStreamTransport } from './per-stream.ts';
import { ProducerSide, type AttachOptions, type OpenOptions } from './producer.ts';
import type { StreamSender } from './sender.ts';
import type { Discovery } from '../discovery/discovery.ts';
import type { NodeDiscoveryOptions } from './discovery-options.ts';
import { DiscoveryDialer } from './discovery-dial.ts';
import { NodeDrain, drainTimeout, type DrainHost, type DrainOptions, type DrainSummary } from './drain.ts';
import { drainRefusal, isResume } from './drain-notice.ts';
import { ServeTable, type CallHandler, type ServeOptions } from './serve.ts';
import { LanemuxClient, type ClientOptions } from './lanemux-client.ts';
import { validateNodeOptions } from './node-options.ts';
import { acceptPerStream } from './per-stream-consumer.ts';
import { openNodeMessenger } from './node-messenger.ts';

export { ANCHOR_CHANNEL_DEPTH } from './node-state.ts';
export type { AttachOptions } from './producer.ts';
export type { ResumeOptions } from './resume-options.ts';
export type { NodeDiscoveryOptions, NodeRegistration } from './discovery-options.ts';
export type { DrainOptions, DrainSummary } from './drain.ts';

/** Options of {@link createNode}: a client's (see `ClientOptions`) and a node's own; give either a `messenger`, or `transports` to build one. */
export interface NodeOptions extends ClientOptions {
  /**
   * When the node builds its messenger: authenticates inbound links of transports without an
   * `authenticate` of their own (see `Authenticate`, docs/security.md). Defaults to none.
   */
  readonly authenticate?: Authenticate;
  /** The per-stream (legacy) transport; without one, peers that lack the mux cannot attach. */
  readonly perStream?: PerStreamTransport;
  /**
   * Discovery (`lanemux/discovery/*`): the node registers where it listens once it does (under the
   * client's lease; `close()` deregisters), and an attach or ticket open toward a worker it has no
   * link to resolves that worker and dials it. A bare client takes every default of
   * `NodeDiscoveryOptions`. Defaults to none: only `connect` makes links.
   */
  readonly discovery?: Discovery | NodeDiscoveryOptions;
}

/**
 * A lanemux node: a {@link LanemuxClient} (the consumer side: anchors, tickets, `stream` calls) with
 * the producer side (senders, MPSC, `serve`, drain, discovery). Create one with {@link createNode}.
 */
export class LanemuxNode extends LanemuxClient {
  readonly #producer: ProducerSide;
  readonly #mpsc: MpscHostSide;
  readonly #discovery: DiscoveryDialer | null;
  /** The methods `serve` registered. */
  readonly #served: ServeTable;
  /** How a drain ends this node's streams at its deadline. */
  readonly #drainHost: DrainHost;

  /** @internal Use {@link createNode}. */
  constructor(
    options: NodeOptions & { readonly messenger: Messenger; readonly ownsMessenger?: boolean },
    config: ResolvedMuxConfig,
  ) {
    // A node produces: its mux stages singletons and heartbeats its streams.
    super({ ...options, muxProducer: MUX_PRODUCER_PARTS }, config);
    const s = this._s;
    const consumer = this._consumer;
    const messenger = options.messenger;
    const runtime = s.runtime;
    const producer = new ProducerSide(s);
    const mpsc = new MpscHostSide(s, this._reaper, producer, consumer.resumes);
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
    // The client registered the anchor attach handlers; these answer MPSC attaches and re-attaches,
    // as those do: from state, no AbortSignal per request, a draining node refusing new streams.
    const noSignal = { signal: false } as const;
    messenger.handle(
      MPSC_ATTACH_HANDLER,
      (from, body) => (s.drain !== null && !isResume(body) ? drainRefusal(s.metrics) : mpsc.onMpscAttach(from, body)),
      noSignal,
    );
    messenger.handle(MPSC_DETACH_HANDLER, (from, body) => mpsc.onMpscDetach(from, body), noSignal);
    messenger.handle(MPSC_CANCEL_HANDLER, (_from, body) => mpsc.onMpscCancel(body), noSignal);
    messenger.handle(REATTACH_HANDLER, (from, body) => answerReattach(s, from, body), noSignal);
    this.#served = new ServeTable(messenger, producer);
  }

  /** @internal */
  async _start(): Promise<void> {
    const s = this._s;
    if (s.perStream !== null && !(s.config.muxOnly && s.mux !== null)) {
      s.perStreamEndpoint = await s.perStream.listen((anchorId, sessionId) => acceptPerStream(s, anchorId, sessionId));
    }
    await this.#discovery?.register();
  }

  /** Writes made by the per-stream (legacy) transport, if any. */
  get perStreamWrites(): number {
    return this._s.perStream?.writes ?? 0;
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
    return reattach<T>(this._s, this._consumer as ReattachHost, peer, token, options);
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

  /** True once {@link drain} was called: the node takes no new streams (until it closes). */
  get draining(): boolean {
    return this._s.drain !== null;
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
    const s = this._s;
    const timeout = drainTimeout(options);
    if (s.drain !== null) return s.drain.promise;
    if (s.closed) return Promise.reject(new StreamError('ERR_CLOSED', 'the node is closed'));
    const drain = new NodeDrain(s, this.#drainHost, timeout);
    s.drain = drain;
    drain.start();
    return drain.promise;
  }

  /** @internal Discovery's deregistration, started first when the node closes. */
  protected override _closeFirst(): Promise<void> | undefined {
    return this.#discovery?.close();
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
  const config = await validateNodeOptions(options);
  const runtime = options.runtime ?? systemRuntime();
  let built: LanemuxNode | undefined;
  const messenger =
    options.messenger ??
    (await openNodeMessenger(options, config, runtime, (peer) => built?.busy(peer.id) ?? false, {
      ...(options.authenticate !== undefined ? { authenticate: options.authenticate } : {}),
      ...(options.perStream ? { keys: [options.perStream.key] } : {}),
    }));
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
