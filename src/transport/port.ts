/**
 * The transport port: the one small interface every adapter implements (memory, Node TCP, WebSocket
 * server, WHATWG WebSocket client; later Deno, Bun, WebTransport), and the peer-level interface the
 * messenger consumes.
 *
 * Two levels, so adapters stay tiny and every runtime shares one hello/lane/epoch implementation:
 *
 * - {@link TransportAdapter} + {@link Connection}: one **lane connection** is a reliable, ordered pipe of
 *   whole messages with an admission signal. That is all an adapter provides.
 * - {@link Transport} + {@link PeerLink} (implemented once, in `transport.ts`): groups 1..16 lane
 *   connections into one peer after a hello exchange, tracks epochs, supersedes stale links and reports
 *   a peer gone with a reason.
 *
 * Nothing runtime-specific crosses either interface: bytes are `Uint8Array`, errors are `LanemuxError`.
 * The wire rules (hello, GOAWAY, framing) are in `docs/protocol.md`.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import type { Runtime } from '../runtime/runtime.ts';
import type { Authenticate, CredentialSource, UpgradeRequest } from './auth.ts';
import type { FramePolicy } from './frame-pool.ts';
import type { ReconnectOption } from './reconnect.ts';

// ---------------------------------------------------------------------------------------------
// Constants (docs/protocol.md §7)
// ---------------------------------------------------------------------------------------------

// Shared with the core (wire/constants.ts), defined there once.
import { MAX_LANES, MAX_MAX_MESSAGE_SIZE, MIN_MAX_MESSAGE_SIZE } from '../wire/constants.ts';
export { MAX_LANES, MAX_MAX_MESSAGE_SIZE, MIN_MAX_MESSAGE_SIZE };

/** Messenger protocol version spoken by this build; a peer with another version is refused. */
export const PROTOCOL_VERSION = 1;

/** Default largest message (envelope included, transport framing excluded) a node accepts: 1 MiB. */
export const DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024;

/**
 * Largest frame accepted before the hello exchange completes. A hello is well under 1 KiB plus its
 * credential (at most 8 KiB), so random garbage or an HTTP request on a TCP port is refused at once
 * instead of waiting for a huge frame.
 */
export const HELLO_FRAME_LIMIT = 16 * 1024;

/** Default socket high-water mark: admission is synchronous while fewer bytes than this are buffered. */
export const DEFAULT_HIGH_WATER_MARK = 1024 * 1024;

/** Default bound on bytes waiting for admission per connection; beyond it a send is refused. */
export const DEFAULT_MAX_PENDING_BYTES = 8 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Admission
// ---------------------------------------------------------------------------------------------

/**
 * Result of a send: `true` when the transport took the bytes synchronously, otherwise a promise that
 * resolves when it does and rejects with a LanemuxError if it refuses. Identical to the messenger's
 * `Admission`. Once admission settles the transport holds no reference to the caller's buffers.
 */
export type Admission = true | Promise<void>;

// ---------------------------------------------------------------------------------------------
// Adapter level: lane connections
// ---------------------------------------------------------------------------------------------

/** What a connection reports to its owner (the transport core). */
export interface ConnectionReceiver {
  /**
   * One whole message, in order. The bytes may be a view into a larger read buffer that is never
   * reused by the adapter; a consumer that keeps them for long may copy them.
   */
  message(bytes: Uint8Array): void;
  /** Called exactly once when the connection ends, locally or remotely, with why. */
  closed(error: LanemuxError): void;
}

/** How a connection is closed: flush admitted bytes first, or drop everything now. */
export type CloseMode = 'graceful' | 'abort';

/** One lane connection: an ordered, reliable pipe of whole messages with an admission signal. */
export interface Connection {
  /** The remote endpoint, for errors and logs (e.g. `tcp://127.0.0.1:4000`). */
  readonly remote: string;
  /** For an inbound WebSocket or WebTransport session: the request that opened it (for `authenticate`). */
  readonly request?: UpgradeRequest | undefined;
  /**
   * Attach the receiver and start reading. Called once, synchronously after the connection is handed
   * over; the adapter buffers nothing before it (reading starts here).
   */
  start(receiver: ConnectionReceiver): void;
  /** Largest message accepted from the peer; a larger frame closes the connection with `ERR_FRAME_TOO_LARGE`. */
  setFrameLimit(bytes: number): void;
  /**
   * Send one message `head ‖ body`. The bytes are copied before this returns, so the caller may reuse
   * both buffers at once. Never throws; a refusal rejects the returned promise.
   */
  send(head: Uint8Array, body?: Uint8Array): Admission;
  /** Bytes taken but not yet written to the wire (socket buffer plus pending admissions). */
  bufferedAmount(): number;
  /** Stop reading from the wire (the peer's admissions then wait). False when the runtime cannot. */
  pause(): boolean;
  /** Resume reading after {@link Connection.pause}. */
  resume(): void;
  /**
   * Close the connection. Pending admissions reject with `reason`; the receiver's `closed` runs
   * synchronously with `reason`. Idempotent.
   */
  close(reason: LanemuxError, mode?: CloseMode): void;
}

