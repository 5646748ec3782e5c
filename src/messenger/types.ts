/**
 * The messenger contract the mux and the stream layer depend on.
 *
 * The messenger is a small active-message layer over a transport port: fire-and-forget and
 * unary messages addressed by handler name, delivered in order per (sender, lane).
 * This file is the contract only; `messenger.ts` implements it.
 *
 * @packageDocumentation
 */

import type { ConnectOptions, PeerIdentity } from '../transport/port.ts';

export type { ConnectOptions } from '../transport/port.ts';
export type { ReconnectOption, ReconnectOptions } from '../transport/reconnect.ts';

/** A peer's key: its 64-bit worker id as 16 lower-case hex digits (cheap as a Map key). */
export type PeerId = string;

/**
 * What a peer told us about itself in the hello exchange: the transport's `PeerIdentity` (id, worker
 * id, instance id, lanes, max message size, stream transport keys, protocol version, address, link
 * epoch). The messenger's `self` carries epoch 0.
 */
export type PeerInfo = PeerIdentity;

/**
 * Result of a send: `true` when the transport admitted the message synchronously, otherwise a
 * promise that resolves when it is admitted and rejects (with a LanemuxError) if it is refused.
 * Admission means the transport took the bytes; the caller may then reuse its buffer.
 */
export type Admission = true | Promise<void>;

/** A fire-and-forget handler. Ordered handlers must not await: they run one at a time per (sender, lane). */
export type MessageHandler = (from: PeerId, lane: number, payload: Uint8Array) => void;

/** Options of {@link Messenger.handle}. */
export interface HandleOptions {
  /**
   * Give the handler an AbortSignal that aborts when the caller cancels or goes away. Default true.
   * With `false` the handler is called with `(from, body)` only and no `AbortController` is made
   * per request (a cancelled or orphaned request still sends no reply).
   */
  readonly signal?: boolean;
}

/** A unary request handler registered with `{ signal: false }`: called without a signal. */
export type UnsignalledRequestHandler = (from: PeerId, body: unknown) => unknown | Promise<unknown>;

/** A unary request handler: its result (or thrown LanemuxError) is sent back to the caller. */
export type RequestHandler = (from: PeerId, body: unknown, signal: AbortSignal) => unknown | Promise<unknown>;

/** Why a peer went away. */
export interface PeerGoneEvent {
  readonly peer: PeerId;
  /**
   * A LanemuxError code: `ERR_PEER_GONE` (connection lost or peer shut down), `ERR_HEALTH_CHECK_FAILED`,
   * `ERR_MALFORMED_ENVELOPE`, `ERR_FRAME_TOO_LARGE`, `ERR_PROTOCOL`, `ERR_CLOSED` (we closed), …
   */
  readonly code: string;
  readonly reason: string;
  /** Epoch of the link that is gone (see {@link PeerInfo.epoch}); a newer link may already exist. */
  readonly epoch: number;
  /** The full error (code, message, retryable, cause). */
  readonly error: Error;
}

/**
 * lanemux stopped dialling an address for good: nothing dials it again until the next `connect`.
 * Emitted once per dial when the first attempt failed (refused, unreachable, a HELLO refused), when a
 * reconnecting dial gave up (`maxRetries`, `maxDownMs`, `maxSameFailures`, a terminal close code),
 * when the link was lost on a dial that does not reconnect (TCP, memory without `reconnect`; and
 * `disconnect`, with `ERR_CLOSED`, on any dial), or when the loss was terminal
 * (`ERR_UNAUTHENTICATED`, `ERR_VERSION_MISMATCH`, …).
 * Not emitted when the node or messenger closes, nor for a crossed dial that ended because the
 * peer's own link to this node was kept.
 */
export interface DialEndedEvent {
  /** The address that was dialled (as given to `connect`). */
  readonly address: string;
  /** The final error's code, e.g. `ERR_CONNECT`, `ERR_PEER_GONE`, `ERR_UNAUTHENTICATED`. */
  readonly code: string;
  /** The final error's message. */
  readonly reason: string;
  /** The full error (code, message, retryable, cause). */
  readonly error: Error;
}

