/**
 * The dialler side of the hello (docs/protocol.md §3.3): one dial per address, shared by every
 * `connect` to it; lane 0 first, then lanes 1..L-1, early messages buffered (bounded) until the link
 * is established; every reconnect starts a new session (docs/protocol.md §3.5). A reconnecting
 * adapter (WebSocket, WebTransport) re-opens lane 0 by itself; for the others a dial with a
 * {@link ReconnectPolicy} re-dials lane 0 here, with jittered exponential back-off on the runtime.
 *
 * A little over 600 lines, and kept whole: it is one state machine, the dial of one address (lanes
 * dialled → HELLOs → established → lost → re-dialled or stopped), every step on the same per-dial state;
 * what stands alone is beside it (the back-off arithmetic in `reconnect.ts`, the HELLO codec in `hello.ts`).
 *
 * @packageDocumentation
 */
import { ConfigError, LanemuxError } from '../errors.ts';
import { MAX_CREDENTIAL_LENGTH } from './auth.ts';
import { ConnPort, swallow, type HandshakeOwner } from './conn-port.ts';
import { TransportError, asTransportError, describeThrown } from './errors.ts';
import { failDial } from './fail-dial.ts';
import { KIND_GOAWAY, decodeGoaway, decodeHello, encodeGoaway, encodeHello, type Hello } from './hello.ts';
import { duplicateLink, remoteGoaway, type Link } from './link.ts';
import {
  HELLO_FRAME_LIMIT,
  type Connection,
  type DialBackoff,
  type DialEvents,
  type DialHandle,
  type DialRequest,
  type TransportAdapter,
} from './port.ts';
import { reconnectDelay, type ReconnectPolicy } from './reconnect.ts';
import { deferred, type Deferred } from '../runtime/deferred.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import type { TransportImpl } from './transport.ts';

/** Codes after which a dial never retries: the peer will refuse us again the same way (or our own configuration is wrong). */
const TERMINAL_CODES: ReadonlySet<string> = new Set([
  'ERR_VERSION_MISMATCH',
  'ERR_HANDSHAKE',
  'ERR_MALFORMED_ENVELOPE',
  'ERR_DUPLICATE_LINK',
  'ERR_UNAUTHENTICATED',
  'ERR_INVALID_CONFIG',
]);

/** Whether lanemux's own re-dial may try again after `error` (a terminal refusal or a local close may not). */
function retryable(error: LanemuxError): boolean {
  if (error.code === 'ERR_CLOSED') return false;
  return !TERMINAL_CODES.has(error.code) || error.retryable;
}

/** A dialler's link-attempt number: 53 random bits (never a guessable counter), nonzero. */
function randomSession(rt: Runtime): number {
  const b = new Uint8Array(7);
  rt.randomBytes(b);
  const n =
    (b[0]! & 0x1f) * 2 ** 48 +
    b[1]! * 2 ** 40 +
    b[2]! * 2 ** 32 +
    ((b[3]! << 24) >>> 0) +
    (b[4]! << 16) +
    (b[5]! << 8) +
    b[6]!;
  return n === 0 ? 1 : n;
}

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

/** The links to one address: dials lane by lane, re-dials on reconnect, until stopped. */
export class Dial implements HandshakeOwner {
  readonly address: string;
  readonly #t: TransportImpl;
  readonly #rt: Runtime;
  readonly #adapter: TransportAdapter;
  /** Ask the adapter to keep lane 0 alive (`DialRequest.reconnect`). */
  readonly #reconnect: boolean;
  /** lanemux's own re-dial, for an adapter that does not reconnect by itself; undefined: none. */
  #policy: ReconnectPolicy | undefined;
  #retryTimer: TimerHandle | undefined;
  /** Back-off exponent: failed attempts since the last link formed. */
  #step = 0;
  /** Attempts in a row that formed no link (bounded by `maxRetries`). */
  #failures = 0;
  /** When the link was lost (or the first retry began); undefined while linked. */
  #downSince: number | undefined;
  /** Lane 0 opened a connection at least once: the address was reachable. */
  #everOpened = false;
  /** A link formed at least once: later losses are re-dialled, and no caller's deadline stops the dial. */
  #everLinked = false;
  #lane0: DialHandle | undefined;
  #attempt: Attempt | undefined;
  #link: Link | undefined;
  /** Waiters for the next established link (connect calls). */
  #next: Deferred<Link> | undefined;
  /** `connect` calls currently waiting on this dial (they share it: same address). */
  #waiters = 0;
  /** The back-off a `reconnect` policy object gave, for an adapter that re-dials by itself. */
  #backoff: DialBackoff | undefined;
  /** Worker id of the peer, once a lane-0 answer named it. */
  #remoteWorker: string | undefined;
  #stopped = false;