/** What the transport core gives an adapter that listens. */
export interface ListenHost {
  /** Frame limit for a fresh connection, before the hello raises it. */
  readonly frameLimit: number;
  /** Our advertised `maxMessageSize` (for runtime limits such as ws `maxPayload`). */
  readonly maxMessageSize: number;
  /** Hand over an inbound lane connection; call `start` is the core's job. */
  accept(conn: Connection): void;
  /** Bounds on incomplete frames, for adapters that frame a byte stream. */
  readonly framePolicy?: FramePolicy;
  /**
   * The node's clock, timers and macrotasks (its `runtime` option, else the current runtime's). Every
   * timer of the adapter's accepted connections (close grace, drain polls, handshake deadlines) and
   * every deferred delivery goes through it, so a test with a manual clock drives the adapter too.
   */
  readonly runtime: Runtime;
}

/** One dial of one lane. */
export interface DialRequest {
  readonly address: string;
  readonly lane: number;
  /** Frame limit for the fresh connection, before the hello raises it. */
  readonly frameLimit: number;
  readonly maxMessageSize: number;
  /**
   * Keep this dial alive: after the connection closes, open a new one (with the adapter's jittered
   * back-off) and report it through `open` again. Adapters that cannot reconnect treat it as false.
   */
  readonly reconnect: boolean;
  /**
   * The re-dial back-off `connect(address, { reconnect: { … } })` asked for, for an adapter that
   * reconnects by itself: it replaces the adapter's own back-off options for this dial. Undefined: the
   * adapter's own (`reconnect: true`, or no policy given).
   */
  readonly backoff?: DialBackoff | undefined;
  /** Bounds on incomplete frames, for adapters that frame a byte stream. */
  readonly framePolicy?: FramePolicy;
  /**
   * The node's clock, timers and macrotasks, as in {@link ListenHost.runtime}: the dial's connect
   * deadline, its reconnect back-off and its connection's timers use it.
   */
  readonly runtime: Runtime;
}

/** A re-dial back-off: `(initialDelayMs + random·jitterMs)·factor^n`, at most `maxDelayMs` (as `ReconnectOptions`). */
export interface DialBackoff {
  readonly initialDelayMs: number;
  readonly jitterMs: number;
  readonly factor: number;
  readonly maxDelayMs: number;
}

/** What a dial reports. */
export interface DialEvents {
  /** A connection is open (once for a one-shot dial; once per reconnect for a reconnecting dial). */
  open(conn: Connection): void;
  /** The dial failed for good (refused, terminal close code, closed by `DialHandle.close`). Called at most once. */
  fail(error: LanemuxError): void;
}

/** Control of a dial in progress. */
export interface DialHandle {
  /** Stop dialling for good and close the current connection, if any (no `fail` event). */
  close(): void;
  /**
   * The transport core formed a link over this dial's connection (the HELLOs completed). A dial that
   * reconnects by itself starts its back-off over after such a link; a connection that closes before
   * its link formed keeps the back-off growing. Optional.
   */
  linked?(): void;
}

/**
 * A transport adapter: one runtime's way to listen for and dial lane connections. Five members, in
 * the spirit of crossws adapters; everything above (hello, lanes, epochs) is shared.
 */