/**
 * The life of one peer instance (one worker id and instance id), in order: `up` once; then any
 * number of `down` → `reconnecting`* → `resumed`; `gone` at most once, last. A worker that comes
 * back as another process instance is `gone` (old instance) then `up` (new one).
 * - `up`: a first link to this instance formed.
 * - `down`: its link was lost (`error` says why); it may come back.
 * - `reconnecting`: a dial to it is trying again (`attempt`, `delayMs` for lanemux's own re-dial).
 * - `resumed`: a new link to the same worker and instance formed (new epoch).
 * - `draining`: the peer said it is draining (docs/protocol.md §8.4): open no new streams there; its
 *   live streams go on. Between `up` or `resumed` and the next `down` or `gone`, once per link.
 * - `gone`: it will not be back: the re-dial gave up, nothing brought it back within
 *   `downTimeoutMs`, it closed the link on purpose (its GOAWAY says `ERR_CLOSED`) or this node
 *   did (`disconnect`, `close`), another instance of the worker linked, or the address this node
 *   re-dialled it at now answers as another worker (`replacedBy`: a server restarted with a new id).
 */
export type PeerStateType = 'up' | 'down' | 'reconnecting' | 'resumed' | 'draining' | 'gone';

/** One step in a peer's life (see {@link PeerStateType} for the order). */
export interface PeerStateEvent {
  readonly type: PeerStateType;
  /** The peer's key (worker id, hex). */
  readonly peer: PeerId;
  readonly workerId: bigint;
  /** The peer's process instance: the same for every event until `gone`. */
  readonly instanceId: string;
  /** The address this node dialled it at, else the address it advertises; undefined if neither. */
  readonly address: string | undefined;
  /** Epoch of the link that formed (`up`, `resumed`) or was lost (the others). */
  readonly epoch: number;
  /** `down`, `gone`: why; `reconnecting`: why the link or the last attempt failed. Else undefined. */
  readonly error: Error | undefined;
  /** `reconnecting` by lanemux's own re-dial: the attempt number since the link was lost, from 1. */
  readonly attempt: number | undefined;
  /** `reconnecting` by lanemux's own re-dial: ms until that attempt. */
  readonly delayMs: number | undefined;
  /**
   * `gone` only: the worker that now answers at the address this peer was dialled at (the server there
   * restarted as another worker, or a load balancer sent the re-dial elsewhere). Else undefined.
   */
  readonly replacedBy?: PeerId | undefined;
}

/** In {@link Messenger.peerEvents}: this many events were dropped (oldest first) because the reader fell behind. */
export interface PeerEventsOverflow {
  readonly type: 'overflow';
  readonly dropped: number;
}

/** What {@link Messenger.peerEvents} yields. */
export type PeerEvent = PeerStateEvent | PeerEventsOverflow;

/** Options of {@link Messenger.peerEvents}. */
export interface PeerEventsOptions {
  /** Ends the iteration (it returns `done`). */
  readonly signal?: AbortSignal | undefined;
  /**
   * Events kept for a reader that falls behind, 1..1,000,000; beyond it the oldest are dropped and
   * the next read is a {@link PeerEventsOverflow} saying how many. Defaults to 1,024.
   */
  readonly maxQueued?: number | undefined;
}

/** Options of {@link Messenger.ready} and {@link Messenger.waitForPeer}. */
export interface WaitOptions {
  /** Aborts the wait (`ERR_ABORTED`). */
  readonly signal?: AbortSignal | undefined;
  /** Longest wait, 1..2^31-1 ms. Defaults: `connectTimeoutMs` (10,000) for `ready`, 10,000 for `waitForPeer`. */
  readonly timeoutMs?: number | undefined;
}

