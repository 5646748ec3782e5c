/**
 * The peer-level transport, implemented once for every adapter: the hello exchange on each lane
 * connection, grouping 1..16 lanes into one {@link PeerLink}, epochs, superseding a stale link from the
 * same worker, GOAWAY reasons, and reconnects driven by a reconnecting adapter (partysocket).
 *
 * Runtime-agnostic: no `node:*`, no `Buffer`, no `process`.
 *
 * Lifecycle of one link (docs/protocol.md §3):
 * 1. The dialler opens lane 0 and sends HELLO{session, lane 0, lanes = its offer}. The acceptor
 *    answers HELLO{lanes = L = min(both)} after it has processed the dialler's HELLO.
 * 2. The dialler opens lanes 1..L-1, each with HELLO{session, lane k, lanes L}; the acceptor answers
 *    each. The acceptor establishes the link when the last lane's HELLO is processed, right after
 *    sending its last answer and in the same task (so on every lane the answer precedes anything the
 *    link sends); the dialler when the last answer arrives. The dialler sends nothing before then;
 *    it may still receive early messages on lanes whose answer came first, and buffers them
 *    (bounded) until its link is established.
 * 2a. Two nodes dialling each other at once (same worker and instance, opposite diallers) keep the
 *    link dialled by the lower worker id on both sides (see {@link TransportImpl.register}).
 * 3. Any lane closing kills the whole link (one epoch). A reconnecting dial starts again at 1 with a
 *    new session number; the new link gets a new epoch. Nothing encoded for a dead link is sent on
 *    a new one: sends go to a link object, and a dead link's connections are closed.
 *
 * @packageDocumentation
 */
import { ConfigError, LanemuxError } from '../errors.ts';
import { TransportError, asTransportError, describeThrown } from './errors.ts';
import {
  HELLO_FRAME_LIMIT,
  type Admission,
  type CloseMode,
  type Connection,
  type ConnectionReceiver,
  type DialHandle,
  type LinkHandler,
  type LinkReceiver,
  type LocalIdentity,
  type PeerIdentity,
  type PeerLink,
  type Transport,
  type TransportAdapter,
} from './port.ts';
import { KIND_GOAWAY, KIND_HELLO, TRANSPORT_KIND_MIN, decodeGoaway, decodeHello, encodeGoaway, encodeHello, parseGoaway, type Hello } from './hello.ts';
import { MAX_CREDENTIAL_LENGTH, type AuthRequest, type Authenticate, type CredentialSource } from './auth.ts';
import { randomBytes, toHex } from './runtime.ts';
import { deferred, setUnrefTimeout, type Deferred, type TimerHandle } from './runtime.ts';
import { DEFAULT_FRAME_DEADLINE_MS, DEFAULT_INCOMPLETE_FRAME_BYTES, DEFAULT_LARGE_FRAME_BYTES, IncompleteFramePool, type FramePolicy } from './frame-pool.ts';

/** Options of {@link createTransport} (already validated by the messenger). */
export interface TransportOptions {
  readonly identity: LocalIdentity;
  readonly adapters: readonly TransportAdapter[];
  readonly handler: LinkHandler;
  /** Time allowed for the hello exchange of one link (all lanes). */
  readonly helloTimeoutMs: number;
  /** Time allowed for `connect` when the caller gives none. */
  readonly connectTimeoutMs: number;
  /** Most established links plus links being formed by the acceptor. */
  readonly maxPeers: number;
  /** Most inbound connections whose hello is not done yet. */
  readonly maxHandshakes: number;
  /** Most bytes a dialler buffers from lanes answered before its link is established. */
  readonly maxEarlyBytes: number;
  /** Let reconnecting adapters keep a dial alive after its link dies. */
  readonly reconnect: boolean;
  /** Bounds on incomplete frames, handed to every adapter. */
  readonly framePolicy?: FramePolicy;
  /** Authenticates inbound links of adapters that have no `authenticate` of their own. */
  readonly authenticate?: Authenticate | undefined;
  /** Credential presented by dials of adapters that have no `credential` of their own. */
  readonly credential?: CredentialSource | undefined;
  /** Counts refusals and evictions (bounded labels: the reason). */
  readonly onRefusal?: ((reason: RefusalReason) => void) | undefined;
}

/**
 * Why the transport refused or evicted a connection, as counted in metrics:
 * `unauthenticated` (the hook refused), `worker_id_in_use` (a HELLO claimed a live link's worker id
 * without proof), `handshake_evicted` (the oldest connection in its hello made room for a new one),
 * `link_evicted` (an idle link made room for a new peer), `frame_deadline` (counted by adapters).
 */
export type RefusalReason = 'unauthenticated' | 'worker_id_in_use' | 'handshake_evicted' | 'link_evicted' | 'frame_deadline';

/**
 * After a GOAWAY on one lane of an established link, the other lanes get this long to deliver what
 * the peer sent on them before its GOAWAY there; then the link is closed (at once once every lane has
 * had its GOAWAY).
 */
export const GOAWAY_CLOSE_GRACE_MS = 1_000;

/** Codes after which a dial never retries: the peer will refuse us again the same way (or our own configuration is wrong). */
const TERMINAL_CODES: ReadonlySet<string> = new Set(['ERR_VERSION_MISMATCH', 'ERR_HANDSHAKE', 'ERR_MALFORMED_ENVELOPE', 'ERR_DUPLICATE_LINK', 'ERR_UNAUTHENTICATED', 'ERR_INVALID_CONFIG']);

/** A fresh claim token: 128 bits from the CSPRNG, as 32 lower-case hex digits. */
function newClaimToken(): string {
  return toHex(randomBytes(16));
}

/** A dialler's link-attempt number: 53 random bits (never a guessable counter), nonzero. */
function randomSession(): number {
  const b = randomBytes(7);
  const n = ((b[0]! & 0x1f) * 2 ** 48) + (b[1]! * 2 ** 40) + (b[2]! * 2 ** 32) + ((b[3]! << 24) >>> 0) + (b[4]! << 16) + (b[5]! << 8) + b[6]!;
  return n === 0 ? 1 : n;
}

/** Create the peer-level transport over some adapters. */
export function createTransport(options: TransportOptions): Transport {
  return new TransportImpl(options);
}

// ---------------------------------------------------------------------------------------------

/** Routes one connection's events to whoever owns it now: a handshake, then a link. */
class ConnPort implements ConnectionReceiver {
  readonly conn: Connection;
  /** The adapter that accepted or dialled the connection (its `authenticate`, its name). */
  readonly adapter: TransportAdapter | undefined;
  lane = 0;
  link: Link | undefined;
  owner: HandshakeOwner | undefined;
  /** HELLO processed (acceptor) or answered (dialler). */
  helloDone = false;
  /** Acceptor: the lane-0 HELLO waits for `authenticate`; nothing else may arrive meanwhile. */
  authPending = false;

