/**
 * The messenger: active messages over the transport port (fire-and-forget and unary, addressed by
 * handler name), ordered dispatch per (sender, lane), the reserved `_stream_batch[.k]` ingress of the
 * mux, and a health check. Runtime-agnostic.
 *
 * Dispatch is synchronous in the transport's read path: one handler call at a time per (sender,
 * lane), in arrival order, which is exactly the reference's ordered per-sender dispatch
 * (protocol.md §1 item 4). Ordered handlers must not await; a handler that throws is counted and
 * reported through `onError`, and the connection carries on.
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
import { z } from 'zod/mini';
import { LanemuxError } from '../errors.ts';
import { TransportError, describeThrown, toError } from '../transport/errors.ts';
import { decodeBounded, encodeShared, minEncodedSize } from '../wire/msgpack.ts';
import { parseOptions } from '../transport/options.ts';
import { int, parse, str } from '../validate.ts';
import {
  DEFAULT_MAX_MESSAGE_SIZE,
  MAX_LANES,
  MAX_MAX_MESSAGE_SIZE,
  MIN_MAX_MESSAGE_SIZE,
  PROTOCOL_VERSION,
  type LinkReceiver,
  type PeerLink,
  type Transport,
  type TransportAdapter,
} from '../transport/port.ts';
import { randomBytes, randomU64, setUnrefTimeout, toHex, unrefTimer, nowMs, type TimerHandle } from '../transport/runtime.ts';
import { createTransport, type RefusalReason } from '../transport/transport.ts';
import { MAX_CREDENTIAL_LENGTH, type Authenticate, type CredentialSource } from '../transport/auth.ts';
import {
  BATCH_ENVELOPE_BYTES,
  BATCH_HANDLER_NAMES,
  BATCH_HEAD,
  Kind,
  decodeName,
  encodeErrorBody,
  encodeName,
  errorBodySchema,
  idHead,
  isReservedName,
  messageHead,
  readU32,
  requestHead,
} from './envelope.ts';
import { MessengerError, RemoteError } from './errors.ts';
import type {
  Admission,
  DialEndedEvent,
  MessageHandler,
  Messenger,
  MessengerErrorEvent,
  MessengerStats,
  PeerGoneEvent,
  PeerId,
  PeerInfo,
  HandleOptions,
  RequestHandler,
  UnsignalledRequestHandler,
} from './types.ts';

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

/** Health-check settings. */
/** A running request handler: its controller (when the handler takes a signal) and whether it was aborted. */
interface Inflight {
  readonly controller: AbortController | null;
  aborted: boolean;
}

/** A registered request handler and whether it takes an AbortSignal of its own. */
interface RegisteredHandler {
  readonly fn: RequestHandler | UnsignalledRequestHandler;
  readonly signal: boolean;
}

function abortInflight(entry: Inflight | undefined, reason: unknown): void {
  if (entry === undefined || entry.aborted) return;
  entry.aborted = true;
  entry.controller?.abort(reason);
}

export interface HealthCheckOptions {
  /** Ping each peer this often. Defaults to 5,000 ms (protocol.md §8 "Peer health check"). */
  readonly intervalMs?: number;
  /** A ping unanswered after this reports the peer gone (`ERR_HEALTH_CHECK_FAILED`). Defaults to 5,000 ms. */
  readonly timeoutMs?: number;
  /** Only check peers for which this returns true (the mux: peers with live work). Defaults to all peers. */
  readonly filter?: (peer: PeerInfo) => boolean;
}