export interface TransportAdapter {
  /** Adapter name for errors and logs, e.g. `tcp`, `memory`, `ws-server`, `ws-client`. */
  readonly name: string;
  /** URL schemes this adapter can dial (e.g. `['tcp']`, `['ws', 'wss']`); empty for listen-only adapters. */
  readonly dialSchemes: readonly string[];
  /** True if a dial with `reconnect: true` survives connection loss (partysocket). Defaults to false. */
  readonly reconnects?: boolean;
  /**
   * Authenticates the peers of connections this adapter accepts (see {@link Authenticate}). Without
   * it, the messenger's `authenticate` applies; without either, peers are not authenticated.
   */
  readonly authenticate?: Authenticate | undefined;
  /** Credential the dials of this adapter present in their HELLO; else the messenger's `credential`. */
  readonly credential?: CredentialSource | undefined;
  /** Start listening if this adapter listens; resolves with the address peers dial, else undefined. */
  listen(host: ListenHost): Promise<string | undefined>;
  /**
   * Dial one lane connection. Only called for addresses with a scheme in `dialSchemes`. `events` are
   * never called synchronously from inside `dial`.
   */
  dial(request: DialRequest, events: DialEvents): DialHandle;
  /** Stop listening and dialling, close every connection, release every timer. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Peer level: what the messenger consumes
// ---------------------------------------------------------------------------------------------

/** This node's identity, sent in every hello. */
export interface LocalIdentity {
  /** 64-bit worker id: the routing key inside stream handles. */
  readonly workerId: bigint;
  /** Random id of this process instance (changes on restart). */
  readonly instanceId: string;
  /** Lanes this node offers (1..16). */
  readonly lanes: number;
  /** Largest message (envelope included) this node accepts. */
  readonly maxMessageSize: number;
  /** Streaming transport keys this node supports (e.g. `messenger-mux-v2`). */
  readonly transportKeys: readonly string[];
  /** Messenger protocol version. */
  readonly protocolVersion: number;
  /**
   * Bytes of mux data this node holds at most for one peer (its receive window, advertised in the
   * HELLO so the peer's sender never sends more than this before the node releases some). Undefined:
   * advertise none.
   */
  readonly window?: number | undefined;
}

/** A remote peer as learned in the hello exchange (the messenger's `PeerInfo`). */
export interface PeerIdentity {
  /** The peer's key: its worker id as 16 lower-case hex digits (cheap as a Map key). */
  readonly id: string;
  /** The peer's 64-bit worker id: the routing key inside stream handles. */
  readonly workerId: bigint;
  /** Random id of the peer's process instance (changes on restart). */
  readonly instanceId: string;
  /** Lanes usable toward this peer: min(ours, theirs), 1..16. */
  readonly lanes: number;
  /** Largest message (envelope included) the peer accepts, in bytes, as it advertised. */
  readonly maxMessageSize: number;
  /** Streaming transport keys the peer supports (e.g. `messenger-mux-v2`, `tcp-stream`). */
  readonly transportKeys: readonly string[];
  /** Messenger protocol version the peer speaks. */
  readonly protocolVersion: number;
  /** Transport-specific address the peer can be dialled at, if it listens (else undefined). */
  readonly address?: string | undefined;
  /**
   * Local epoch of this link: a number unique per transport, increasing for each established link.
   * A reconnect (same worker or not) always gets a new epoch.
   */
  readonly epoch: number;
  /** The peer's receive window for mux data in bytes, from its HELLO; undefined if it advertised none. */
  readonly window?: number | undefined;
  /** The identity `authenticate` returned for this peer; undefined when the link was not authenticated. */
  readonly identity?: string | undefined;
}

/** One established peer: 1..16 lane connections that share an epoch and die together. */
export interface PeerLink {
  readonly info: PeerIdentity;
  /** Lanes of this link (= `info.lanes`). */
  readonly lanes: number;
  /** Largest message we may send on it: min(peer's advertised, ours). */
  readonly maxMessageSize: number;
  /** True once the link is gone. */
  readonly closed: boolean;
  /** The address this node dialled to form the link (as given to `connect`); undefined if the peer dialled. */
  readonly dialAddress?: string | undefined;
  /** Send one message `head ‖ body` on a lane (0..lanes-1, not checked here). Copies before returning. */
  send(lane: number, head: Uint8Array, body?: Uint8Array): Admission;
  /** Bytes taken on a lane but not yet written to the wire. */
  bufferedAmount(lane: number): number;
  /** Stop reading from every lane of this peer; false if some adapter cannot pause. */
  pause(): boolean;
  resume(): void;
  /** Close every lane, telling the peer why (GOAWAY), and report the link gone with `reason`. */
  close(reason: LanemuxError, mode?: CloseMode): void;
}

/** What the owner of the transport (the messenger) does with links. */
export interface LinkHandler {
  /** A link is established: return its receiver. Called before any message of the link is delivered. */
  established(link: PeerLink): LinkReceiver;
  /** Called right after `established` once the receiver is attached (announce the peer here). */
  ready?(link: PeerLink): void;
  /**
   * Another connection claimed this live link's worker id without proof: check the link now (a
   * ping with a short deadline) and close it if it is dead, so a restarted peer gets in on its retry.
   */
  contested?(link: PeerLink): void;
  /** At `maxPeers`: the link to close for a new peer (idle longest, no live work), if any. */
  evictable?(): PeerLink | undefined;
  /**
   * A dial stopped for good (see `Messenger.onDialEnded`): nothing will dial `address` again until
   * the next `connect`. Not called when the transport closes, nor for the dial of a crossed pair
   * that ended because the peer's own link to us was kept (`ERR_DUPLICATE_LINK`). `worker`: the
   * peer (worker id, hex) the dial last reached, if any.
   */
  dialEnded?(address: string, error: LanemuxError, worker?: string): void;
  /** A dial whose link or last attempt failed is trying again (see {@link RedialEvent}). */
  reconnecting?(event: RedialEvent): void;
}

/** A dial trying again after its link was lost or an attempt failed. */
export interface RedialEvent {
  /** The address dialled (as given to `connect`). */
  readonly address: string;
  /** The peer (worker id, hex) the dial last reached; undefined if it never reached one. */
  readonly worker: string | undefined;
  /**
   * Attempt number since the link was lost, from 1. Undefined when the adapter re-dials by itself
   * (WebSocket, WebTransport clients): it is reported once, when the link is lost.
   */
  readonly attempt: number | undefined;
  /** How long until this attempt, ms (lanemux's own back-off); undefined when the adapter re-dials by itself. */
  readonly delayMs: number | undefined;
  /** Why the link or the previous attempt failed. */
  readonly error: LanemuxError;
}

/** Options of a `connect`. */
export interface ConnectOptions {
  /** Aborts the connect (`ERR_ABORTED`); a link already formed stays. */
  readonly signal?: AbortSignal | undefined;
  /** Time allowed for the link to form, 1..2^31-1 ms. Defaults to the messenger's `connectTimeoutMs` (10,000). */
  readonly timeoutMs?: number | undefined;
  /**
   * Keep the link up: when it is lost, dial the address again. An adapter that reconnects by itself
   * (the WebSocket and WebTransport clients) uses its own back-off options with `true`, and an object's
   * delays (`initialDelayMs`, `jitterMs`, `factor`, `maxDelayMs`) instead when given; for the others
   * (TCP, memory) lanemux re-dials with jittered exponential back-off (`true`: the defaults of
   * `ReconnectOptions`; an object tunes them). The re-dial presents the last link's claim
   * token, so the peer takes it for the same node at once (docs/protocol.md §3.6). `false`: never
   * re-dial, not even on a reconnecting adapter. Defaults to the messenger's `reconnect` option for
   * reconnecting adapters (true) and to no re-dial for the others. A first connect that cannot
   * reach the address fails at once either way. A later `connect` to an address already being
   * dialled that gives `reconnect` replaces lanemux's own re-dial policy of that dial.
   */
  readonly reconnect?: ReconnectOption | undefined;
}

/** Per-link receiver. */
export interface LinkReceiver {
  /** One whole messenger message (first byte < 0xF0), in order per lane. */
  message(lane: number, bytes: Uint8Array): void;
  /** The link is gone (exactly once); every pending admission of the link has been rejected. */
  gone(error: LanemuxError): void;
}

/** The peer-level transport the messenger depends on. */
export interface Transport {
  readonly identity: LocalIdentity;
  /** Addresses we listen on (one per listening adapter), known after `listen`. */
  readonly addresses: readonly string[];
  /** Start every listening adapter. */
  listen(): Promise<void>;
  /**
   * Dial `address` and complete the hello on every lane. Resolves with the established link, or
   * rejects within the timeout, in every case. A reconnecting dial (see
   * {@link ConnectOptions.reconnect}) stays alive afterwards: each re-established link is reported
   * to {@link LinkHandler.established} with a fresh epoch.
   */
  connect(address: string, options?: ConnectOptions): Promise<PeerLink>;
  /** True while a dial to `address` is alive (linked, forming, or waiting to re-dial). */
  dialing(address: string): boolean;
  /** Close every link, dial and listener. */
  close(): Promise<void>;
}
