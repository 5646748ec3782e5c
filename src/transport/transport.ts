/**
 * The peer-level transport, implemented once for every adapter: the hello exchange on each lane
 * connection, grouping 1..16 lanes into one {@link PeerLink}, epochs, superseding a stale link from the
 * same worker, GOAWAY reasons, and reconnects (a reconnecting adapter's, or the dial's own re-dial).
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
import type { LanemuxError } from '../errors.ts';
import { Acceptor } from './acceptor.ts';
import type { Authenticate, CredentialSource } from './auth.ts';
import { swallow, type ConnPort } from './conn-port.ts';
import { Dial } from './dial.ts';
import { TransportError } from './errors.ts';
import {
  DEFAULT_FRAME_DEADLINE_MS,
  DEFAULT_INCOMPLETE_FRAME_BYTES,
  DEFAULT_LARGE_FRAME_BYTES,
  IncompleteFramePool,
  type FramePolicy,
} from './frame-pool.ts';
import { encodeGoaway, type Hello } from './hello.ts';
import { Link, duplicateLink } from './link.ts';
import {
  HELLO_FRAME_LIMIT,
  type ConnectOptions,
  type Connection,
  type DialBackoff,
  type LinkHandler,
  type LocalIdentity,
  type PeerIdentity,
  type PeerLink,
  type RedialEvent,
  type Transport,
  type TransportAdapter,
} from './port.ts';
import { resolveReconnect, type ReconnectPolicy } from './reconnect.ts';
import { deferred, type Deferred } from '../runtime/deferred.ts';
import { systemRuntime, type Runtime } from '../runtime/runtime.ts';

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
  /** Let reconnecting adapters keep a dial alive after its link dies (a `connect` may say otherwise). */
  readonly reconnect: boolean;
  /** Bounds on incomplete frames, handed to every adapter. */
  readonly framePolicy?: FramePolicy;
  /** Authenticates inbound links of adapters that have no `authenticate` of their own. */
  readonly authenticate?: Authenticate | undefined;
  /** Credential presented by dials of adapters that have no `credential` of their own. */
  readonly credential?: CredentialSource | undefined;
  /** Counts refusals and evictions (bounded labels: the reason). */
  readonly onRefusal?: ((reason: RefusalReason) => void) | undefined;
  /** Clock, timers and randomness of the transport and its adapters. Defaults to the current runtime's. */
  readonly runtime?: Runtime | undefined;
}

/**
 * Why the transport refused or evicted a connection, as counted in metrics:
 * `unauthenticated` (the hook refused), `worker_id_in_use` (a HELLO claimed a live link's worker id
 * without proof), `handshake_evicted` (the oldest connection in its hello made room for a new one),
 * `link_evicted` (an idle link made room for a new peer), `frame_deadline` (counted by adapters).
 */
export type RefusalReason =
  | 'unauthenticated'
  | 'worker_id_in_use'
  | 'handshake_evicted'
  | 'link_evicted'
  | 'frame_deadline';

/** Create the peer-level transport over some adapters. */
export function createTransport(options: TransportOptions): Transport {
  return new TransportImpl(options);
}

/** The peer-level transport: its links by worker, its dials by address, and the acceptor. */
export class TransportImpl implements Transport {
  readonly options: TransportOptions;
  readonly identity: LocalIdentity;
  readonly selfId: string;
  readonly framePolicy: FramePolicy;
  /** Clock, timers and randomness: the hello and GOAWAY timers, the adapters' connections. */
  readonly runtime: Runtime;
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
    this.runtime = options.runtime ?? systemRuntime();
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
  dialEnded(address: string, error: LanemuxError, worker: string | undefined): void {
    try {
      this.options.handler.dialEnded?.(address, error, worker);
    } catch {
      // The handler reports its own listeners' failures; nothing may break the dial's teardown.
    }
  }

  /** A dial is trying again: tell the handler (never throws into the dial). */
  reconnecting(event: RedialEvent): void {
    try {
      this.options.handler.reconnecting?.(event);
    } catch {
      // As for dialEnded: the handler reports its own listeners' failures.
    }
  }