/** Options of {@link createMessenger}. Every limit is finite by default. */
export interface MessengerOptions {
  /** The transports to listen and dial with (at least one). */
  readonly transports: readonly TransportAdapter[];
  /** This node's 64-bit worker id. Defaults to a random one. */
  readonly workerId?: bigint;
  /** This process instance's id. Defaults to 16 random hex digits. */
  readonly instanceId?: string;
  /** Streaming transport keys advertised in the hello (e.g. `messenger-mux-v2`). Defaults to none. */
  readonly transportKeys?: readonly string[];
  /** Lanes offered to peers, 1..16; a link uses min(ours, theirs). Defaults to 1. */
  readonly lanes?: number;
  /** Largest message (envelope included) this node accepts, 256 B..256 MiB. Defaults to 1 MiB. */
  readonly maxMessageSize?: number;
  /** Default timeout of `request`. Defaults to 10,000 ms. */
  readonly requestTimeoutMs?: number;
  /** Default timeout of `connect`. Defaults to 10,000 ms. */
  readonly connectTimeoutMs?: number;
  /** Time allowed for the hello exchange of one link. Defaults to 10,000 ms. */
  readonly helloTimeoutMs?: number;
  /** Health check (`false` disables it). Defaults to every 5 s, 5 s timeout, all peers. */
  readonly healthCheck?: false | HealthCheckOptions;
  /** Most peers (links) at once; more are refused with `ERR_TOO_MANY_PEERS`. Defaults to 1,024. */
  readonly maxPeers?: number;
  /** Most inbound connections in their hello at once. Defaults to 256. */
  readonly maxHandshakes?: number;
  /** Most outstanding `request` calls of this messenger. Defaults to 65,536. */
  readonly maxPendingRequests?: number;
  /** Most request handlers running at once per peer; more are answered `ERR_BUSY`. Defaults to 4,096. */
  readonly maxInflightRequests?: number;
  /** Let reconnecting transports (partysocket) re-establish a link after it dies. Defaults to true. */
  readonly reconnect?: boolean;
  /** Messenger protocol version to speak. Defaults to the build's version; other values exist for tests. */
  readonly protocolVersion?: number;
  /**
   * Authenticates inbound links of transports that have no `authenticate` of their own (see
   * `Authenticate`). Defaults to none: peers are not authenticated (docs/security.md).
   */
  readonly authenticate?: Authenticate;
  /** Credential presented in the HELLO by dials of transports that have no `credential` of their own. */
  readonly credential?: CredentialSource;
  /**
   * A link that carried nothing but health checks for this long is closed (`ERR_IDLE`, retryable);
   * at `maxPeers`, the link idle longest (at least one whole health-check interval) is closed to
   * admit a new peer (`ERR_EVICTED`). 0 disables the idle bound (eviction stays). Defaults to 600,000 ms.
   */
  readonly idleTimeoutMs?: number;
  /**
   * A link with live work the messenger cannot see (streams of the mux) is never idle-closed or
   * evicted: this says which. Requests, handlers and pings in flight count as work anyway.
   * Defaults to none.
   */
  readonly isBusy?: (peer: PeerInfo) => boolean;
  /**
   * Receive window advertised to every peer in the HELLO: the most bytes of mux data this node
   * holds for one peer before it releases some (the node sets it to `mux.peerByteBudget`). Defaults
   * to none advertised.
   */
  readonly receiveWindow?: number;
}

const healthSchema = z.object({
  intervalMs: z._default(int(1, 3_600_000), 5_000),
  timeoutMs: z._default(int(1, 3_600_000), 5_000),
  filter: z.optional(z.custom<(peer: PeerInfo) => boolean>((v) => typeof v === 'function', 'not a function')),
});

const optionsSchema = z.object({
  transports: z.array(z.custom<TransportAdapter>((v) => typeof v === 'object' && v !== null && 'dial' in v && 'listen' in v, 'not a TransportAdapter')).check(z.minLength(1)),
  workerId: z.optional(z.bigint().check(z.gte(0n), z.lte(0xffff_ffff_ffff_ffffn))),
  instanceId: z.optional(str(64, 1)),
  transportKeys: z._default(z.array(str(128, 1)).check(z.maxLength(64)), []),
  lanes: z._default(int(1, MAX_LANES), 1),
  maxMessageSize: z._default(int(MIN_MAX_MESSAGE_SIZE, MAX_MAX_MESSAGE_SIZE), DEFAULT_MAX_MESSAGE_SIZE),
  requestTimeoutMs: z._default(int(1, 3_600_000), 10_000),
  connectTimeoutMs: z._default(int(1, 3_600_000), 10_000),
  helloTimeoutMs: z._default(int(1, 600_000), 10_000),
  healthCheck: z._default(z.union([z.literal(false), healthSchema]), { intervalMs: 5_000, timeoutMs: 5_000 }),
  maxPeers: z._default(int(1, 1_000_000), 1_024),
  maxHandshakes: z._default(int(1, 1_000_000), 256),
  maxPendingRequests: z._default(int(1, 1 << 30), 65_536),
  maxInflightRequests: z._default(int(1, 1 << 30), 4_096),
  reconnect: z._default(z.boolean(), true),
  protocolVersion: z._default(int(0, 0xffff), PROTOCOL_VERSION),
  receiveWindow: z.optional(int(1, 2 ** 42)),
  authenticate: z.optional(z.custom<Authenticate>((v) => typeof v === 'function', 'not a function')),
  credential: z.optional(z.custom<CredentialSource>((v) => typeof v === 'function' || (typeof v === 'string' && v.length <= MAX_CREDENTIAL_LENGTH), `not a function or a string of at most ${MAX_CREDENTIAL_LENGTH} characters`)),
  idleTimeoutMs: z._default(int(0, 86_400_000), 600_000),
  isBusy: z.optional(z.custom<(peer: PeerInfo) => boolean>((v) => typeof v === 'function', 'not a function')),
});

type Resolved = z.output<typeof optionsSchema>;

/**
 * Create a messenger, start its listening transports, and resolve once they listen.
 * Rejects with a `ConfigError` (`ERR_INVALID_CONFIG`) naming every bad option, and with
 * `ERR_ADDRESS_IN_USE` (retryable) when a listener's port is taken.
 */