  /** `reconnect`: the connect's option, resolved (undefined: not given). */
  constructor(
    t: TransportImpl,
    adapter: TransportAdapter,
    address: string,
    reconnect: ReconnectPolicy | false | undefined,
    backoff?: DialBackoff,
  ) {
    this.#t = t;
    this.#rt = t.runtime;
    this.#adapter = adapter;
    this.address = address;
    this.#reconnect = reconnect === undefined ? t.options.reconnect : reconnect !== false;
    this.setPolicy(reconnect, backoff);
  }

  /** The re-dial policy of a later `connect` that gave `reconnect` (an adapter that reconnects keeps its own). */
  setPolicy(reconnect: ReconnectPolicy | false | undefined, backoff?: DialBackoff): void {
    // An adapter that reconnects by itself takes the back-off a policy object gave (DialRequest.backoff).
    if (backoff !== undefined) this.#backoff = backoff;
    if (reconnect === undefined || this.#adapter.reconnects === true) return;
    this.#policy = reconnect === false ? undefined : reconnect;
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
    // A dial that keeps a link up outlives the callers waiting for its next link.
    if (error !== undefined && this.#waiters === 0 && this.#link === undefined && !this.#keepsUp()) this.stop(error);
  }

  /** A link formed once and the dial re-dials after a loss (by itself or through the adapter). */
  #keepsUp(): boolean {
    return this.#everLinked && (this.#policy !== undefined || (this.#reconnect && this.#adapter.reconnects === true));
  }

  #dialLane(lane: number): DialHandle {
    const id = this.#t.options.identity;
    const request: DialRequest = {
      address: this.address,
      lane,
      frameLimit: HELLO_FRAME_LIMIT,
      maxMessageSize: id.maxMessageSize,
      reconnect: lane === 0 && this.#reconnect,
      ...(lane === 0 && this.#backoff !== undefined ? { backoff: this.#backoff } : {}),
      framePolicy: this.#t.framePolicy,
      runtime: this.#rt,
    };
    let handle: DialHandle | undefined;
    // Adapters never report from inside dial(); one that does is deferred until its handle is known.
    const withHandle = (fn: (h: DialHandle) => void): void => {
      if (handle !== undefined) fn(handle);
      else queueMicrotask(() => handle !== undefined && fn(handle));
    };
    const events: DialEvents = {
      open: (conn) => withHandle((h) => this.#onOpen(lane, conn, h)),
      fail: (error) => withHandle((h) => this.#onDialFail(lane, error, h)),
    };
    try {
      handle = this.#adapter.dial(request, events);
    } catch (cause) {
      // An adapter that throws fails the dial as a refusal would, so the connect settles at once.
      handle = failDial(
        events,
        asTransportError('ERR_CONNECT', `the ${this.#adapter.name} adapter threw dialling ${this.address}`, cause),
      );
    }
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
      this.#everOpened = true;
      if (attempt !== undefined)
        this.#failAttempt(new TransportError('ERR_HANDSHAKE', 'lane 0 reconnected during a hello'));
      const session = randomSession(this.#rt);
      attempt = {
        session,
        ports: [],
        handles: [],
        remote: undefined,
        lanes: 0,
        answered: 0,
        early: [],
        earlyBytes: 0,
        timer: this.#rt.setTimer(() => {
          if (this.#attempt?.session === session) {
            this.#failAttempt(
              new TransportError(
                'ERR_HANDSHAKE',
                `hello with ${this.address} did not complete within ${this.#t.options.helloTimeoutMs} ms`,
                { retryable: true },
              ),
            );
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
      this.#failAttempt(
        new TransportError(
          'ERR_CONNECT',
          `the credential function for ${this.address} threw: ${describeThrown(cause)}`,
          { cause, retryable: true },
        ),
      );
      return;
    }
    if (typeof got === 'string') {
      this.#sendHello(port, current, got);
      return;
    }
    Promise.resolve(got).then(
      (credential) => {
        if (this.#attempt === current && current.ports[0] === port && !this.#stopped)
          this.#sendHello(port, current, credential);
      },
      (cause: unknown) => {
        if (this.#attempt === current)
          this.#failAttempt(
            new TransportError(
              'ERR_CONNECT',
              `the credential function for ${this.address} failed: ${describeThrown(cause)}`,
              { cause, retryable: true },
            ),
          );
      },
    );
  }

  #sendHello(port: ConnPort, attempt: Attempt, credential: unknown): void {
    if (credential !== undefined && (typeof credential !== 'string' || credential.length > MAX_CREDENTIAL_LENGTH)) {
      this.#failAttempt(
        new ConfigError(
          'credential',
          `the credential for ${this.address} must be a string of at most ${MAX_CREDENTIAL_LENGTH} characters, got ${typeof credential === 'string' ? `${credential.length} characters` : typeof credential}`,
        ),
      );
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
        this.#failAttempt(
          new TransportError(
            'ERR_PROTOCOL',
            `more than ${this.#t.options.maxEarlyBytes} bytes arrived before the link with ${this.address} was established`,
          ),
        );
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
      this.#failAttempt(
        new TransportError(
          'ERR_HANDSHAKE',
          `HELLO answer for session ${h.session} lane ${h.lane}, expected session ${attempt.session} lane ${port.lane}`,
        ),
        true,
      );
      return;
    }
    if (port.lane === 0) {
      if (h.worker === this.#t.selfId) {
        // The acceptor refuses a real self-connection itself: our own HELLO coming back is an echo server.
        this.#failAttempt(
          new TransportError(
            'ERR_HANDSHAKE',
            `${this.address} answered with this node's own HELLO (worker ${h.worker}): an echo server, not a lanemux server`,
          ),
          true,
        );
        return;
      }
      if (h.lanes > id.lanes) {
        this.#failAttempt(
          new TransportError('ERR_HANDSHAKE', `peer agreed on ${h.lanes} lanes, more than the ${id.lanes} offered`),
          true,
        );
        return;
      }
      attempt.remote = h;
      attempt.lanes = h.lanes;
      this.#remoteWorker = h.worker;
      if (h.claim !== undefined && h.claim !== '') this.#t.rememberClaim(this.address, h.claim);
    } else {
      const r = attempt.remote as Hello;
      if (h.worker !== r.worker || h.instance !== r.instance || h.lanes !== attempt.lanes) {
        this.#failAttempt(
          new TransportError(
            'ERR_HANDSHAKE',
            `lane ${port.lane} reached another peer than lane 0 (worker ${h.worker})`,
          ),
          true,
        );
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
    this.#rt.clearTimer(attempt.timer);
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
    const link = this.#t.register(
      attempt.remote as Hello,
      attempt.lanes,
      ports,
      (error) => this.#onLinkGone(link, error, attempt),
      undefined,
      undefined,
      this.address,
    );
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
    this.#everLinked = true;
    this.#lane0?.linked?.();
    this.#failures = 0;
    this.#downSince = undefined;
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
    // Every link that formed starts the back-off over (a peer that completed the HELLO is up): a
    // network that blinks often costs one first delay per cut, so streams resume within their window.
    this.#step = 0;
    this.#downSince = this.#rt.now();
    this.#afterLoss(error, false);
  }

  #onDialFail(lane: number, error: LanemuxError, handle: DialHandle): void {
    if (this.#stopped) return;
    if (lane !== 0) {
      if (this.#attempt?.handles[lane] === handle)
        this.#failAttempt(asTransportError('ERR_CONNECT', `lane ${lane} of ${this.address}`, error));
      return;
    }
    if (handle !== this.#lane0) return;
    this.#lane0 = undefined;
    const err = asTransportError('ERR_CONNECT', `cannot connect to ${this.address}`, error);
    // A first connect that cannot reach the address fails at once; a re-dial tries again.
    if (this.#policy !== undefined && this.#everOpened) this.#redial(err, true);
    else this.stop(err);
  }

  /** Abandon the hello in progress. `telling`: send the peer a GOAWAY saying why (it broke the hello). */
  #failAttempt(error: LanemuxError, telling = false): void {
    const attempt = this.#attempt;
    if (attempt === undefined) return;
    this.#attempt = undefined;
    this.#rt.clearTimer(attempt.timer);
    for (let lane = 1; lane < attempt.handles.length; lane++) attempt.handles[lane]?.close();
    for (const p of attempt.ports) {
      if (p === undefined) continue;
      p.owner = undefined;
      if (telling) swallow(p.conn.send(encodeGoaway(error)));
      p.conn.close(error, telling ? 'graceful' : 'abort');
    }
    this.#afterLoss(error, true);
  }

  /** The link was lost, or an attempt failed after lane 0 opened (`failed`): retry or stop. */
  #afterLoss(error: LanemuxError, failed: boolean): void {
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
    if (this.#policy !== undefined) {
      this.#redial(error, failed);
      return;
    }
    // A reconnecting adapter (partysocket) opens lane 0 again by itself after its back-off; every
    // other case ends the dial. connect() keeps waiting across retries until its own deadline.
    // A terminal code marked retryable (a hello that timed out) is worth another try; a local close
    // (`disconnect`) is not.
    if (!this.#reconnect || !this.#adapterReconnects() || !retryable(error)) {
      this.stop(error);
      return;
    }
    if (!failed)
      this.#t.reconnecting({
        address: this.address,
        worker: this.#remoteWorker,
        attempt: undefined,
        delayMs: undefined,
        error,
      });
  }

  /**
   * lanemux's own re-dial: open lane 0 again after a jittered, growing delay, or give up (the
   * policy's bounds, a terminal error). `failed`: an attempt failed (counted against `maxRetries`).
   */
  #redial(error: LanemuxError, failed: boolean): void {
    const p = this.#policy as ReconnectPolicy;
    if (!retryable(error)) {
      this.stop(error);
      return;
    }
    if (failed) this.#failures++;
    const now = this.#rt.now();
    this.#downSince ??= now;
    const down = now - this.#downSince;
    if (this.#failures >= p.maxRetries || down >= p.maxDownMs) {
      this.stop(
        new TransportError(
          'ERR_CONNECT',
          `gave up re-dialling ${this.address} after ${this.#failures} failed attempts over ${Math.round(down)} ms (reconnect maxRetries ${p.maxRetries}, maxDownMs ${p.maxDownMs}): ${error.message}`,
          { cause: error, retryable: true },
        ),
      );
      return;
    }
    // The adapter's one-shot handle is spent; the timer opens a new one.
    this.#lane0?.close();
    this.#lane0 = undefined;
    const delayMs = Math.min(reconnectDelay(p, this.#step, this.#rt), p.maxDownMs - down);
    this.#step++;
    // Unref'd: a waiting connect's own timer keeps the process alive; a re-dial alone must not.
    this.#retryTimer = this.#rt.setTimer(() => {
      this.#retryTimer = undefined;
      if (!this.#stopped) this.#lane0 = this.#dialLane(0);
    }, delayMs);
    this.#t.reconnecting({
      address: this.address,
      worker: this.#remoteWorker,
      attempt: this.#failures + 1,
      delayMs,
      error,
    });
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
      this.#rt.clearTimer(attempt.timer);
      for (let lane = 1; lane < attempt.handles.length; lane++) attempt.handles[lane]?.close();
      for (const p of attempt.ports) {
        if (p === undefined) continue;
        p.owner = undefined;
        p.conn.close(error, 'abort');
      }
    }
    if (this.#retryTimer !== undefined) this.#rt.clearTimer(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#lane0?.close();
    this.#lane0 = undefined;
    const next = this.#next;
    this.#next = undefined;
    next?.reject(error);
    // Last, once the dial is fully down: a listener may connect to the address again at once.
    if (!linked && !this.#t.isClosed && error.code !== 'ERR_DUPLICATE_LINK')
      this.#t.dialEnded(this.address, error, this.#remoteWorker);
  }
}