/** Something went wrong that has no caller to reject: a handler threw, or the peer sent a notice. */
export interface MessengerErrorEvent {
  /** `handler`: a local handler or listener threw; `remote`: the peer reported an error about our message. */
  readonly source: 'handler' | 'remote';
  readonly peer?: PeerId | undefined;
  /** The handler name involved, if any. */
  readonly handler?: string | undefined;
  readonly error: Error;
}

/** Counters of things that have no caller to report to (see {@link Messenger.stats}). */
export interface MessengerStats {
  /** Handlers (ordered or unary) and listeners that threw. */
  readonly handlerErrors: number;
  /** Messages for a handler nobody registered (received). */
  readonly unknownHandler: number;
  /** Notices received from peers about our messages. */
  readonly remoteNotices: number;
  /** Replies for requests that were no longer pending (timed out or aborted). */
  readonly lateReplies: number;
  /** Links closed because the peer broke the envelope. */
  readonly malformed: number;
  /** Links closed for carrying nothing past `idleTimeoutMs`. */
  readonly idleClosed: number;
  /**
   * Connections refused or evicted, by reason: `unauthenticated`, `worker_id_in_use` (a HELLO
   * claimed a live link's worker id without proof), `handshake_evicted`, `link_evicted`,
   * `frame_deadline`.
   */
  readonly refused: Readonly<
    Record<'unauthenticated' | 'worker_id_in_use' | 'handshake_evicted' | 'link_evicted' | 'frame_deadline', number>
  >;
}

/** The messenger as the mux and stream layers see it. */
export interface Messenger {
  /** This node's worker id (hex) and full identity. */
  readonly self: PeerInfo;
  /** Addresses this messenger listens on (one per listening transport). */
  readonly addresses: readonly string[];

  /** Register a fire-and-forget handler. `_stream_batch[.k]` names are reserved for `registerBatchHandler`. */
  on(name: string, handler: MessageHandler): void;
  /** Register the mux's ingress for one lane (`_stream_batch` for 0, `_stream_batch.k` otherwise). */
  registerBatchHandler(lane: number, handler: MessageHandler): void;
  /**
   * Register a unary request handler; `body` is MessagePack-decoded, validate it with zod. With
   * `{ signal: false }` the handler gets no signal and no `AbortController` is made per request
   * (a cancelled or orphaned request still sends no reply).
   */
  handle(name: string, handler: RequestHandler, options?: { readonly signal?: true }): void;
  handle(name: string, handler: UnsignalledRequestHandler, options: { readonly signal: false }): void;

  /** Send a fire-and-forget message on a lane. Never throws: refusals reject the returned promise. */
  send(peer: PeerId, lane: number, name: string, payload: Uint8Array): Admission;
  /**
   * Send a batch on the lane's reserved handler name. Same admission contract as `send`. With
   * `epoch`, the batch is refused (`ERR_PEER_GONE`) unless the peer's current link has that epoch, so
   * a batch encoded for a dead connection never reaches its successor.
   */
  sendBatch(peer: PeerId, lane: number, payload: Uint8Array, options?: { epoch?: number }): Admission;
  /** Unary request/response (MessagePack body), with a timeout (default 10 s) and an AbortSignal. */
  request(
    peer: PeerId,
    name: string,
    body: unknown,
    options?: { timeoutMs?: number; signal?: AbortSignal },
  ): Promise<unknown>;