  readonly #refused: ((reason: RefusalReason) => void) | undefined;

  constructor(conn: Connection, owner: HandshakeOwner, adapter?: TransportAdapter, refused?: (reason: RefusalReason) => void) {
    this.conn = conn;
    this.owner = owner;
    this.adapter = adapter;
    this.#refused = refused;
  }

  message(bytes: Uint8Array): void {
    if (this.link !== undefined) this.link.deliver(this.lane, bytes);
    else this.owner?.onMessage(this, bytes);
  }

  closed(error: LanemuxError): void {
    if (error.code === 'ERR_FRAME_DEADLINE') this.#refused?.('frame_deadline');
    if (this.link !== undefined) this.link.connClosed(this.lane, error);
    else this.owner?.onClosed(this, error);
  }

  /** Tell the peer why, then close. */
  reject(error: LanemuxError, mode: CloseMode = 'graceful'): void {
    this.owner = undefined;
    if (mode === 'graceful') swallow(this.conn.send(encodeGoaway(error)));
    this.conn.close(error, mode);
  }
}

interface HandshakeOwner {
  onMessage(port: ConnPort, bytes: Uint8Array): void;
  onClosed(port: ConnPort, error: LanemuxError): void;
}

/** Ignore the outcome of a best-effort send (GOAWAY, error replies). */
function swallow(admission: Admission): void {
  if (admission !== true) admission.catch(() => {});
}

// ---------------------------------------------------------------------------------------------

class Link implements PeerLink {
  readonly info: PeerIdentity;
  /** Worker id (hex) of the side that dialled this link: ours or the peer's. */
  readonly dialledBy: string;
  readonly lanes: number;
  readonly maxMessageSize: number;
  /**
   * Acceptor side: the token this node issued to the peer in the lane-0 answer. Only a HELLO that
   * presents it (or, with authentication, the same identity) may supersede this link.
   */
  readonly claimToken: string | undefined;
  /** Dialler side: the address we dialled (crossed dials compare it with the incoming connection's host). */
  dialAddress: string | undefined;
  readonly #ports: ConnPort[];
  readonly #transport: TransportImpl;
  readonly #onGone: ((error: LanemuxError) => void) | undefined;
  #receiver: LinkReceiver | undefined;
  #closed = false;
  #remoteReason: LanemuxError | undefined;
  /** Lanes whose GOAWAY arrived: nothing after it on that lane is delivered. */
  readonly #laneEnded: boolean[] = [];
  #endedLanes = 0;
  #goawayTimer: TimerHandle | undefined;