export async function createMessenger(options: MessengerOptions): Promise<Messenger> {
  const o = parseOptions(optionsSchema, options, 'createMessenger');
  const m = new MessengerImpl(o);
  try {
    await m.start();
  } catch (error) {
    await m.close();
    throw error;
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Per-peer state
// ---------------------------------------------------------------------------------------------

interface PendingRequest {
  readonly name: string;
  resolve(value: unknown): void;
  reject(error: LanemuxError): void;
}

interface PendingPing {
  readonly start: number;
  resolve(rtt: number): void;
  reject(error: LanemuxError): void;
}

/** Everything about one link (one epoch of one peer). */
class PeerState implements LinkReceiver {
  readonly link: PeerLink;
  readonly info: PeerInfo;
  readonly id: PeerId;
  readonly #m: MessengerImpl;
  readonly requests = new Map<number, PendingRequest>();
  readonly pings = new Map<number, PendingPing>();
  /** Request handlers running, by request id (so CANCEL can abort them). */
  readonly inflight = new Map<number, Inflight>();
  /** Names we already sent an unknown-handler notice for (bounded): one notice per name, not per message. */
  readonly noticed = new Set<string>();
  nextId = 1;
  healthPending = false;
  contestPending = false;
  dead = false;
  /** Messages in either direction other than health checks (a counter: no clock per message). */
  activity = 0;
  activityAtTick = 0;
  /** Consecutive idle ticks with no activity. */
  idleTicks = 0;
  /** Messages received, health checks included (a contested link that says anything is alive). */
  received = 0;

  constructor(m: MessengerImpl, link: PeerLink) {
    this.#m = m;
    this.link = link;
    this.info = link.info;
    this.id = link.info.id;
  }

  /** A fresh u32 id not in use by `map` (ids wrap; 0 is skipped so it never means "none"). */
  allocId(map: Map<number, unknown>): number {
    for (;;) {
      const id = this.nextId;
      this.nextId = id === 0xffffffff ? 1 : id + 1;
      if (!map.has(id)) return id;
    }
  }

  message(lane: number, bytes: Uint8Array): void {
    const k = bytes[0];
    this.received++;
    if (k !== Kind.Ping && k !== Kind.Pong) this.activity++;
    this.#m.dispatch(this, lane, bytes);
  }

  gone(error: LanemuxError): void {
    this.#m.linkGone(this, error);
  }
}

// ---------------------------------------------------------------------------------------------

class MessengerImpl implements Messenger {
  readonly self: PeerInfo;
  readonly #o: Resolved;
  readonly #transport: Transport;
  readonly #peers = new Map<PeerId, PeerState>();
  readonly #handlers = new Map<string, MessageHandler>();
  readonly #requestHandlers = new Map<string, RegisteredHandler>();
  readonly #batchHandlers: (MessageHandler | undefined)[] = new Array<MessageHandler | undefined>(MAX_LANES).fill(undefined);
  readonly #peerListeners = new Set<(peer: PeerInfo) => void>();
  readonly #goneListeners = new Set<(event: PeerGoneEvent) => void>();
  readonly #errorListeners = new Set<(event: MessengerErrorEvent) => void>();
  readonly #dialEndedListeners = new Set<(event: DialEndedEvent) => void>();
  readonly #nameHeads = new Map<string, Uint8Array>();
  #pendingRequests = 0;
  #health: TimerHandle | undefined;
  #closed = false;
  #closing: Promise<void> | undefined;
  #warned = false;
  readonly #stats = { handlerErrors: 0, unknownHandler: 0, remoteNotices: 0, lateReplies: 0, malformed: 0, idleClosed: 0 };
  readonly #refused: Record<RefusalReason, number> = { unauthenticated: 0, worker_id_in_use: 0, handshake_evicted: 0, link_evicted: 0, frame_deadline: 0 };
  /** Health-check interval (also the idle tick), ms. */
  readonly #tickMs: number;

  constructor(o: Resolved) {
    this.#o = o;
    this.#tickMs = o.healthCheck === false ? 5_000 : o.healthCheck.intervalMs;
    const workerId = o.workerId ?? randomU64();
    const identity = {
      workerId,
      instanceId: o.instanceId ?? toHex(randomBytes(8)),
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
        established: (link) => this.#established(link),
        ready: (link) => this.#ready(link),
        contested: (link) => this.#contested(link),
        dialEnded: (address, error) => this.#dialEnded(address, error),
        evictable: () => this.#evictable(),
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
        this.#refused[reason]++;
      },
    });
    const id = workerId.toString(16).padStart(16, '0');
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
    this.#health = unrefTimer(
      setInterval(() => {
        this.#idleTick();
        if (h !== false) this.#healthTick(h.timeoutMs, h.filter);
      }, this.#tickMs),
    );
  }

  /** Count ticks without traffic per link; close links idle past `idleTimeoutMs`. */
  #idleTick(): void {
    const limit = this.#o.idleTimeoutMs;
    for (const st of this.#peers.values()) {
      if (st.dead) continue;
      if (st.activity !== st.activityAtTick || this.#busy(st)) {
        st.activityAtTick = st.activity;
        st.idleTicks = 0;
        continue;
      }
      st.idleTicks++;
      if (limit > 0 && st.idleTicks * this.#tickMs >= limit) {
        this.#stats.idleClosed++;
        st.link.close(new TransportError('ERR_IDLE', `link to ${st.id} carried nothing for ${limit} ms`, { retryable: true }));
      }
    }
  }

  /**
   * The link idle longest (at least one whole health-check interval without traffic), for an
   * eviction at `maxPeers`; among equals the oldest (peers iterate in link order).
   */
  #evictable(): PeerLink | undefined {
    let best: PeerState | undefined;
    for (const st of this.#peers.values()) {
      if (st.dead || st.idleTicks < 1 || this.#busy(st)) continue;
      if (best === undefined || st.idleTicks > best.idleTicks) best = st;
    }
    return best?.link;
  }

  /** Work in flight on the link, or live streams the node reports (`isBusy`). */
  #busy(st: PeerState): boolean {
    if (st.requests.size > 0 || st.inflight.size > 0) return true;
    try {
      return this.#o.isBusy?.(st.info) === true;
    } catch {
      return true;
    }
  }

  /**
   * Another connection claimed this link's worker id: check it now, with the ordinary health-check
   * deadline (a slow but healthy peer must not lose its link to a claimant), and close it only if
   * nothing at all arrived from it meanwhile.
   */
  #contested(link: PeerLink): void {
    const st = this.#peers.get(link.info.id);
    if (st === undefined || st.link !== link || st.dead || st.contestPending) return;
    st.contestPending = true;
    const timeoutMs = this.#o.healthCheck === false ? CONTEST_TIMEOUT_MS : this.#o.healthCheck.timeoutMs;
    const before = st.received;
    this.#ping(st, timeoutMs).then(
      () => {
        st.contestPending = false;
      },
      (error: LanemuxError) => {
        st.contestPending = false;
        if (st.dead || st.received !== before) return;
        st.link.close(new MessengerError('ERR_HEALTH_CHECK_FAILED', `link to ${st.id} did not answer a check after another connection claimed its worker id: ${error.message}`, { retryable: true, cause: error }));
      },
    );
  }

  get addresses(): readonly string[] {
    return this.#transport.addresses;
  }

  // -------------------------------------------------------------------------------------------
  // Registration
  // -------------------------------------------------------------------------------------------

  on(name: string, handler: MessageHandler): void {
    this.#checkName(name);
    if (this.#requestHandlers.has(name) || this.#handlers.has(name)) {
      throw new MessengerError('ERR_INVALID_HANDLER', `a handler named "${name}" is already registered`);
    }
    this.#handlers.set(name, handler);
  }

  registerBatchHandler(lane: number, handler: MessageHandler): void {
    if (!Number.isInteger(lane) || lane < 0 || lane >= MAX_LANES) {
      throw new MessengerError('ERR_INVALID_ARGUMENT', `batch lane ${lane} is outside 0..${MAX_LANES - 1}`);
    }
    this.#batchHandlers[lane] = handler;
  }

  handle(name: string, handler: RequestHandler, options?: { readonly signal?: true }): void;
  handle(name: string, handler: UnsignalledRequestHandler, options: { readonly signal: false }): void;
  handle(name: string, handler: RequestHandler | UnsignalledRequestHandler, options: HandleOptions = {}): void {
    this.#checkName(name);
    if (this.#requestHandlers.has(name) || this.#handlers.has(name)) {
      throw new MessengerError('ERR_INVALID_HANDLER', `a handler named "${name}" is already registered`);
    }
    this.#requestHandlers.set(name, { fn: handler, signal: options.signal ?? true });
  }

  #checkName(name: string): void {
    if (isReservedName(name)) {
      throw new MessengerError('ERR_INVALID_HANDLER', `"${name}" is reserved for the mux; use registerBatchHandler`);
    }
    if (typeof name !== 'string' || encodeName(name) === undefined) {
      throw new MessengerError('ERR_INVALID_HANDLER', `handler names are 1..255 bytes of UTF-8, got ${JSON.stringify(name)}`);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Sending
  // -------------------------------------------------------------------------------------------

  #target(peer: PeerId, lane: number): PeerState | LanemuxError {
    if (this.#closed) return new MessengerError('ERR_CLOSED', 'the messenger is closed');
    const st = this.#peers.get(peer);
    if (st === undefined) return new TransportError('ERR_UNKNOWN_PEER', `no connected peer ${peer}`, { retryable: true });
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
      if (bytes === undefined) return Promise.reject(new MessengerError('ERR_INVALID_HANDLER', `cannot send to handler name ${JSON.stringify(name)}`));
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
      return Promise.reject(new TransportError('ERR_PEER_GONE', `the link of epoch ${options.epoch} to ${peer} is gone (current epoch ${st.info.epoch})`, { retryable: true }));
    }
    const size = BATCH_ENVELOPE_BYTES + payload.byteLength;
    if (size > st.link.maxMessageSize) return Promise.reject(tooLarge(size, st));
    st.activity++;
    return st.link.send(lane, BATCH_HEAD, payload);
  }

  request(peer: PeerId, name: string, body: unknown, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<unknown> {
    const st = this.#target(peer, 0);
    if (st instanceof LanemuxError) return Promise.reject(st);
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(new MessengerError('ERR_ABORTED', `request "${name}" to ${peer} aborted before it was sent`, { cause: signal.reason }));
    const nameBytes = isReservedName(name) ? undefined : encodeName(name);
    if (nameBytes === undefined) return Promise.reject(new MessengerError('ERR_INVALID_HANDLER', `cannot send a request to handler name ${JSON.stringify(name)}`));
    const timeoutMs = options.timeoutMs ?? this.#o.requestTimeoutMs;
    const badTimeout = checkTimeout(`request "${name}"`, timeoutMs);
    if (badTimeout !== undefined) return Promise.reject(badTimeout);
    if (this.#pendingRequests >= this.#o.maxPendingRequests) {
      return Promise.reject(new MessengerError('ERR_BUSY', `${this.#pendingRequests} requests are already pending (maxPendingRequests)`, { retryable: true }));
    }
    // Refuse a body that cannot fit before the encoder grows a buffer for it (6 = kind, id, name length).
    const least = 6 + nameBytes.byteLength + minEncodedSize(body);
    if (least > st.link.maxMessageSize) return Promise.reject(tooLarge(least, st));
    let encoded: Uint8Array;
    try {
      encoded = encodeShared(body);
    } catch (cause) {
      return Promise.reject(new MessengerError('ERR_INVALID_ARGUMENT', `request body for "${name}" cannot be encoded as MessagePack: ${describeThrown(cause)}`, { cause }));
    }
    const id = st.allocId(st.requests);
    const head = requestHead(id, nameBytes);
    const size = head.byteLength + encoded.byteLength;
    if (size > st.link.maxMessageSize) return Promise.reject(tooLarge(size, st));
    // Copies `encoded` (a view of the shared encoder buffer) before anything else is encoded.
    st.activity++;
    const admission = st.link.send(0, head, encoded);

    return new Promise<unknown>((resolve, reject) => {
      this.#pendingRequests++;
      let timer: TimerHandle | undefined;
      const settle = (): boolean => {
        if (st.requests.get(id) !== pending) return false;
        st.requests.delete(id);
        this.#pendingRequests--;
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const giveUp = (error: LanemuxError): void => {
        if (!settle()) return;
        // Tell the peer so its handler's AbortSignal fires; best effort.
        if (!st.dead) swallow(st.link.send(0, idHead(Kind.Cancel, id)));
        reject(error);
      };
      const onAbort = (): void => giveUp(new MessengerError('ERR_ABORTED', `request "${name}" to ${peer} aborted`, { cause: signal?.reason }));
      const pending: PendingRequest = {
        name,
        resolve: (value) => {
          if (settle()) resolve(value);
        },
        reject: (error) => {
          if (settle()) reject(error);
        },
      };
      st.requests.set(id, pending);
      timer = setUnrefTimeout(
        () => giveUp(new MessengerError('ERR_TIMEOUT', `request "${name}" to ${peer} got no reply within ${timeoutMs} ms`, { retryable: true })),
        timeoutMs,
      );
      signal?.addEventListener('abort', onAbort, { once: true });
      if (admission !== true) admission.catch((error: LanemuxError) => pending.reject(error));
    });
  }

  ping(peer: PeerId, options: { timeoutMs?: number } = {}): Promise<number> {
    const st = this.#target(peer, 0);
    if (st instanceof LanemuxError) return Promise.reject(st);
    const timeoutMs = options.timeoutMs ?? (this.#o.healthCheck === false ? 5_000 : this.#o.healthCheck.timeoutMs);
    const badTimeout = checkTimeout('ping', timeoutMs);
    if (badTimeout !== undefined) return Promise.reject(badTimeout);
    return this.#ping(st, timeoutMs);
  }

  #ping(st: PeerState, timeoutMs: number): Promise<number> {
    const id = st.allocId(st.pings);
    const admission = st.link.send(0, idHead(Kind.Ping, id));
    return new Promise<number>((resolve, reject) => {
      const timer = setUnrefTimeout(() => {
        if (st.pings.delete(id)) reject(new MessengerError('ERR_TIMEOUT', `ping to ${st.id} unanswered after ${timeoutMs} ms`, { retryable: true }));
      }, timeoutMs);
      st.pings.set(id, {
        start: nowMs(),
        resolve: (rtt) => {
          clearTimeout(timer);
          resolve(rtt);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      if (admission !== true) {
        admission.catch((error: LanemuxError) => {
          const p = st.pings.get(id);
          if (p !== undefined) {
            st.pings.delete(id);
            p.reject(error);
          }
        });
      }
    });
  }

  #healthTick(timeoutMs: number, filter: ((peer: PeerInfo) => boolean) | undefined): void {
    for (const st of this.#peers.values()) {
      if (st.healthPending || st.dead) continue;
      if (filter !== undefined) {
        let wanted = false;
        try {
          wanted = filter(st.info);
        } catch (error) {
          this.#reportError('handler', error, st.id, 'healthCheck.filter');
        }
        if (!wanted) continue;
      }
      st.healthPending = true;
      this.#ping(st, timeoutMs).then(
        () => {
          st.healthPending = false;
        },
        (error: LanemuxError) => {
          st.healthPending = false;
          if (st.dead) return;
          st.link.close(new MessengerError('ERR_HEALTH_CHECK_FAILED', `health check of ${st.id} failed: ${error.message}`, { retryable: true, cause: error }));
        },
      );
    }
  }

  // -------------------------------------------------------------------------------------------
  // Receiving
  // -------------------------------------------------------------------------------------------

  /** One message from `st` on `lane`. Synchronous: this is the ordered dispatch. */
  dispatch(st: PeerState, lane: number, bytes: Uint8Array): void {
    switch (bytes[0]) {
      case Kind.Batch: {
        const handler = this.#batchHandlers[lane];
        if (handler === undefined) {
          this.#unknown(st, BATCH_HANDLER_NAMES[lane] as string);
          return;
        }
        this.#call(handler, st, lane, bytes.subarray(BATCH_ENVELOPE_BYTES), BATCH_HANDLER_NAMES[lane] as string);
        return;
      }
      case Kind.Message: {
        const n = bytes[1] ?? 0;
        const name = n === 0 || bytes.byteLength < 2 + n ? undefined : decodeName(bytes, 2, 2 + n);
        if (name === undefined) return this.#malformed(st, lane, 'MESSAGE with a bad handler name');
        const handler = this.#handlers.get(name);
        if (handler === undefined) {
          this.#unknown(st, name);
          return;
        }
        this.#call(handler, st, lane, bytes.subarray(2 + n), name);
        return;
      }
      case Kind.Request:
        return this.#onRequest(st, lane, bytes);
      case Kind.Response:
      case Kind.ErrorResponse:
        return this.#onReply(st, lane, bytes);
      case Kind.Cancel: {
        if (bytes.byteLength !== 5) return this.#malformed(st, lane, 'CANCEL of the wrong length');
        abortInflight(st.inflight.get(readU32(bytes, 1)), new MessengerError('ERR_ABORTED', 'the caller cancelled the request'));
        return;
      }
      case Kind.Ping: {
        if (bytes.byteLength !== 5) return this.#malformed(st, lane, 'PING of the wrong length');
        const pong = bytes.slice();
        pong[0] = Kind.Pong;
        swallow(st.link.send(lane, pong));
        return;
      }
      case Kind.Pong: {
        if (bytes.byteLength !== 5) return this.#malformed(st, lane, 'PONG of the wrong length');
        const id = readU32(bytes, 1);
        const p = st.pings.get(id);
        if (p === undefined) return;
        st.pings.delete(id);
        p.resolve(nowMs() - p.start);
        return;
      }
      case Kind.Notice: {
        const body = decodeErrorBody(bytes.subarray(1));
        if (body === undefined) return this.#malformed(st, lane, 'NOTICE with an invalid body');
        this.#stats.remoteNotices++;
        this.#emitError({
          source: 'remote',
          peer: st.id,
          handler: body.handler,
          error: new RemoteError(st.id, body.code, `peer ${st.id} reports: ${body.message}`, { retryable: body.retryable ?? false }),
        });
        return;
      }
      default:
        return this.#malformed(st, lane, `unknown message kind 0x${(bytes[0] ?? 0).toString(16).padStart(2, '0')}`);
    }
  }

  #call(handler: MessageHandler, st: PeerState, lane: number, payload: Uint8Array, name: string): void {
    try {
      handler(st.id, lane, payload);
    } catch (error) {
      this.#reportError('handler', error, st.id, name);
    }
  }

  #onRequest(st: PeerState, lane: number, bytes: Uint8Array): void {
    if (bytes.byteLength < 7) return this.#malformed(st, lane, 'REQUEST too short');
    const id = readU32(bytes, 1);
    const n = bytes[5] as number;
    const name = n === 0 || bytes.byteLength < 6 + n ? undefined : decodeName(bytes, 6, 6 + n);
    if (name === undefined) return this.#malformed(st, lane, 'REQUEST with a bad handler name');
    const handler = this.#requestHandlers.get(name);
    if (handler === undefined) {
      this.#stats.unknownHandler++;
      this.#replyError(st, lane, id, 'ERR_UNKNOWN_HANDLER', `no request handler named "${name}" on worker ${this.self.id}`, false);
      return;
    }
    if (st.inflight.has(id)) {
      return this.#malformed(st, lane, `REQUEST id ${id} reused while its handler still runs`);
    }
    if (st.inflight.size >= this.#o.maxInflightRequests) {
      this.#replyError(st, lane, id, 'ERR_BUSY', `worker ${this.self.id} already runs ${st.inflight.size} requests from you`, true);
      return;
    }
    let body: unknown;
    try {
      body = decodeBounded(bytes.subarray(6 + n));
    } catch (cause) {
      this.#replyError(st, lane, id, 'ERR_MALFORMED_ENVELOPE', `request body for "${name}" is not valid MessagePack: ${describeThrown(cause)}`, false);
      return;
    }
    // A handler registered with `signal: false` is called without one: no AbortController per
    // request (the node's attach handlers); a cancel still stops the reply.
    const controller = handler.signal ? new AbortController() : null;
    const entry: Inflight = { controller, aborted: false };
    st.inflight.set(id, entry);
    let result: unknown;
    try {
      result = controller === null ? (handler.fn as UnsignalledRequestHandler)(st.id, body) : handler.fn(st.id, body, controller.signal);
    } catch (error) {
      st.inflight.delete(id);
      this.#replyThrown(st, lane, id, name, error);
      return;
    }
    if (isThenable(result)) {
      result.then(
        (value) => {
          if (st.inflight.get(id) !== entry) return;
          st.inflight.delete(id);
          if (!entry.aborted) this.#replyValue(st, lane, id, name, value);
        },
        (error: unknown) => {
          if (st.inflight.get(id) !== entry) return;
          st.inflight.delete(id);
          if (!entry.aborted) this.#replyThrown(st, lane, id, name, error);
        },
      );
    } else {
      st.inflight.delete(id);
      this.#replyValue(st, lane, id, name, result);
    }
  }

  #replyValue(st: PeerState, lane: number, id: number, name: string, value: unknown): void {
    if (st.dead) return;
    const least = 5 + minEncodedSize(value);
    if (least > st.link.maxMessageSize) {
      this.#replyError(st, lane, id, 'ERR_FRAME_TOO_LARGE', `the result of "${name}" is at least ${least} bytes, over the ${st.link.maxMessageSize}-byte limit`, false);
      return;
    }
    let encoded: Uint8Array;
    try {
      encoded = encodeShared(value);
    } catch (cause) {
      this.#replyError(st, lane, id, 'ERR_HANDLER_FAILED', `the result of "${name}" cannot be encoded as MessagePack: ${describeThrown(cause)}`, false);
      return;
    }
    const size = 5 + encoded.byteLength;
    if (size > st.link.maxMessageSize) {
      this.#replyError(st, lane, id, 'ERR_FRAME_TOO_LARGE', `the result of "${name}" is ${size} bytes, over the ${st.link.maxMessageSize}-byte limit`, false);
      return;
    }
    swallow(st.link.send(lane, idHead(Kind.Response, id), encoded));
  }

  #replyThrown(st: PeerState, lane: number, id: number, name: string, error: unknown): void {
    if (isLanemuxErrorSafe(error)) {
      this.#replyError(st, lane, id, error.code, error.message, error.retryable);
      return;
    }
    // Not a LanemuxError: a bug in the handler. Report it here too; send only the message.
    this.#reportError('handler', error, st.id, name);
    const message = describeThrown(error);
    this.#replyError(st, lane, id, 'ERR_HANDLER_FAILED', `handler "${name}" failed: ${message}`, false);
  }

  #replyError(st: PeerState, lane: number, id: number, code: string, message: string, retryable: boolean): void {
    if (st.dead) return;
    swallow(st.link.send(lane, idHead(Kind.ErrorResponse, id), encodeErrorBody({ code: code.slice(0, 64), message: message.slice(0, 4096), retryable })));
  }

  #onReply(st: PeerState, lane: number, bytes: Uint8Array): void {
    if (bytes.byteLength < 6) return this.#malformed(st, lane, 'reply too short');
    const id = readU32(bytes, 1);
    const pending = st.requests.get(id);
    if (pending === undefined) {
      this.#stats.lateReplies++;
      return;
    }
    if (bytes[0] === Kind.Response) {
      let value: unknown;
      try {
        value = decodeBounded(bytes.subarray(5));
      } catch (cause) {
        pending.reject(new TransportError('ERR_MALFORMED_ENVELOPE', `reply to "${pending.name}" from ${st.id} is not valid MessagePack`, { cause }));
        return;
      }
      pending.resolve(value);
      return;
    }
    const body = decodeErrorBody(bytes.subarray(5));
    if (body === undefined) {
      pending.reject(new TransportError('ERR_MALFORMED_ENVELOPE', `error reply to "${pending.name}" from ${st.id} is malformed`));
      return;
    }
    pending.reject(new RemoteError(st.id, body.code, `${pending.name} on ${st.id}: ${body.message}`, { retryable: body.retryable ?? false }));
  }

  /** A message for a handler nobody registered: tell the sender once per name (bounded). */
  #unknown(st: PeerState, name: string): void {
    this.#stats.unknownHandler++;
    if (st.noticed.has(name) || st.noticed.size >= 64) return;
    st.noticed.add(name);
    const body = encodeErrorBody({ code: 'ERR_UNKNOWN_HANDLER', message: `no handler named "${name}" on worker ${this.self.id}; such messages are dropped`, handler: name });
    const notice = new Uint8Array(1 + body.byteLength);
    notice[0] = Kind.Notice;
    notice.set(body, 1);
    swallow(st.link.send(0, notice));
  }

  /** The peer broke the envelope: GOAWAY with the reason and close the link. */
  #malformed(st: PeerState, lane: number, what: string): void {
    this.#stats.malformed++;
    st.link.close(new TransportError('ERR_MALFORMED_ENVELOPE', `malformed envelope on lane ${lane} from ${st.id}: ${what}`));
  }

  // -------------------------------------------------------------------------------------------
  // Links and peers
  // -------------------------------------------------------------------------------------------

  #established(link: PeerLink): LinkReceiver {
    const st = new PeerState(this, link);
    this.#peers.set(st.id, st);
    return st;
  }

  #ready(link: PeerLink): void {
    for (const l of [...this.#peerListeners]) {
      try {
        l(link.info);
      } catch (error) {
        this.#reportError('handler', error, link.info.id, 'onPeer');
      }
    }
  }

  linkGone(st: PeerState, error: LanemuxError): void {
    if (st.dead) return;
    st.dead = true;
    if (this.#peers.get(st.id) === st) this.#peers.delete(st.id);
    const fail = error.code === 'ERR_CLOSED' ? error : new TransportError('ERR_PEER_GONE', `peer ${st.id} is gone: ${error.message}`, { retryable: true, cause: error });
    for (const p of [...st.requests.values()]) p.reject(fail);
    for (const p of [...st.pings.values()]) p.reject(fail);
    st.pings.clear();
    for (const c of st.inflight.values()) abortInflight(c, fail);
    st.inflight.clear();
    const event: PeerGoneEvent = { peer: st.id, code: error.code, reason: error.message, epoch: st.info.epoch, error };
    for (const l of [...this.#goneListeners]) {
      try {
        l(event);
      } catch (e) {
        this.#reportError('handler', e, st.id, 'onPeerGone');
      }
    }
  }

  async connect(address: string, options: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<PeerInfo> {
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
      reason instanceof LanemuxError ? reason : new MessengerError('ERR_CLOSED', typeof reason === 'string' ? reason : reason.message, { cause: reason });
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
    this.#peerListeners.add(listener);
    return () => this.#peerListeners.delete(listener);
  }

  onPeerGone(listener: (event: PeerGoneEvent) => void): () => void {
    this.#goneListeners.add(listener);
    return () => this.#goneListeners.delete(listener);
  }

  onError(listener: (event: MessengerErrorEvent) => void): () => void {
    this.#errorListeners.add(listener);
    return () => this.#errorListeners.delete(listener);
  }

  onDialEnded(listener: (event: DialEndedEvent) => void): () => void {
    this.#dialEndedListeners.add(listener);
    return () => this.#dialEndedListeners.delete(listener);
  }

  /** The transport stopped dialling `address` for good (never while closing). */
  #dialEnded(address: string, error: LanemuxError): void {
    if (this.#closed) return;
    const event: DialEndedEvent = { address, code: error.code, reason: error.message, error };
    for (const l of [...this.#dialEndedListeners]) {
      try {
        l(event);
      } catch (e) {
        this.#reportError('handler', e, undefined, 'onDialEnded');
      }
    }
  }

  stats(): MessengerStats {
    return { ...this.#stats, refused: { ...this.#refused } };
  }

  #reportError(source: 'handler', error: unknown, peer: PeerId | undefined, handler: string): void {
    this.#stats.handlerErrors++;
    this.#emitError({ source, peer, handler, error: toError(error) });
  }

  #emitError(event: MessengerErrorEvent): void {
    if (this.#errorListeners.size === 0) {
      // Nobody listens: say it once so a broken handler is not silent, then only count.
      if (!this.#warned) {
        this.#warned = true;
        console.warn(`lanemux messenger: ${event.source} error${event.handler ? ` in "${event.handler}"` : ''}: ${describeThrown(event.error)} (further errors are only counted; use onError)`);
      }
      return;
    }
    for (const l of [...this.#errorListeners]) {
      try {
        l(event);
      } catch {
        // A failing error listener has nowhere left to report to.
      }
    }
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    if (this.#health !== undefined) clearInterval(this.#health);
    await this.#transport.close();
  }
}

/** Largest delay a timer takes: above it Node fires after 1 ms (and browsers at once). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;
/** Deadline of the check a contested link gets when health checks are off (else their own deadline). */
const CONTEST_TIMEOUT_MS = 5_000;

/** A per-call `timeoutMs` must be a number in 1..2^31-1 ms; the error to reject with, if not. */
function checkTimeout(what: string, timeoutMs: unknown): LanemuxError | undefined {
  if (typeof timeoutMs === 'number' && timeoutMs >= 1 && timeoutMs <= MAX_TIMEOUT_MS) return undefined;
  return new MessengerError('ERR_INVALID_ARGUMENT', `${what}: timeoutMs must be a number from 1 to ${MAX_TIMEOUT_MS} (ms), got ${describeThrown(timeoutMs)}`);
}

function tooLarge(size: number, st: PeerState): LanemuxError {
  return new TransportError(
    'ERR_FRAME_TOO_LARGE',
    `message of ${size} bytes (envelope included) exceeds the ${st.link.maxMessageSize}-byte limit toward ${st.id}`,
  );
}

function decodeErrorBody(bytes: Uint8Array): z.output<typeof errorBodySchema> | undefined {
  try {
    const r = parse(errorBodySchema, decodeBounded(bytes));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/** `instanceof LanemuxError` that cannot throw (a thrown proxy may trap `getPrototypeOf`). */
function isLanemuxErrorSafe(v: unknown): v is LanemuxError {
  try {
    return v instanceof LanemuxError;
  } catch {
    return false;
  }
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  if (typeof v !== 'object' || v === null) return false;
  try {
    return typeof (v as { then?: unknown }).then === 'function';
  } catch {
    // A result whose `then` getter throws is not awaited; encoding it then fails and is reported.
    return false;
  }
}

function swallow(admission: Admission): void {
  if (admission !== true) admission.catch(() => {});
}
