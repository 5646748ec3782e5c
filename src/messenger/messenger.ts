/**
 * The messenger: active messages over the transport port (fire-and-forget and unary, addressed by
 * handler name), ordered dispatch per (sender, lane), the reserved `_stream_batch[.k]` ingress of the
 * mux, and a health check. Runtime-agnostic. Wire format: docs/protocol.md §4–§6.
 *
 * This file is the composition: it builds the parts below, wires them to the transport, and keeps
 * the send path (`send`, `sendBatch`) itself so a batch goes to its link with no hop in between.
 * - `options.ts`: the options and their defaults;
 * - `peers.ts`: the live link of each peer, `onPeer`/`onPeerGone`, the idle bound;
 * - `lifecycle.ts`: each peer's `up`/`down`/`reconnecting`/`resumed`/`gone` (`onPeerState`);
 * - `peer-events.ts`: the same as a bounded async iterator (`peerEvents`);
 * - `readiness.ts`: `ready(address)` and `waitForPeer(peer)`;
 * - `peer-state.ts`: what is kept per link;
 * - `dispatch.ts`: ordered dispatch of each received message;
 * - `handlers.ts`: the handler tables and registration;
 * - `unary.ts`: `request` and the REQUEST/RESPONSE/ERROR_RESPONSE/CANCEL exchange;
 * - `health.ts`: PING/PONG and the periodic check;
 * - `faults.ts`: `onError`, NOTICEs, broken envelopes and `stats()`;
 * - `call-timeout.ts`: the range of a per-call `timeoutMs`.
 *
 * Clock, timers and randomness come from the `runtime` option (`src/runtime/`), shared with the
 * transport and its adapters.
 *
 * @example
 * ```ts
 * const a = await createMessenger({ transports: [tcpTransport()], lanes: 4 });
 * const b = await createMessenger({ transports: [tcpTransport({ listen: false })], lanes: 4 });
 * a.handle('echo', (_from, body) => body);
 * const peer = await b.connect(a.addresses[0]!);
 * await b.request(peer.id, 'echo', { hi: 1 }); // { hi: 1 }
 * ```
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';
import { TransportError } from '../transport/errors.ts';
import type { Transport } from '../transport/port.ts';
import { createTransport } from '../transport/transport.ts';
import { tooLarge } from './admission.ts';
import { Dispatcher } from './dispatch.ts';
import { BATCH_ENVELOPE_BYTES, BATCH_HEAD, encodeName, isReservedName, messageHead } from './envelope.ts';
import { MessengerError } from './errors.ts';
import { Faults } from './faults.ts';
import { Handlers } from './handlers.ts';
import { Health } from './health.ts';
import { resolveOptions, tickMs, type MessengerOptions, type ResolvedOptions } from './options.ts';
import type { PeerState } from './peer-state.ts';
import { PeerTable } from './peers.ts';
import { PeerLifecycle } from './lifecycle.ts';
import { DEFAULT_MAX_QUEUED_EVENTS, PeerEventQueue } from './peer-events.ts';
import { ready, waitForPeer, type ReadinessHost } from './readiness.ts';
import { Unary } from './unary.ts';
import { randomHex, randomU64, systemRuntime, type Runtime, type TimerHandle } from '../runtime/runtime.ts';
import { checkTimeout } from './call-timeout.ts';
import type {
  Admission,
  ConnectOptions,
  DialEndedEvent,
  HandleOptions,
  MessageHandler,
  Messenger,
  MessengerErrorEvent,
  MessengerStats,
  PeerGoneEvent,
  PeerId,
  PeerEvent,
  PeerEventsOptions,
  PeerInfo,
  PeerStateEvent,
  RequestHandler,
  UnsignalledRequestHandler,
  WaitOptions,
} from './types.ts';

export type { HealthCheckOptions, MessengerOptions } from './options.ts';

/**
 * Create a messenger, start its listening transports, and resolve once they listen.
 * Rejects with a `ConfigError` (`ERR_INVALID_CONFIG`) naming every bad option, and with
 * `ERR_ADDRESS_IN_USE` (retryable) when a listener's port is taken.
 */
