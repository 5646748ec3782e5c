/**
 * The messenger contract the mux and the stream layer depend on.
 *
 * The messenger is a small active-message layer over a transport port: fire-and-forget and
 * unary messages addressed by handler name, delivered in order per (sender, lane).
 * This file is the contract only; `messenger.ts` implements it.
 *
 * @packageDocumentation
 */

/** A peer's key: its 64-bit worker id as 16 lower-case hex digits (cheap as a Map key). */
export type PeerId = string;

/** What a peer told us about itself in the hello exchange. */
export interface PeerInfo {
  /** The peer's key (its worker id, hex). */
  readonly id: PeerId;
  /** The peer's 64-bit worker id: the routing key inside stream handles. */
  readonly workerId: bigint;
  /** Random id of the peer's process instance (changes on restart). */
  readonly instanceId: string;
  /** Lanes usable toward this peer: min(ours, theirs), 1..16. */
  readonly lanes: number;
  /** Largest message (envelope included) the peer accepts, in bytes. */
  readonly maxMessageSize: number;
  /** Streaming transport keys the peer supports (e.g. `messenger-mux-v2`, `tcp-stream`). */
  readonly transportKeys: readonly string[];
  /** Messenger protocol version the peer speaks. */
  readonly protocolVersion: number;
  /** Transport-specific address the peer can be dialled at, if it listens (else undefined). */
  readonly address?: string | undefined;
}

/**
 * Result of a send: `true` when the transport admitted the message synchronously, otherwise a
 * promise that resolves when it is admitted and rejects (with a LanemuxError) if it is refused.
 * Admission means the transport took the bytes; the caller may then reuse its buffer.
 */
export type Admission = true | Promise<void>;

/** A fire-and-forget handler. Ordered handlers must not await: they run one at a time per (sender, lane). */
export type MessageHandler = (from: PeerId, lane: number, payload: Uint8Array) => void;

/** A unary request handler: its result (or thrown LanemuxError) is sent back to the caller. */
export type RequestHandler = (from: PeerId, body: unknown, signal: AbortSignal) => unknown | Promise<unknown>;

/** Why a peer went away. */
export interface PeerGoneEvent {
  readonly peer: PeerId;
  /** A LanemuxError code, e.g. `ERR_PEER_GONE`, `ERR_HEALTH_CHECK_FAILED`, `ERR_PROTOCOL`. */
  readonly code: string;
  readonly reason: string;
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
  /** Register a unary request handler; `body` is MessagePack-decoded, validate it with zod. */
  handle(name: string, handler: RequestHandler): void;

  /** Send a fire-and-forget message on a lane. Never throws: refusals reject the returned promise. */
  send(peer: PeerId, lane: number, name: string, payload: Uint8Array): Admission;
  /** Send a batch on the lane's reserved handler name. Same admission contract as `send`. */
  sendBatch(peer: PeerId, lane: number, payload: Uint8Array): Admission;
  /** Unary request/response (MessagePack body), with a timeout (default 10 s) and an AbortSignal. */
  request(peer: PeerId, name: string, body: unknown, options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<unknown>;

  /** Dial an address; resolves with the peer once the hello exchange completed. */
  connect(address: string, options?: { signal?: AbortSignal }): Promise<PeerInfo>;
  /** The connected peer with this id, if any. */
  peer(id: PeerId): PeerInfo | undefined;
  /** Lanes toward a peer (1..16), 0 if unknown. */
  lanes(peer: PeerId): number;
  /** Largest payload `sendBatch` accepts toward this peer (envelope subtracted), 0 if unknown. */
  maxMessageSize(peer: PeerId): number;
  /** Health check: resolves with the round trip in ms, rejects if the peer does not answer in time. */
  ping(peer: PeerId, options?: { timeoutMs?: number }): Promise<number>;

  /** Called when a peer connects (after hello). Returns an unsubscribe function. */
  onPeer(listener: (peer: PeerInfo) => void): () => void;
  /** Called when a peer is gone (connection lost, health check failed, protocol error). */
  onPeerGone(listener: (event: PeerGoneEvent) => void): () => void;

  /** Close every connection and listener. */
  close(): Promise<void>;
}