  constructor(info: PeerIdentity, dialledBy: string, ports: ConnPort[], transport: TransportImpl, ourMax: number, onGone: ((error: LanemuxError) => void) | undefined, claimToken: string | undefined) {
    this.info = info;
    this.dialledBy = dialledBy;
    this.claimToken = claimToken;
    this.lanes = info.lanes;
    this.maxMessageSize = Math.min(info.maxMessageSize, ourMax);
    this.#ports = ports;
    this.#transport = transport;
    this.#onGone = onGone;
    ports.forEach((p, lane) => {
      p.owner = undefined;
      p.link = this;
      p.lane = lane;
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  setReceiver(receiver: LinkReceiver): void {
    this.#receiver = receiver;
  }

  send(lane: number, head: Uint8Array, body?: Uint8Array): Admission {
    const port = this.#ports[lane];
    if (port === undefined) {
      return Promise.reject(new TransportError('ERR_BAD_LANE', `lane ${lane} is outside 0..${this.lanes - 1} for peer ${this.info.id}`));
    }
    return port.conn.send(head, body);
  }

  bufferedAmount(lane: number): number {
    return this.#ports[lane]?.conn.bufferedAmount() ?? 0;
  }

  pause(): boolean {
    let all = true;
    for (const p of this.#ports) all = p.conn.pause() && all;
    return all;
  }

  resume(): void {
    for (const p of this.#ports) p.conn.resume();
  }

  /** One message from lane `lane`. */
  deliver(lane: number, bytes: Uint8Array): void {
    if (this.#closed || this.#laneEnded[lane] === true) return;
    const kind = bytes[0];
    if (kind === undefined) {
      this.close(new TransportError('ERR_MALFORMED_ENVELOPE', `empty message on lane ${lane} from ${this.info.id}`));
      return;
    }
    if (kind >= TRANSPORT_KIND_MIN) {
      if (kind === KIND_GOAWAY) {
        this.#goaway(lane, bytes);
        return;
      }
      const what = kind === KIND_HELLO ? 'a second HELLO' : `unknown transport kind 0x${kind.toString(16)}`;
      this.close(new TransportError('ERR_MALFORMED_ENVELOPE', `${what} on lane ${lane} from ${this.info.id}`));
      return;
    }
    this.#receiver?.message(lane, bytes);
  }

  /**
   * The peer's GOAWAY on `lane`: the last message of that lane. The peer's close should follow; if it
   * does not, the link is closed once every lane has ended or after {@link GOAWAY_CLOSE_GRACE_MS}.
   */
  #goaway(lane: number, bytes: Uint8Array): void {
    const reported = parseGoaway(bytes);
    if (reported === undefined) {
      this.close(new TransportError('ERR_MALFORMED_ENVELOPE', `malformed GOAWAY on lane ${lane} from ${this.info.id}`));
      return;
    }
    // Report the peer's reason rather than a bare "connection closed".
    const reason = (this.#remoteReason ??= remoteGoaway(reported));
    this.#laneEnded[lane] = true;
    this.#endedLanes++;
    if (this.#endedLanes >= this.lanes) {
      this.close(reason);
      return;
    }
    this.#goawayTimer ??= setUnrefTimeout(() => this.close(reason), GOAWAY_CLOSE_GRACE_MS);
  }

  connClosed(lane: number, error: LanemuxError): void {
    if (this.#closed) return;
    const reason = this.#remoteReason ?? error;
    this.#teardown(reason, lane);
  }

  close(reason: LanemuxError, mode: CloseMode = 'graceful'): void {
    if (this.#closed) return;
    this.#teardown(reason, -1, mode);
  }

  #teardown(reason: LanemuxError, deadLane: number, mode: CloseMode = 'graceful'): void {
    this.#closed = true;
    if (this.#goawayTimer !== undefined) clearTimeout(this.#goawayTimer);
    for (const p of this.#ports) {
      if (p.lane === deadLane) continue;
      if (mode === 'graceful') swallow(p.conn.send(encodeGoaway(reason)));
      p.conn.close(reason, mode);
    }
    this.#transport.unregister(this);
    this.#receiver?.gone(reason);
    this.#onGone?.(reason);
  }
}

/** Why the losing link of two crossed dials is closed (both sides close the same one). */
function duplicateLink(worker: string): LanemuxError {
  return new TransportError('ERR_DUPLICATE_LINK', `duplicate link: worker ${worker} and this node dialled each other; keeping the link dialled by the lower worker id`);
}

/** A peer's GOAWAY: a normal shutdown on their side is "peer gone" on ours. */
function remoteGoaway(error: LanemuxError): LanemuxError {
  if (error.code === 'ERR_CLOSED' || error.code === 'ERR_PEER_GONE') {
    return new TransportError('ERR_PEER_GONE', error.message, { retryable: true, cause: error });
  }
  return error;
}

// ---------------------------------------------------------------------------------------------
// Acceptor side
// ---------------------------------------------------------------------------------------------

interface Group {
  readonly key: string;
  readonly hello: Hello;
  readonly lanes: number;
  readonly ports: (ConnPort | undefined)[];
  filled: number;
  /** Token issued in the lane-0 answer: the later lanes present it, and so does a reconnect that supersedes the link. */
  readonly claim: string;
  /** The lane-0 HELLO carried a `claim` field (a dialler of this version): its later lanes must present the token. */
  readonly claims: boolean;
  /** What `authenticate` returned, when the adapter authenticates. */
  readonly identity: string | undefined;
}

class Acceptor implements HandshakeOwner {
  readonly #t: TransportImpl;
  readonly #groups = new Map<string, Group>();
  /** Connections in their hello, oldest first (a Map keeps insertion order). */
  readonly #pending = new Map<ConnPort, TimerHandle>();
  /** `authenticate` calls that have not settled (their ports may be gone). */
  #authInFlight = 0;

  constructor(t: TransportImpl) {
    this.#t = t;
  }

  accept(conn: Connection, adapter?: TransportAdapter): void {
    const port = new ConnPort(conn, this, adapter, (r) => this.#t.refused(r));
    if (this.#t.isClosed) {
      conn.start(port);
      port.reject(new TransportError('ERR_CLOSED', 'this node is closing'), 'abort');
      return;
    }
    const max = this.#t.options.maxHandshakes;
    if (this.#pending.size >= max) {
      // Evict the oldest silent connection rather than refuse the new one: sockets that never send a
      // HELLO then delay a new peer only while they arrive faster than it says hello.
      // Silent sockets (no HELLO yet) go first; a port waiting on authenticate or on its lanes only if none is.
      let oldest: ConnPort | undefined;
      for (const p of this.#pending.keys()) {
        if (!p.authPending && !p.helloDone) {
          oldest = p;
          break;
        }
      }
      oldest ??= this.#pending.keys().next().value as ConnPort;
      this.#t.refused('handshake_evicted');
      this.#fail(oldest, new TransportError('ERR_EVICTED', `connection from ${oldest.conn.remote} evicted: ${max} connections were in their hello`, { retryable: true }), 'abort');
    }
    this.#pending.set(port, setUnrefTimeout(() => {
      // ERR_CONNECT, not ERR_HANDSHAKE: a slow hello (or a slow authenticate) is worth a retry, and a
      // reconnecting client treats ERR_HANDSHAKE as terminal.
      this.#fail(port, new TransportError('ERR_CONNECT', `no complete hello from ${conn.remote} within ${this.#t.options.helloTimeoutMs} ms`, { retryable: true }));
    }, this.#t.options.helloTimeoutMs));
    conn.start(port);
  }

  onMessage(port: ConnPort, bytes: Uint8Array): void {
    if (port.helloDone || port.authPending) {
      // A lane of a group still forming: the dialler sends nothing before our answer.
      this.#fail(port, new TransportError('ERR_PROTOCOL', `message on lane ${port.lane} from ${port.conn.remote} before the link was established`));
      return;
    }
    if (bytes[0] === KIND_GOAWAY) {
      this.#fail(port, decodeGoaway(bytes), 'abort');
      return;
    }
    const id = this.#t.options.identity;
    const h = decodeHello(bytes, id.protocolVersion);
    if (h instanceof LanemuxError) {
      this.#fail(port, h);
      return;
    }
    if (h.worker === this.#t.selfId) {
      this.#fail(port, new TransportError('ERR_HANDSHAKE', `connected to itself (worker ${h.worker}); refusing a self link`));
      return;
    }
    if (h.lane !== 0) {
      this.#laneK(port, h);
      return;
    }
    if (this.#groups.has(groupKey(h))) {
      this.#fail(port, new TransportError('ERR_HANDSHAKE', `duplicate lane 0 for session ${h.session} of worker ${h.worker}`));
      return;
    }
    const auth = port.adapter?.authenticate ?? this.#t.options.authenticate;
    if (auth === undefined) {
      this.#lane0(port, h, undefined);
      return;
    }
    // Authenticate before answering or learning anything more from the peer. Calls in flight are
    // bounded like handshakes (an evicted port's call still runs to its end, so it counts until then).
    if (this.#authInFlight >= this.#t.options.maxHandshakes) {
      this.#fail(port, new TransportError('ERR_TOO_MANY_PEERS', `${this.#authInFlight} authentications are in flight; try again`, { retryable: true }));
      return;
    }
    this.#authInFlight++;
    port.authPending = true;
    let settled = false;
    const settle = (identity: unknown): void => {
      if (settled) return;
      settled = true;
      this.#authInFlight--;
      // Closed, timed out or evicted meanwhile: nothing to do.
      if (!port.authPending || port.owner !== this) return;
      port.authPending = false;
      if (this.#t.isClosed) {
        this.#fail(port, new TransportError('ERR_CLOSED', 'this node is closing'));
        return;
      }
      if (typeof identity !== 'string' || identity.length === 0) {
        this.#t.refused('unauthenticated');
        this.#fail(port, new TransportError('ERR_UNAUTHENTICATED', `authentication refused for worker ${h.worker} from ${port.conn.remote}`));
        return;
      }
      this.#lane0(port, h, identity);
    };
    const request: AuthRequest = { transport: port.adapter?.name ?? 'unknown', remote: port.conn.remote, credential: h.credential, worker: h.worker, request: port.conn.request };
    let verdict: unknown;
    try {
      verdict = auth(request);
    } catch {
      verdict = null;
    }
    if (verdict !== null && typeof verdict === 'object' && typeof (verdict as { then?: unknown }).then === 'function') {
      (verdict as Promise<unknown>).then(settle, () => settle(null));
    } else {
      settle(verdict);
    }
  }

  /** Lane 0 of a new link, authenticated (`identity`) or not. */
  #lane0(port: ConnPort, h: Hello, identity: string | undefined): void {
    // Capacity is checked after authentication: a peer that is refused must not evict anyone.
    if (!this.#t.hasLink(h.worker) && this.#t.linkCount + this.#groups.size >= this.#t.options.maxPeers && !this.#t.evictIdleLink()) {
      this.#fail(port, new TransportError('ERR_TOO_MANY_PEERS', `this node already has ${this.#t.options.maxPeers} peers`, { retryable: true }));
      return;
    }
    const refusal = this.#t.claimRefusal(h, identity);
    if (refusal !== undefined) {
      this.#fail(port, refusal);
      return;
    }
    const key = groupKey(h);
    if (this.#groups.has(key)) {
      this.#fail(port, new TransportError('ERR_HANDSHAKE', `duplicate lane 0 for session ${h.session} of worker ${h.worker}`));
      return;
    }
    const lanes = Math.min(h.lanes, this.#t.options.identity.lanes);
    const group: Group = {
      key,
      hello: h,
      lanes,
      ports: new Array<ConnPort | undefined>(lanes).fill(undefined),
      filled: 0,
      claim: newClaimToken(),
      claims: h.claim !== undefined,
      identity,
    };
    this.#groups.set(key, group);
    this.#join(port, h, group);
  }

  /** Lane 1.. of a link being formed: it must fit its lane 0 and present the claim token of its answer. */
  #laneK(port: ConnPort, h: Hello): void {
    const group = this.#groups.get(groupKey(h));
    if (group === undefined) {
      this.#fail(port, new TransportError('ERR_HANDSHAKE', `lane ${h.lane} of session ${h.session} arrived without its lane 0`));
      return;
    }
    if (h.lanes !== group.lanes || h.lane >= group.lanes || group.ports[h.lane] !== undefined || h.instance !== group.hello.instance) {
      this.#fail(port, new TransportError('ERR_HANDSHAKE', `lane ${h.lane}/${h.lanes} does not fit session ${h.session} (${group.lanes} lanes)`));
      return;
    }
    if (group.claims && h.claim !== group.claim) {
      // Only the dialler read the lane-0 answer: anyone else naming its session cannot join the link.
      this.#fail(port, new TransportError('ERR_HANDSHAKE', `lane ${h.lane} of session ${h.session} does not present the claim token of its lane 0`));
      return;
    }
    this.#join(port, h, group);
  }

  #join(port: ConnPort, h: Hello, group: Group): void {
    const id = this.#t.options.identity;
    port.helloDone = true;
    port.lane = h.lane;
    group.ports[h.lane] = port;
    group.filled++;
    port.conn.setFrameLimit(id.maxMessageSize);
    const answer = encodeHello({
      protocolVersion: id.protocolVersion,
      worker: this.#t.selfId,
      instance: id.instanceId,
      session: h.session,
      lane: h.lane,
      lanes: group.lanes,
      maxMessageSize: id.maxMessageSize,
      keys: id.transportKeys,
      address: this.#t.addresses[0],
      window: id.window,
      claim: h.lane === 0 ? group.claim : undefined,
    });
    // The answer goes out first so that it precedes anything the new link sends on this lane; the
    // link is established in the same task, before the dialler can possibly react to the answer.
    swallow(port.conn.send(answer));
    if (group.filled === group.lanes) {
      this.#groups.delete(group.key);
      const ports = group.ports as ConnPort[];
      for (const p of ports) this.#clearPending(p);
      // A link to the same worker may have formed while this one did: the same rule decides again.
      const refusal = this.#t.claimRefusal(group.hello, group.identity);
      if (refusal !== undefined) {
        for (const p of ports) p.reject(refusal);
        return;
      }
      this.#t.register(group.hello, group.lanes, ports, undefined, group.claim, group.identity);
    }
  }

  onClosed(port: ConnPort, error: LanemuxError): void {
    this.#fail(port, error, 'abort');
  }

  #clearPending(port: ConnPort): void {
    const timer = this.#pending.get(port);
    if (timer !== undefined) {
      clearTimeout(timer);
      this.#pending.delete(port);
    }
  }

  /** Fail a connection and, if it belongs to a forming group, the whole group. */
  #fail(port: ConnPort, error: LanemuxError, mode: CloseMode = 'graceful'): void {
    this.#clearPending(port);
    port.authPending = false;
    port.reject(error, mode);
    for (const [key, g] of this.#groups) {
      if (!g.ports.includes(port)) continue;
      this.#groups.delete(key);
      for (const p of g.ports) {
        if (p === undefined || p === port) continue;
        this.#clearPending(p);
        p.reject(error);
      }
    }
  }

  close(): void {
    const err = new TransportError('ERR_CLOSED', 'this node is closing');
    for (const port of [...this.#pending.keys()]) this.#fail(port, err);
  }
}

/** The key of a link being formed: the dialler's worker, instance and session. */
function groupKey(h: Hello): string {
  return `${h.worker}/${h.instance}/${h.session}`;
}

// ---------------------------------------------------------------------------------------------
// Dialler side
// ---------------------------------------------------------------------------------------------

interface Attempt {
  readonly session: number;
  readonly ports: (ConnPort | undefined)[];
  readonly handles: (DialHandle | undefined)[];
  remote: Hello | undefined;
  lanes: number;
  answered: number;
  early: Array<readonly [number, Uint8Array]>;
  earlyBytes: number;
  timer: TimerHandle;
}

class Dial implements HandshakeOwner {
  readonly address: string;
  readonly #t: TransportImpl;
  readonly #adapter: TransportAdapter;
  readonly #reconnect: boolean;
  #lane0: DialHandle | undefined;
  #attempt: Attempt | undefined;
  #link: Link | undefined;
  /** Waiters for the next established link (connect calls). */
  #next: Deferred<Link> | undefined;
  /** `connect` calls currently waiting on this dial (they share it: same address). */
  #waiters = 0;
  /** Worker id of the peer, once a lane-0 answer named it. */
  #remoteWorker: string | undefined;
  #stopped = false;

  constructor(t: TransportImpl, adapter: TransportAdapter, address: string) {
    this.#t = t;
    this.#adapter = adapter;
    this.address = address;
    this.#reconnect = t.options.reconnect;
  }

  /** The established link, if any. */
  get link(): Link | undefined {
    return this.#link;
  }

  /** True once stopped for good. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Resolves with the next established link (the current one if established). */
  nextLink(): Promise<Link> {
    if (this.#link !== undefined && !this.#link.closed) return Promise.resolve(this.#link);
    if (this.#next === undefined) {
      this.#next = deferred<Link>();
      // A rejection nobody awaits (the dial was stopped before connect returned) must not crash.
      this.#next.promise.catch(() => {});
    }
    return this.#next.promise;
  }

  start(): void {
    this.#lane0 = this.#dialLane(0);
  }

  /** A `connect` call starts waiting on this dial. */
  join(): void {
    this.#waiters++;
  }

  /**
   * A `connect` call stops waiting: settled (no `error`), or gave up on its own (timeout or abort,
   * `error`). Giving up stops the dial only when nobody else waits and no link exists, so one
   * caller's deadline never fails another caller's connect to the same address.
   */
  leave(error?: LanemuxError): void {
    this.#waiters--;
    if (error !== undefined && this.#waiters === 0 && this.#link === undefined) this.stop(error);
  }

  #dialLane(lane: number): DialHandle {
    const id = this.#t.options.identity;
    const handle: DialHandle = this.#adapter.dial(
      {
        address: this.address,
        lane,
        frameLimit: HELLO_FRAME_LIMIT,
        maxMessageSize: id.maxMessageSize,
        reconnect: lane === 0 && this.#reconnect,
        framePolicy: this.#t.framePolicy,
      },
      {
        open: (conn) => this.#onOpen(lane, conn, handle),
        fail: (error) => this.#onDialFail(lane, error, handle),
      },
    );
    return handle;
  }

  #onOpen(lane: number, conn: Connection, handle: DialHandle): void {
    if (this.#stopped) {
      conn.start({ message() {}, closed() {} });
      conn.close(new TransportError('ERR_CLOSED', 'dial stopped'), 'abort');
      return;
    }
    let attempt = this.#attempt;
    if (lane === 0) {
      if (attempt !== undefined) this.#failAttempt(new TransportError('ERR_HANDSHAKE', 'lane 0 reconnected during a hello'));
      const session = randomSession();
      attempt = {
        session,
        ports: [],
        handles: [],
        remote: undefined,
        lanes: 0,
        answered: 0,
        early: [],
        earlyBytes: 0,
        timer: setUnrefTimeout(() => {
          if (this.#attempt?.session === session) {
            this.#failAttempt(new TransportError('ERR_HANDSHAKE', `hello with ${this.address} did not complete within ${this.#t.options.helloTimeoutMs} ms`, { retryable: true }));
          }
        }, this.#t.options.helloTimeoutMs),
      };
      this.#attempt = attempt;
    } else if (attempt === undefined || attempt.handles[lane] !== handle || attempt.ports[lane] !== undefined) {
      conn.start({ message() {}, closed() {} });
      conn.close(new TransportError('ERR_CLOSED', 'stale lane dial'), 'abort');
      return;
    }
    const port = new ConnPort(conn, this, this.#adapter, (r) => this.#t.refused(r));
    port.lane = lane;
    attempt.ports[lane] = port;
    conn.start(port);
    const current = attempt;
    if (lane !== 0) {
      // Later lanes join by the token of this attempt's lane-0 answer (an older acceptor issues none).
      this.#sendHello(port, current, undefined);
      return;
    }
    const source = this.#adapter.credential ?? this.#t.options.credential;
    if (source === undefined || typeof source === 'string') {
      this.#sendHello(port, current, source);
      return;
    }
    // A credential function runs before every connect and reconnect (a browser refreshes its token).
    let got: string | Promise<string>;
    try {
      got = source();
    } catch (cause) {
      this.#failAttempt(new TransportError('ERR_CONNECT', `the credential function for ${this.address} threw: ${describeThrown(cause)}`, { cause, retryable: true }));
      return;
    }
    if (typeof got === 'string') {
      this.#sendHello(port, current, got);
      return;
    }
    Promise.resolve(got).then(
      (credential) => {
        if (this.#attempt === current && current.ports[0] === port && !this.#stopped) this.#sendHello(port, current, credential);
      },
      (cause: unknown) => {
        if (this.#attempt === current) this.#failAttempt(new TransportError('ERR_CONNECT', `the credential function for ${this.address} failed: ${describeThrown(cause)}`, { cause, retryable: true }));
      },
    );
  }

  #sendHello(port: ConnPort, attempt: Attempt, credential: unknown): void {
    if (credential !== undefined && (typeof credential !== 'string' || credential.length > MAX_CREDENTIAL_LENGTH)) {
      this.#failAttempt(new ConfigError('credential', `the credential for ${this.address} must be a string of at most ${MAX_CREDENTIAL_LENGTH} characters, got ${typeof credential === 'string' ? `${credential.length} characters` : typeof credential}`));
      return;
    }
    const id = this.#t.options.identity;
    const lane = port.lane;
    swallow(
      port.conn.send(
        encodeHello({
          protocolVersion: id.protocolVersion,
          worker: this.#t.selfId,
          instance: id.instanceId,
          session: attempt.session,
          lane,
          lanes: lane === 0 ? id.lanes : attempt.lanes,
          maxMessageSize: id.maxMessageSize,
          keys: id.transportKeys,
          address: this.#t.addresses[0],
          window: id.window,
          credential: lane === 0 ? credential : undefined,
          // Lane 0: the token of our last link to this address ('' if none: it also says we speak claims).
          claim: lane === 0 ? (this.#t.claimFor(this.address) ?? '') : attempt.remote?.claim,
        }),
      ),
    );
  }

  onMessage(port: ConnPort, bytes: Uint8Array): void {
    const attempt = this.#attempt;
    if (attempt === undefined || attempt.ports[port.lane] !== port) return;
    if (port.helloDone) {
      // Early message on an answered lane: the acceptor established already; keep order, bounded.
      if (bytes[0] === KIND_GOAWAY) {
        this.#failAttempt(remoteGoaway(decodeGoaway(bytes)));
        return;
      }
      attempt.earlyBytes += bytes.byteLength;
      if (attempt.earlyBytes > this.#t.options.maxEarlyBytes) {
        this.#failAttempt(new TransportError('ERR_PROTOCOL', `more than ${this.#t.options.maxEarlyBytes} bytes arrived before the link with ${this.address} was established`));
        return;
      }
      attempt.early.push([port.lane, bytes]);
      return;
    }
    if (bytes[0] === KIND_GOAWAY) {
      this.#failAttempt(remoteGoaway(decodeGoaway(bytes)));
      return;
    }
    const id = this.#t.options.identity;
    const h = decodeHello(bytes, id.protocolVersion);
    if (h instanceof LanemuxError) {
      this.#failAttempt(h, true);
      return;
    }
    if (h.session !== attempt.session || h.lane !== port.lane) {
      this.#failAttempt(new TransportError('ERR_HANDSHAKE', `HELLO answer for session ${h.session} lane ${h.lane}, expected session ${attempt.session} lane ${port.lane}`), true);
      return;
    }
    if (port.lane === 0) {
      if (h.worker === this.#t.selfId) {
        // The acceptor refuses a real self-connection itself: our own HELLO coming back is an echo server.
        this.#failAttempt(new TransportError('ERR_HANDSHAKE', `${this.address} answered with this node's own HELLO (worker ${h.worker}): an echo server, not a lanemux server`), true);
        return;
      }
      if (h.lanes > id.lanes) {
        this.#failAttempt(new TransportError('ERR_HANDSHAKE', `peer agreed on ${h.lanes} lanes, more than the ${id.lanes} offered`), true);
        return;
      }
      attempt.remote = h;
      attempt.lanes = h.lanes;
      this.#remoteWorker = h.worker;
      if (h.claim !== undefined && h.claim !== '') this.#t.rememberClaim(this.address, h.claim);
    } else {
      const r = attempt.remote as Hello;
      if (h.worker !== r.worker || h.instance !== r.instance || h.lanes !== attempt.lanes) {
        this.#failAttempt(new TransportError('ERR_HANDSHAKE', `lane ${port.lane} reached another peer than lane 0 (worker ${h.worker})`), true);
        return;
      }
    }
    port.helloDone = true;
    port.conn.setFrameLimit(id.maxMessageSize);
    attempt.answered++;
    if (port.lane === 0) {
      // Adapters never call open/fail synchronously from dial(), so the handle is stored first.
      for (let lane = 1; lane < attempt.lanes; lane++) attempt.handles[lane] = this.#dialLane(lane);
    }
    if (attempt.answered === attempt.lanes) this.#establish(attempt);
  }

  onClosed(port: ConnPort, error: LanemuxError): void {
    const attempt = this.#attempt;
    if (attempt === undefined || attempt.ports[port.lane] !== port) return;
    this.#failAttempt(error);
  }

  #establish(attempt: Attempt): void {
    clearTimeout(attempt.timer);
    const remote = attempt.remote as Hello;
    // The node we dialled names a worker id that already has a live link from another process: the
    // address is not proof of identity, so the live link is kept (and checked), this dial refused.
    const refusal = this.#t.dialRefusal(remote);
    if (refusal !== undefined) {
      this.#failAttempt(refusal, true);
      return;
    }
    this.#attempt = undefined;
    const ports = attempt.ports as ConnPort[];
    const link = this.#t.register(attempt.remote as Hello, attempt.lanes, ports, (error) => this.#onLinkGone(link, error, attempt));
    if (ports[0]?.link !== link) {
      // A crossed dial lost the tie-break: `link` is the peer's surviving link to us, and ours was
      // closed unannounced. Callers get the survivor; this dial ends without a retry.
      for (let lane = 1; lane < attempt.handles.length; lane++) attempt.handles[lane]?.close();
      const next = this.#next;
      this.#next = undefined;
      next?.resolve(link);
      this.stop(duplicateLink(link.info.id));
      return;
    }
    this.#link = link;
    link.dialAddress = this.address;
    for (const [lane, bytes] of attempt.early) {
      if (link.closed) break;
      link.deliver(lane, bytes);
    }
    const next = this.#next;
    this.#next = undefined;
    next?.resolve(link);
  }

  #onLinkGone(link: Link, error: LanemuxError, attempt: Attempt): void {
    if (this.#link === link) this.#link = undefined;
    for (let lane = 1; lane < attempt.handles.length; lane++) attempt.handles[lane]?.close();
    this.#afterLoss(error);
  }

  #onDialFail(lane: number, error: LanemuxError, handle: DialHandle): void {
    if (this.#stopped) return;
    if (lane !== 0) {
      if (this.#attempt?.handles[lane] === handle) this.#failAttempt(asTransportError('ERR_CONNECT', `lane ${lane} of ${this.address}`, error));
      return;
    }
    if (handle !== this.#lane0) return;
    this.#lane0 = undefined;
    this.stop(asTransportError('ERR_CONNECT', `cannot connect to ${this.address}`, error));
  }

  /** Abandon the hello in progress. `telling`: send the peer a GOAWAY saying why (it broke the hello). */
  #failAttempt(error: LanemuxError, telling = false): void {
    const attempt = this.#attempt;
    if (attempt === undefined) return;
    this.#attempt = undefined;
    clearTimeout(attempt.timer);
    for (let lane = 1; lane < attempt.handles.length; lane++) attempt.handles[lane]?.close();
    for (const p of attempt.ports) {
      if (p === undefined) continue;
      p.owner = undefined;
      if (telling) swallow(p.conn.send(encodeGoaway(error)));
      p.conn.close(error, telling ? 'graceful' : 'abort');
    }
    this.#afterLoss(error);
  }

  #afterLoss(error: LanemuxError): void {
    if (this.#stopped) return;
    const worker = this.#remoteWorker;
    if (error.code === 'ERR_WORKER_ID_IN_USE' && this.#next !== undefined) {
      // A crossed dial refused before it could prove itself: the node at this address is already
      // linked to us through its own dial; waiting callers get that link.
      const other = this.#t.linkFromAddress(this.address);
      if (other !== undefined) {
        const next = this.#next;
        this.#next = undefined;
        next.resolve(other);
        this.stop(error, true);
        return;
      }
    }
    if (error.code === 'ERR_DUPLICATE_LINK' && worker !== undefined && this.#next !== undefined) {
      // The peer kept the link it dialled to us: waiting callers get that one once it is here.
      const next = this.#next;
      this.#next = undefined;
      this.#t.whenLinked(worker).then(next.resolve, next.reject);
    }
    // A reconnecting adapter (partysocket) opens lane 0 again by itself after its back-off; every
    // other case ends the dial. connect() keeps waiting across retries until its own deadline.
    // A terminal code marked retryable (a hello that timed out) is worth another try.
    if (!this.#reconnect || !this.#adapterReconnects() || (TERMINAL_CODES.has(error.code) && !error.retryable)) this.stop(error);
  }

  #adapterReconnects(): boolean {
    return this.#lane0 !== undefined && this.#adapter.reconnects === true;
  }

  /**
   * Stop for good; a pending connect rejects with `error`. The application is told (`dialEnded`)
   * unless the node is closing or a link to the peer survives the stop (`linked`: a crossed dial
   * whose waiters got the peer's link).
   */
  stop(error: LanemuxError, linked = false): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#t.forgetDial(this);
    const attempt = this.#attempt;
    if (attempt !== undefined) {
      this.#attempt = undefined;
      clearTimeout(attempt.timer);
      for (let lane = 1; lane < attempt.handles.length; lane++) attempt.handles[lane]?.close();
      for (const p of attempt.ports) {
        if (p === undefined) continue;
        p.owner = undefined;
        p.conn.close(error, 'abort');
      }
    }
    this.#lane0?.close();
    this.#lane0 = undefined;
    const next = this.#next;
    this.#next = undefined;
    next?.reject(error);
    // Last, once the dial is fully down: a listener may connect to the address again at once.
    if (!linked && !this.#t.isClosed && error.code !== 'ERR_DUPLICATE_LINK') this.#t.dialEnded(this.address, error);
  }
}

// ---------------------------------------------------------------------------------------------

class TransportImpl implements Transport {
  readonly options: TransportOptions;
  readonly identity: LocalIdentity;
  readonly selfId: string;
  readonly framePolicy: FramePolicy;
  readonly #links = new Map<string, Link>();
  readonly #dials = new Map<string, Dial>();
  /** Dials waiting for a link to a worker (crossed dials, see {@link TransportImpl.whenLinked}). */
  readonly #linkWaiters = new Map<string, Deferred<Link>[]>();
  readonly #acceptor: Acceptor;
  #addresses: string[] = [];
  #closed = false;
  #epoch = 0;
  /** Claim tokens our dials were issued, by address (bounded, oldest first). */
  readonly #claims = new Map<string, string>();

  constructor(options: TransportOptions) {
    this.options = options;
    this.identity = options.identity;
    this.selfId = options.identity.workerId.toString(16).padStart(16, '0');
    this.framePolicy = options.framePolicy ?? {
      pool: new IncompleteFramePool(DEFAULT_INCOMPLETE_FRAME_BYTES),
      largeFrameBytes: DEFAULT_LARGE_FRAME_BYTES,
      deadlineMs: DEFAULT_FRAME_DEADLINE_MS,
    };
    this.#acceptor = new Acceptor(this);
  }

  get addresses(): readonly string[] {
    return this.#addresses;
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  get linkCount(): number {
    return this.#links.size;
  }

  hasLink(id: string): boolean {
    return this.#links.has(id);
  }

  /** Count a refusal or eviction. */
  refused(reason: RefusalReason): void {
    this.options.onRefusal?.(reason);
  }

  /** A dial stopped for good: tell the handler (never throws into the dial). */
  dialEnded(address: string, error: LanemuxError): void {
    try {
      this.options.handler.dialEnded?.(address, error);
    } catch {
      // The handler reports its own listeners' failures; nothing may break the dial's teardown.
    }
  }

  /**
   * What a lane-0 HELLO to `address` presents: the claim token our last link to that address was
   * issued (a reconnect), else the token we issued to a live link from the node listening there (a
   * crossed dial: it proves we are the node it dialled), else nothing.
   */
  claimFor(address: string): string | undefined {
    const mine = this.#claims.get(address);
    if (mine !== undefined) return mine;
    for (const link of this.#links.values()) {
      if (!link.closed && link.claimToken !== undefined && link.info.address === address) return link.claimToken;
    }
    return undefined;
  }

  /** A live link from the node that advertises `address` (a crossed dial's surviving link). */
  linkFromAddress(address: string): Link | undefined {
    for (const link of this.#links.values()) if (!link.closed && link.info.address === address) return link;
    return undefined;
  }

  rememberClaim(address: string, claim: string): void {
    this.#claims.delete(address);
    this.#claims.set(address, claim);
    // Bounded: the oldest addresses are forgotten first (a forgotten one only waits for a health check).
    if (this.#claims.size > MAX_REMEMBERED_CLAIMS) this.#claims.delete(this.#claims.keys().next().value as string);
  }

  /**
   * Why a lane-0 HELLO from `h.worker` may not form a link, or undefined if it may. A live link to
   * that worker is displaced only by the same peer: with authentication, the same identity; without,
   * a HELLO presenting the claim token the live link was issued, or — for two nodes that dialled
   * each other at once — the token the peer issued to our own dial. Anything else is refused and the
   * live link is checked at once (a restarted peer whose old link is dead gets in on its retry).
   */
  claimRefusal(h: Hello, identity: string | undefined): LanemuxError | undefined {
    const live = this.#links.get(h.worker);
    if (live === undefined || live.closed) return undefined;
    const proof = h.claim !== undefined && h.claim !== '' ? h.claim : undefined;
    // Two nodes that dialled each other at once: the peer proves it with the token it issued to our
    // dial (only the two of them know it); register() then keeps one link on both sides.
    if (proof !== undefined && live.info.instanceId === h.instance && live.dialAddress !== undefined && proof === this.#claims.get(live.dialAddress)) return undefined;
    const otherIdentity = identity !== undefined && live.info.identity !== undefined && live.info.identity !== identity;
    if (!otherIdentity) {
      if (identity !== undefined && live.info.identity === identity) return undefined;
      if (live.info.identity === identity && proof !== undefined && proof === live.claimToken) return undefined;
    }
    this.refused('worker_id_in_use');
    if (otherIdentity) {
      // Retryable like the other refusal: the live link may go away (the dialler cannot tell the two apart).
      return new TransportError('ERR_WORKER_ID_IN_USE', `worker id ${h.worker} is linked to another identity; refusing the claim`, { retryable: true });
    }
    this.options.handler.contested?.(live);
    return new TransportError(
      'ERR_WORKER_ID_IN_USE',
      `worker id ${h.worker} already has a live link and this HELLO does not prove it comes from that peer; the live link is being checked, retry`,
      { retryable: true },
    );
  }

  /**
   * Why a link we dialled to `h.worker` may not form: a live link to that worker exists from another
   * process instance (a crossed dial of the same instance is decided by {@link register}).
   */
  dialRefusal(h: Hello): LanemuxError | undefined {
    const live = this.#links.get(h.worker);
    if (live === undefined || live.closed || live.info.instanceId === h.instance) return undefined;
    this.refused('worker_id_in_use');
    this.options.handler.contested?.(live);
    return new TransportError('ERR_WORKER_ID_IN_USE', `the node we dialled claims worker id ${h.worker}, which has a live link from another process; the live link is being checked, retry`, { retryable: true });
  }

  /**
   * At `maxPeers`: close the link that has been idle longest among those the handler calls idle
   * (no live streams, no traffic for a while), to make room for a new peer. False if none is.
   */
  evictIdleLink(): boolean {
    const victim = this.options.handler.evictable?.();
    if (victim === undefined || victim.closed) return false;
    this.refused('link_evicted');
    victim.close(new TransportError('ERR_EVICTED', `idle link to ${victim.info.id} closed to make room for a new peer`, { retryable: true }));
    return true;
  }

  async listen(): Promise<void> {
    const id = this.identity;
    const addresses = await Promise.all(
      this.options.adapters.map((adapter) =>
        adapter.listen({
          frameLimit: HELLO_FRAME_LIMIT,
          maxMessageSize: id.maxMessageSize,
          accept: (conn: Connection) => this.#acceptor.accept(conn, adapter),
          framePolicy: this.framePolicy,
        }),
      ),
    );
    this.#addresses = addresses.filter((a): a is string => a !== undefined);
  }

  connect(address: string, options: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<PeerLink> {
    if (this.#closed) return Promise.reject(new TransportError('ERR_CLOSED', 'transport is closed'));
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(new TransportError('ERR_ABORTED', `connect to ${address} aborted`, { cause: signal.reason }));
    let dial = this.#dials.get(address);
    let own = false;
    if (dial === undefined || dial.stopped) {
      const scheme = schemeOf(address);
      const adapter = this.options.adapters.find((a) => a.dialSchemes.includes(scheme));
      if (adapter === undefined) {
        return Promise.reject(new TransportError('ERR_UNSUPPORTED_ADDRESS', `no installed transport dials "${scheme}:" addresses (${address})`));
      }
      dial = new Dial(this, adapter, address);
      this.#dials.set(address, dial);
      own = true;
    }
    const d = dial;
    const next = d.nextLink();
    const timeoutMs = options.timeoutMs ?? this.options.connectTimeoutMs;
    d.join();
    const result = new Promise<PeerLink>((resolve, reject) => {
      let waiting = true;
      // A ref'd timer: a pending connect keeps the process alive until it settles (an unref'd one let
      // `await node.connect(…)` end the process with exit code 13 and no output). Cleared on settle.
      const timer = setTimeout(() => {
        const err = new TransportError('ERR_CONNECT', `no link with ${address} within ${timeoutMs} ms`, { retryable: true });
        if (cleanup(err)) reject(err);
      }, timeoutMs);
      const onAbort = (): void => {
        const err = new TransportError('ERR_ABORTED', `connect to ${address} aborted`, { cause: signal?.reason });
        if (cleanup(err)) reject(err);
      };
      /** Stop waiting (once); `error`: this caller gave up. False if already settled. */
      const cleanup = (error?: LanemuxError): boolean => {
        if (!waiting) return false;
        waiting = false;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        d.leave(error);
        return true;
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      next.then(
        (link) => {
          if (cleanup()) resolve(link);
        },
        (error: unknown) => {
          if (cleanup()) reject(error);
        },
      );
    });
    if (own) d.start();
    return result;
  }

  /**
   * Make a link from completed hellos (`onGone` given: we dialled it) and announce it. An older link
   * to the same worker is superseded — except when both links come from the same peer process (same
   * instance id) and were dialled from opposite sides: two nodes that dialled each other at once.
   * Then both sides keep the link dialled by the lower worker id and close the other with
   * `ERR_DUPLICATE_LINK`; if the new link is the one to drop, it is closed without ever being
   * announced and the surviving link is returned instead.
   */
  register(
    hello: Hello,
    lanes: number,
    ports: ConnPort[],
    onGone: ((error: LanemuxError) => void) | undefined,
    claimToken?: string,
    identity?: string,
  ): Link {
    const dialledBy = onGone !== undefined ? this.selfId : hello.worker;
    const old = this.#links.get(hello.worker);
    if (old !== undefined) {
      if (old.info.instanceId === hello.instance && old.dialledBy !== dialledBy) {
        // Fixed-width lower-case hex: string order is numeric order.
        const keep = old.dialledBy < dialledBy ? 'old' : 'new';
        const error = duplicateLink(hello.worker);
        if (keep === 'old') {
          for (const p of ports) {
            p.owner = undefined;
            swallow(p.conn.send(encodeGoaway(error)));
            p.conn.close(error, 'graceful');
          }
          return old;
        }
        old.close(error);
      } else {
        old.close(new TransportError('ERR_PEER_GONE', `superseded by a new connection from worker ${hello.worker} (instance ${hello.instance})`, { retryable: true }));
      }
    }
    const info: PeerIdentity = {
      id: hello.worker,
      workerId: BigInt('0x' + hello.worker),
      instanceId: hello.instance,
      lanes,
      maxMessageSize: hello.maxMessageSize,
      transportKeys: hello.keys,
      protocolVersion: hello.protocolVersion,
      address: hello.address,
      epoch: ++this.#epoch,
      window: hello.window,
      identity,
    };
    const link = new Link(info, dialledBy, ports, this, this.identity.maxMessageSize, onGone, claimToken);
    this.#links.set(hello.worker, link);
    link.setReceiver(this.options.handler.established(link));
    if (!link.closed) {
      this.options.handler.ready?.(link);
      const waiting = this.#linkWaiters.get(hello.worker);
      if (waiting !== undefined && !link.closed) {
        this.#linkWaiters.delete(hello.worker);
        for (const w of waiting) w.resolve(link);
      }
    }
    return link;
  }

  /**
   * The next live link to `worker` (the current one if any): for a dial whose link lost a crossed-dial
   * tie-break while it was still forming. Pending waits reject when the transport closes; callers'
   * own connect deadlines bound how long anyone waits for them.
   */
  whenLinked(worker: string): Promise<Link> {
    const link = this.#links.get(worker);
    if (link !== undefined && !link.closed) return Promise.resolve(link);
    if (this.#closed) return Promise.reject(new TransportError('ERR_CLOSED', 'transport is closed'));
    const d = deferred<Link>();
    d.promise.catch(() => {});
    let list = this.#linkWaiters.get(worker);
    if (list === undefined) {
      list = [];
      this.#linkWaiters.set(worker, list);
    }
    list.push(d);
    return d.promise;
  }

  unregister(link: Link): void {
    if (this.#links.get(link.info.id) === link) this.#links.delete(link.info.id);
  }

  forgetDial(dial: Dial): void {
    if (this.#dials.get(dial.address) === dial) this.#dials.delete(dial.address);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const err = new TransportError('ERR_CLOSED', 'the node is closing');
    // Links first, gracefully: what was admitted on them still leaves before the FIN. Stopping a dial
    // aborts its lane-0 connection, which would drop those bytes; once its link is closed it is a no-op.
    for (const link of [...this.#links.values()]) link.close(err);
    for (const dial of [...this.#dials.values()]) dial.stop(err);
    for (const list of this.#linkWaiters.values()) for (const w of list) w.reject(err);
    this.#linkWaiters.clear();
    this.#acceptor.close();
    await Promise.all(this.options.adapters.map((a) => a.close()));
  }
}

/** Most addresses whose claim token a node remembers. */
const MAX_REMEMBERED_CLAIMS = 4096;

/** `tcp://h:p` → `tcp`. */
function schemeOf(address: string): string {
  const i = address.indexOf('://');
  return i < 0 ? '' : address.slice(0, i).toLowerCase();
}