export async function createMessenger(options: MessengerOptions): Promise<Messenger> {
  const o = resolveOptions(options);
  const m = new MessengerImpl(o);
  try {
    await m.start();
  } catch (error) {
    await m.close();
    throw error;
  }
  return m;
}

class MessengerImpl implements Messenger {
  readonly self: PeerInfo;
  readonly #o: ResolvedOptions;
  readonly #rt: Runtime;
  readonly #transport: Transport;
  readonly #faults: Faults;
  readonly #handlers = new Handlers();
  readonly #unary: Unary;
  readonly #health: Health;
  readonly #table: PeerTable;
  readonly #lifecycle: PeerLifecycle;
  readonly #readiness: ReadinessHost;
  /** `#table`'s map, read directly on the send path. */
  readonly #peers: Map<PeerId, PeerState>;
  readonly #dialEndedListeners = new Set<(event: DialEndedEvent) => void>();
  readonly #nameHeads = new Map<string, Uint8Array>();
  #tick: TimerHandle | undefined;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** Health-check interval (also the idle tick), ms. */
  readonly #tickMs: number;

  constructor(o: ResolvedOptions) {
    this.#o = o;
    const rt = o.runtime ?? systemRuntime();
    this.#rt = rt;
    this.#tickMs = tickMs(o);
    const workerId = o.workerId ?? randomU64(rt);
    const id = workerId.toString(16).padStart(16, '0');
    this.#faults = new Faults(id);
    this.#unary = new Unary(o, rt, id, this.#handlers, this.#faults);
    this.#health = new Health(o, rt, this.#faults);
    const dispatcher = new Dispatcher(this.#handlers, this.#unary, this.#health, this.#faults);
    this.#lifecycle = new PeerLifecycle(rt, this.#faults, o.downTimeoutMs, o.maxPeers);
    this.#table = new PeerTable(o, this.#tickMs, dispatcher, this.#faults, this.#lifecycle);
    this.#peers = this.#table.byId;
    const identity = {
      workerId,
      instanceId: o.instanceId ?? randomHex(rt, 8),
      lanes: o.lanes,
      maxMessageSize: o.maxMessageSize,
      transportKeys: [...o.transportKeys].sort(),
      protocolVersion: o.protocolVersion,
      window: o.receiveWindow === undefined ? undefined : Math.min(o.receiveWindow, 0xffffffff),
    };
    this.#transport = createTransport({
      identity,
      adapters: o.transports,
      handler: {
        established: (link) => this.#table.established(link),
        ready: (link) => this.#table.ready(link),
        contested: (link) => {
          const st = this.#table.live(link);
          if (st !== undefined) this.#health.contested(st);
        },
        dialEnded: (address, error, worker) => this.#dialEnded(address, error, worker),
        reconnecting: (event) => {
          if (!this.#closed) this.#lifecycle.redial(event);
        },
        evictable: () => this.#table.evictable(),
      },
      helloTimeoutMs: o.helloTimeoutMs,
      connectTimeoutMs: o.connectTimeoutMs,
      maxPeers: o.maxPeers,
      maxHandshakes: o.maxHandshakes,
      maxEarlyBytes: o.maxMessageSize * 4,
      reconnect: o.reconnect,
      authenticate: o.authenticate,
      credential: o.credential,
      onRefusal: (reason) => {
        this.#faults.refused[reason]++;
      },
      runtime: rt,
    });
    const transport = this.#transport;
    this.#readiness = {
      rt,
      lifecycle: this.#lifecycle,
      connectTimeoutMs: o.connectTimeoutMs,
      peer: (id) => this.#peers.get(id)?.info,
      dialing: (address) => transport.dialing(address),
      onDialEnded: (listener) => this.onDialEnded(listener),
    };
    this.self = {
      id,
      workerId,
      instanceId: identity.instanceId,
      lanes: o.lanes,
      maxMessageSize: o.maxMessageSize,
      transportKeys: identity.transportKeys,
      protocolVersion: o.protocolVersion,
      address: undefined,
      epoch: 0,
      window: identity.window,
    };
  }

  async start(): Promise<void> {
    await this.#transport.listen();
    (this.self as { address: string | undefined }).address = this.#transport.addresses[0];
    const h = this.#o.healthCheck;
    // Periodic: re-armed first, so a tick that throws does not stop the next.
    const tick = (): void => {
      this.#tick = this.#rt.setTimer(tick, this.#tickMs);
      this.#table.idleTick();
      if (h !== false) this.#health.tick(this.#peers.values(), h.timeoutMs, h.filter);
    };
    if (!this.#closed) this.#tick = this.#rt.setTimer(tick, this.#tickMs);
  }

  get addresses(): readonly string[] {
    return this.#transport.addresses;
  }

  // Registration

  on(name: string, handler: MessageHandler): void {
    this.#handlers.on(name, handler);
  }

  registerBatchHandler(lane: number, handler: MessageHandler): void {
    this.#handlers.registerBatchHandler(lane, handler);
  }

  handle(name: string, handler: RequestHandler, options?: { readonly signal?: true }): void;
  handle(name: string, handler: UnsignalledRequestHandler, options: { readonly signal: false }): void;
  handle(name: string, handler: RequestHandler | UnsignalledRequestHandler, options: HandleOptions = {}): void {
    this.#handlers.handle(name, handler, options);
  }

  // Sending

  #target(peer: PeerId, lane: number): PeerState | LanemuxError {
    if (this.#closed) return new MessengerError('ERR_CLOSED', 'the messenger is closed');
    const st = this.#peers.get(peer);
    if (st === undefined)
      return new TransportError('ERR_UNKNOWN_PEER', `no connected peer ${peer}`, { retryable: true });
    if (!Number.isInteger(lane) || lane < 0 || lane >= st.link.lanes) {
      return new TransportError('ERR_BAD_LANE', `lane ${lane} is outside 0..${st.link.lanes - 1} for peer ${peer}`);
    }
    return st;
  }

  send(peer: PeerId, lane: number, name: string, payload: Uint8Array): Admission {
    const st = this.#target(peer, lane);
    if (st instanceof LanemuxError) return Promise.reject(st);
    let head = this.#nameHeads.get(name);
    if (head === undefined) {
      const bytes = isReservedName(name) ? undefined : encodeName(name);
      if (bytes === undefined)
        return Promise.reject(
          new MessengerError('ERR_INVALID_HANDLER', `cannot send to handler name ${JSON.stringify(name)}`),
        );
      head = messageHead(bytes);
      // Cache heads of the (few) names an application uses; bounded so arbitrary names cannot grow it.
      if (this.#nameHeads.size < 1024) this.#nameHeads.set(name, head);
    }
    const size = head.byteLength + payload.byteLength;
    if (size > st.link.maxMessageSize) return Promise.reject(tooLarge(size, st));
    st.activity++;
    return st.link.send(lane, head, payload);
  }

  sendBatch(peer: PeerId, lane: number, payload: Uint8Array, options?: { epoch?: number }): Admission {
    const st = this.#target(peer, lane);
    if (st instanceof LanemuxError) return Promise.reject(st);
    if (options?.epoch !== undefined && options.epoch !== st.info.epoch) {
      return Promise.reject(
        new TransportError(
          'ERR_PEER_GONE',
          `the link of epoch ${options.epoch} to ${peer} is gone (current epoch ${st.info.epoch})`,
          { retryable: true },
        ),
      );
    }
    const size = BATCH_ENVELOPE_BYTES + payload.byteLength;
    if (size > st.link.maxMessageSize) return Promise.reject(tooLarge(size, st));
    st.activity++;
    return st.link.send(lane, BATCH_HEAD, payload);
  }

  request(
    peer: PeerId,
    name: string,
    body: unknown,
    options: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<unknown> {
    const st = this.#target(peer, 0);
    if (st instanceof LanemuxError) return Promise.reject(st);
    return this.#unary.request(st, peer, name, body, options);
  }

  ping(peer: PeerId, options: { timeoutMs?: number; lane?: number } = {}): Promise<number> {
    const lane = options.lane ?? 0;
    const st = this.#target(peer, lane);
    if (st instanceof LanemuxError) return Promise.reject(st);
    return this.#health.ping(st, options.timeoutMs, lane);
  }

  // Links and peers

  async connect(address: string, options: ConnectOptions = {}): Promise<PeerInfo> {
    if (this.#closed) throw new MessengerError('ERR_CLOSED', 'the messenger is closed');
    if (options.timeoutMs !== undefined) {
      const badTimeout = checkTimeout(`connect to ${address}`, options.timeoutMs);
      if (badTimeout !== undefined) throw badTimeout;
    }
    const link = await this.#transport.connect(address, options);
    return link.info;
  }

  peer(id: PeerId): PeerInfo | undefined {
    return this.#peers.get(id)?.info;
  }

  peers(): readonly PeerInfo[] {
    return [...this.#peers.values()].map((s) => s.info);
  }

  disconnect(peer: PeerId, reason: string | Error = 'disconnected by the application'): void {
    const error =
      reason instanceof LanemuxError
        ? reason
        : new MessengerError('ERR_CLOSED', typeof reason === 'string' ? reason : reason.message, { cause: reason });
    this.#peers.get(peer)?.link.close(error);
  }

  lanes(peer: PeerId): number {
    return this.#peers.get(peer)?.link.lanes ?? 0;
  }

  maxMessageSize(peer: PeerId): number {
    const st = this.#peers.get(peer);
    return st === undefined ? 0 : st.link.maxMessageSize - BATCH_ENVELOPE_BYTES;
  }

  bufferedAmount(peer: PeerId, lane: number): number {
    return this.#peers.get(peer)?.link.bufferedAmount(lane) ?? 0;
  }

  pause(peer: PeerId): boolean {
    return this.#peers.get(peer)?.link.pause() ?? false;
  }

  resume(peer: PeerId): void {
    this.#peers.get(peer)?.link.resume();
  }

  onPeer(listener: (peer: PeerInfo) => void): () => void {
    return this.#table.onPeer(listener);
  }

  onPeerGone(listener: (event: PeerGoneEvent) => void): () => void {
    return this.#table.onPeerGone(listener);
  }

  onError(listener: (event: MessengerErrorEvent) => void): () => void {
    return this.#faults.onError(listener);
  }

  onDialEnded(listener: (event: DialEndedEvent) => void): () => void {
    this.#dialEndedListeners.add(listener);
    return () => this.#dialEndedListeners.delete(listener);
  }

  onPeerState(listener: (event: PeerStateEvent) => void): () => void {
    return this.#lifecycle.on(listener);
  }

  peerDraining(peer: PeerId): void {
    this.#lifecycle.draining(peer);
  }

  peerEvents(options: PeerEventsOptions = {}): AsyncIterableIterator<PeerEvent> {
    const max = options.maxQueued ?? DEFAULT_MAX_QUEUED_EVENTS;
    if (!Number.isInteger(max) || max < 1 || max > 1_000_000)
      throw new MessengerError(
        'ERR_INVALID_ARGUMENT',
        `peerEvents: maxQueued must be an integer from 1 to 1000000, got ${String(max)}`,
      );
    return new PeerEventQueue(
      (push, end) => {
        const offEvents = this.#lifecycle.on(push);
        const offClose = this.#lifecycle.whenClosed(end);
        return () => {
          offEvents();
          offClose();
        };
      },
      max,
      options.signal,
    );
  }

  ready(address: string, options?: WaitOptions): Promise<PeerInfo> {
    return ready(this.#readiness, address, options);
  }

  waitForPeer(peer: PeerId, options?: WaitOptions): Promise<PeerId> {
    return waitForPeer(this.#readiness, peer, options);
  }

  /** The transport stopped dialling `address` for good (never while closing). */
  #dialEnded(address: string, error: LanemuxError, worker: string | undefined): void {
    if (this.#closed) return;
    this.#lifecycle.dialEnded(error, worker);
    const event: DialEndedEvent = { address, code: error.code, reason: error.message, error };
    for (const l of [...this.#dialEndedListeners]) {
      try {
        l(event);
      } catch (e) {
        this.#faults.reportError('handler', e, undefined, 'onDialEnded');
      }
    }
  }

  stats(): MessengerStats {
    return this.#faults.stats();
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    this.#lifecycle.closing();
    if (this.#tick !== undefined) this.#rt.clearTimer(this.#tick);
    this.#tick = undefined;
    await this.#transport.close();
    this.#lifecycle.close();
  }
}