  dialing(address: string): boolean {
    const dial = this.#dials.get(address);
    return dial !== undefined && !dial.stopped;
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
    if (
      proof !== undefined &&
      live.info.instanceId === h.instance &&
      live.dialAddress !== undefined &&
      proof === this.#claims.get(live.dialAddress)
    )
      return undefined;
    const otherIdentity = identity !== undefined && live.info.identity !== undefined && live.info.identity !== identity;
    if (!otherIdentity) {
      if (identity !== undefined && live.info.identity === identity) return undefined;
      if (live.info.identity === identity && proof !== undefined && proof === live.claimToken) return undefined;
    }
    this.refused('worker_id_in_use');
    if (otherIdentity) {
      // Retryable like the other refusal: the live link may go away (the dialler cannot tell the two apart).
      return new TransportError(
        'ERR_WORKER_ID_IN_USE',
        `worker id ${h.worker} is linked to another identity; refusing the claim`,
        { retryable: true },
      );
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
    return new TransportError(
      'ERR_WORKER_ID_IN_USE',
      `the node we dialled claims worker id ${h.worker}, which has a live link from another process; the live link is being checked, retry`,
      { retryable: true },
    );
  }

  /**
   * At `maxPeers`: close the link that has been idle longest among those the handler calls idle
   * (no live streams, no traffic for a while), to make room for a new peer. False if none is.
   */
  evictIdleLink(): boolean {
    const victim = this.options.handler.evictable?.();
    if (victim === undefined || victim.closed) return false;
    this.refused('link_evicted');
    victim.close(
      new TransportError('ERR_EVICTED', `idle link to ${victim.info.id} closed to make room for a new peer`, {
        retryable: true,
      }),
    );
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
          runtime: this.runtime,
        }),
      ),
    );
    this.#addresses = addresses.filter((a): a is string => a !== undefined);
  }

  connect(address: string, options: ConnectOptions = {}): Promise<PeerLink> {
    if (this.#closed) return Promise.reject(new TransportError('ERR_CLOSED', 'transport is closed'));
    let reconnect: ReconnectPolicy | false | undefined;
    try {
      reconnect = resolveReconnect(options.reconnect);
    } catch (error) {
      return Promise.reject(error);
    }
    const signal = options.signal;
    if (signal?.aborted)
      return Promise.reject(
        new TransportError('ERR_ABORTED', `connect to ${address} aborted`, { cause: signal.reason }),
      );
    let dial = this.#dials.get(address);
    let own = false;
    if (dial === undefined || dial.stopped) {
      const scheme = schemeOf(address);
      const adapter = this.options.adapters.find((a) => a.dialSchemes.includes(scheme));
      if (adapter === undefined) {
        return Promise.reject(
          new TransportError(
            'ERR_UNSUPPORTED_ADDRESS',
            `no installed transport dials "${scheme}:" addresses (${address})`,
          ),
        );
      }
      dial = new Dial(this, adapter, address, reconnect, backoffOf(options.reconnect, reconnect));
      this.#dials.set(address, dial);
      own = true;
    } else {
      dial.setPolicy(reconnect, backoffOf(options.reconnect, reconnect));
    }
    const d = dial;
    const next = d.nextLink();
    const timeoutMs = options.timeoutMs ?? this.options.connectTimeoutMs;
    const rt = this.runtime;
    d.join();
    const result = new Promise<PeerLink>((resolve, reject) => {
      let waiting = true;
      // A ref'd timer: a pending connect keeps the process alive until it settles (an unref'd one let
      // `await node.connect(…)` end the process with exit code 13 and no output). Cleared on settle.
      const timer = rt.setTimer(
        () => {
          const err = new TransportError('ERR_CONNECT', `no link with ${address} within ${timeoutMs} ms`, {
            retryable: true,
          });
          if (cleanup(err)) reject(err);
        },
        timeoutMs,
        true,
      );
      const onAbort = (): void => {
        const err = new TransportError('ERR_ABORTED', `connect to ${address} aborted`, { cause: signal?.reason });
        if (cleanup(err)) reject(err);
      };
      /** Stop waiting (once); `error`: this caller gave up. False if already settled. */
      const cleanup = (error?: LanemuxError): boolean => {
        if (!waiting) return false;
        waiting = false;
        rt.clearTimer(timer);
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
    dialAddress?: string,
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
        old.close(
          new TransportError(
            'ERR_PEER_GONE',
            `superseded by a new connection from worker ${hello.worker} (instance ${hello.instance})`,
            { retryable: true },
          ),
        );
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
    // Before the handler hears of the link: it reports the address the link was dialled at.
    link.dialAddress = dialAddress;
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

/** The back-off a `reconnect` policy object asked for (not `true`, which leaves an adapter its own). */
function backoffOf(option: unknown, policy: ReconnectPolicy | false | undefined): DialBackoff | undefined {
  if (typeof option !== 'object' || option === null || policy === undefined || policy === false) return undefined;
  return {
    initialDelayMs: policy.initialDelayMs,
    jitterMs: policy.jitterMs,
    factor: policy.factor,
    maxDelayMs: policy.maxDelayMs,
  };
}