  /**
   * Dial an address; resolves with the peer once the hello exchange completed, rejects within the
   * timeout (default 10 s) in every case. `reconnect` keeps the link up (see {@link ConnectOptions}).
   */
  connect(address: string, options?: ConnectOptions): Promise<PeerInfo>;
  /** Every connected peer. */
  peers(): readonly PeerInfo[];
  /**
   * Close the link to one peer. It is reported gone with `ERR_CLOSED`, or with the code of `reason`
   * when that is a LanemuxError (e.g. the mux's own failed health check: `ERR_HEALTH_CHECK_FAILED`).
   * The peer receives the same code in a GOAWAY.
   */
  disconnect(peer: PeerId, reason?: string | Error): void;
  /** The connected peer with this id, if any. */
  peer(id: PeerId): PeerInfo | undefined;
  /** Lanes toward a peer (1..16), 0 if unknown. */
  lanes(peer: PeerId): number;
  /** Largest payload `sendBatch` accepts toward this peer (envelope subtracted), 0 if unknown. */
  maxMessageSize(peer: PeerId): number;
  /**
   * Health check: resolves with the round trip in ms, rejects if the peer does not answer in time
   * (`timeoutMs`, default the health check's deadline). The PING goes on `lane` (default 0) and its
   * PONG comes back on it: a resolved ping proves the peer dispatched everything sent on that lane
   * before it (docs/protocol.md §4.4, §5).
   */
  ping(peer: PeerId, options?: { timeoutMs?: number; lane?: number }): Promise<number>;
  /** Bytes taken for a lane toward a peer but not yet on the wire (socket buffer + waiting admissions). */
  bufferedAmount(peer: PeerId, lane: number): number;
  /**
   * Stop reading from a peer (its admissions then wait): receive-side back-pressure. Returns false
   * if a transport cannot pause (the WHATWG WebSocket client).
   */
  pause(peer: PeerId): boolean;
  /** Resume reading after {@link Messenger.pause}. */
  resume(peer: PeerId): void;

  /** Called when a peer connects (after hello). Returns an unsubscribe function. */
  onPeer(listener: (peer: PeerInfo) => void): () => void;
  /** Called when a peer is gone (connection lost, health check failed, protocol error). */
  onPeerGone(listener: (event: PeerGoneEvent) => void): () => void;
  /** Called for errors with no caller to reject (handler threw, peer notice). Returns an unsubscribe function. */
  onError(listener: (event: MessengerErrorEvent) => void): () => void;
  /**
   * Called when lanemux stops dialling an address for good (see {@link DialEndedEvent}), so the
   * application can tell a reconnect loop that gave up from one still trying. Returns an
   * unsubscribe function.
   */
  onDialEnded(listener: (event: DialEndedEvent) => void): () => void;
  /**
   * Called at each step of each peer's life (see {@link PeerStateType} for the order). Returns an
   * unsubscribe function. Implemented by `createMessenger`'s messenger; optional for others.
   */
  onPeerState?(listener: (event: PeerStateEvent) => void): () => void;
  /**
   * @internal The node heard `peer`'s draining notice (docs/protocol.md §8.4): `onPeerState` and
   * `peerEvents` report `draining` for its current link. Optional for messengers not made by `createMessenger`.
   */
  peerDraining?(peer: PeerId): void;
  /**
   * The same events as an async iterator, with a bounded queue (see {@link PeerEventsOptions}):
   * a reader that falls behind loses the oldest and is told so. Ends when `signal` aborts or the
   * messenger closes (after the events queued before).
   */
  peerEvents?(options?: PeerEventsOptions): AsyncIterableIterator<PeerEvent>;
  /**
   * Resolves with the peer once a link to `address` (dialled there, or a peer advertising it) is
   * up, now or after a reconnect. Rejects on timeout (`ERR_CONNECT`), abort (`ERR_ABORTED`), close
   * (`ERR_CLOSED`), when the peer there is `gone` with no dial left to bring another, or when the
   * dial to it ended before any link formed.
   */
  ready?(address: string, options?: WaitOptions): Promise<PeerInfo>;
  /**
   * Resolves with `peer` once it is connected: at once if it is, after its link comes back if it
   * is `reconnecting` (a dial to it is trying again). Rejects `ERR_UNKNOWN_PEER` at once if it is
   * neither (unknown, or `down` with nothing re-dialling it), and if it is `gone` or not back in
   * time; `ERR_ABORTED` on abort.
   */
  waitForPeer?(peer: PeerId, options?: WaitOptions): Promise<PeerId>;
  /** Counters of handler failures, unknown handlers, notices and late replies. */
  stats(): MessengerStats;

  /** Close every connection and listener. */
  close(): Promise<void>;
}
