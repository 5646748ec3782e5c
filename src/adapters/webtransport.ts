/**
 * WebTransport client adapter on the standard `WebTransport` API: runs unchanged in browsers and in
 * Deno (`--unstable-net`). Dials `https://host:port/path` addresses, such as the ones a Deno server
 * (`webTransportServerTransport` from `lanemux/transport/webtransport-server`) listens on. Node 20
 * and Bun have no WebTransport; Node serves browsers over WebSocket instead.
 *
 * **One session per link, one bidirectional stream per lane.** The lane-0 dial opens a new session;
 * the dials of lanes 1..L-1 that the transport core makes right after the lane-0 HELLO open one
 * stream each on that same session. So a peer costs one QUIC connection (one handshake, one
 * congestion controller, one of Chromium's throttled session slots — Chromium 40069954, 64 pending
 * sessions at most) and lanes are independent QUIC streams: no head-of-line blocking between lanes.
 * Each link gets a fresh session, which bounds the streams a session ever carries to 16: Deno 2.9.6
 * never returns stream credit (denoland/deno#36822), so long-lived sessions must not churn streams.
 * No unidirectional streams are used (client→server ones never reach a Deno server).
 *
 * Framing, the END marker, the closing handshake and admission are in `webtransport-stream.ts`.
 * A session that is not ready within `connectTimeoutMs` is closed and the dial fails with
 * `ERR_CONNECT`. With the messenger's `reconnect` (default true) a dropped link is dialled again after a
 * jittered back-off (a new session, a new hello, a new epoch), like the WebSocket client.
 *
 * **Giving up.** A reconnecting dial stops, and fails with `ERR_CONNECT` saying why (a `connect` waiting
 * on it rejects with that error), after `maxSameFailures` consecutive attempts that failed the same
 * way, or at once on a failure no retry can change: an address the runtime refuses, hashes that are
 * not valid hashes, or a certificate refused while `serverCertificateHashes` is a fixed list (a server
 * restarted with a new development certificate is never accepted again; pass a function instead, and
 * it is called again before every connect and reconnect). Chromium reports every failed handshake as
 * the same "Opening handshake failed." (the net error, such as QUIC_TLS_CERTIFICATE_UNKNOWN, is only in
 * its console), so there a certificate refusal and a server that is down both end the dial after
 * `maxSameFailures` attempts; Deno names certificate failures.
 *
 * @example
 * ```ts
 * // Browser (a secure context: https: or http://127.0.0.1):
 * const hash = { algorithm: 'sha-256', value: hashBytesFromTheServer };
 * const client = await createMessenger({ transports: [webTransportClientTransport({ serverCertificateHashes: [hash] })] });
 * const peer = await client.connect('https://127.0.0.1:4433/lanemux');
 * ```
 *
 * @packageDocumentation
 */
import { backoffDelay, backoffFor } from './backoff.ts';
import { credentialOption, type CredentialSource } from '../transport/auth.ts';
import * as z from '../schema.ts';
import { ConfigError, type LanemuxError } from '../errors.ts';
import { TransportError, asTransportError, describeThrown } from '../transport/errors.ts';
import { admissionSchema } from '../transport/options.ts';
import { parseOptions } from '../validate.ts';
import { int, num, parse } from '../validate.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from '../transport/port.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { WtSessionLanes, WtStreamConn, type WtBidiStream } from './webtransport-stream.ts';

/** One entry of `serverCertificateHashes` (see `dev-cert.ts` to make a certificate and its hash). */
export interface WebTransportHash {
  readonly algorithm: 'sha-256';
  readonly value: BufferSource;
}

/** Options the adapter passes to the `WebTransport` constructor. */
export interface WebTransportInit {
  serverCertificateHashes?: WebTransportHash[];
  congestionControl?: 'default' | 'throughput' | 'low-latency';
  allowPooling?: boolean;
}

/** The part of a WebTransport session this adapter uses (standard API; Deno's is the same). */
export interface WebTransportSession {
  readonly ready: Promise<unknown>;
  readonly closed: Promise<unknown>;
  createBidirectionalStream(): Promise<WtBidiStream>;
  close(info?: { closeCode?: number; reason?: string }): void;
}

/**
 * Where the accepted certificate hashes come from: a fixed list, or a function called before every
 * new session (each connect and reconnect), so a client can fetch the hash of a restarted server's
 * new development certificate. The function may be async; it gets `connectTimeoutMs` to settle.
 */
export type WebTransportHashSource =
  | readonly WebTransportHash[]
  | (() => readonly WebTransportHash[] | Promise<readonly WebTransportHash[]>);

/** A `WebTransport` constructor: the global one by default. */
export type WebTransportConstructor = new (url: string, options?: WebTransportInit) => WebTransportSession;

/** Options of {@link webTransportClientTransport}. */
export interface WebTransportClientTransportOptions {
  /** The WebTransport constructor. Defaults to `globalThis.WebTransport`. */
  readonly WebTransport?: WebTransportConstructor;
  /**
   * Accept a self-signed server certificate with one of these SHA-256 hashes (ECDSA P-256, ≤ 14 days;
   * pass current and next during a rotation; at most 16): a list, or a function (sync or async) called
   * before every connect and reconnect, which picks up a restarted server's new certificate. A
   * function that throws fails that attempt (retried like any other); one that returns something that
   * is not such a list fails the dial with a `ConfigError` (`ERR_INVALID_CONFIG`). Defaults to none: the certificate must be CA-signed.
   */
  readonly serverCertificateHashes?: WebTransportHashSource;
  /** Congestion-control hint for the session. Defaults to `'default'`. */
  readonly congestionControl?: 'default' | 'throughput' | 'low-latency';
  /** Admission is synchronous while fewer bytes than this wait in the stream writer. Defaults to 1 MiB. */
  readonly highWaterMark?: number;
  /** Bytes that may wait for admission per lane before a send is refused. Defaults to 8 MiB. */
  readonly maxPendingBytes?: number;
  /** Time allowed for a session to become ready (and for a lane's stream to open). Defaults to 10,000 ms. */
  readonly connectTimeoutMs?: number;
  /** After a graceful close, how long to wait for the server's END before closing the session. Defaults to 2,000 ms. */
  readonly closeGraceMs?: number;
  /** Smallest reconnect delay before jitter (a messenger with `reconnect: true`, the default). Defaults to 500 ms. */
  readonly minReconnectionDelay?: number;
  /** Random extra added to the smallest delay, drawn per attempt. Defaults to 2,500 ms. */
  readonly reconnectionJitter?: number;
  /** Largest reconnect delay. Defaults to 30,000 ms. */
  readonly maxReconnectionDelay?: number;
  /** Growth of the delay per failed attempt. Defaults to 1.3. */
  readonly reconnectionDelayGrowFactor?: number;
  /** Consecutive failed attempts before a reconnecting dial gives up. Defaults to Infinity. */
  readonly maxRetries?: number;
  /**
   * Consecutive attempts that failed the same way (the same certificate refusal, the same timeout,
   * the same error message) before a reconnecting dial gives up with `ERR_CONNECT`; any success
   * starts the count over. 1..Infinity. Defaults to 5.
   */
  readonly maxSameFailures?: number;
  /**
   * Credential presented in the HELLO of every connect and reconnect: a string, or a function called
   * each time (a browser refreshes a short-lived token). Defaults to the messenger's `credential`.
   */
  readonly credential?: CredentialSource;
}

const hashSchema = z.object({
  algorithm: z.literal('sha-256'),
  value: z.custom<BufferSource>((v) => ArrayBuffer.isView(v) || v instanceof ArrayBuffer, 'not a BufferSource'),
});

const hashesSchema = z.array(hashSchema).check(z.maxLength(16));

type HashFunction = () => readonly WebTransportHash[] | Promise<readonly WebTransportHash[]>;

const optionsSchema = z.object({
  WebTransport: z.optional(
    z.custom<WebTransportConstructor>((v) => typeof v === 'function', 'not a WebTransport constructor'),
  ),
  serverCertificateHashes: z.optional(
    z.union([
      hashesSchema,
      z.custom<HashFunction>((v) => typeof v === 'function', 'not a list of hashes or a function'),
    ]),
  ),
  congestionControl: z._default(z.enum(['default', 'throughput', 'low-latency']), 'default'),
  ...admissionSchema,
  connectTimeoutMs: z._default(int(1, 600_000), 10_000),
  closeGraceMs: z._default(int(0, 600_000), 2_000),
  minReconnectionDelay: z._default(num(0, 600_000), 500),
  reconnectionJitter: z._default(num(0, 600_000), 2_500),
  maxReconnectionDelay: z._default(num(0, 3_600_000), 30_000),
  reconnectionDelayGrowFactor: z._default(num(1, 10), 1.3),
  maxRetries: z._default(num(0), Number.POSITIVE_INFINITY),
  maxSameFailures: z._default(num(1), 5),
  ...credentialOption,
});

type Resolved = z.output<typeof optionsSchema>;

/** Create a WebTransport client adapter (browsers, Deno). Dials `https://` addresses; never listens. */
export function webTransportClientTransport(options: WebTransportClientTransportOptions = {}): TransportAdapter {
  const o = parseOptions(optionsSchema, options, 'webTransportClientTransport');
  const ctor = o.WebTransport ?? (globalThis as { WebTransport?: WebTransportConstructor }).WebTransport;
  if (ctor === undefined) {
    throw new ConfigError(
      'WebTransport',
      'this runtime has no WebTransport (Node and Bun lack it; Deno needs --unstable-net; ' +
        'browsers need a secure context). Use webSocketClientTransport there, or pass `WebTransport`.',
      { where: 'webTransportClientTransport' },
    );
  }
  return new WtClientAdapter(o, ctor);
}

class WtClientAdapter implements TransportAdapter {
  readonly name = 'webtransport-client';
  readonly dialSchemes = ['https'] as const;
  readonly reconnects = true;
  readonly credential: CredentialSource | undefined;
  readonly #o: Resolved;
  readonly #ctor: WebTransportConstructor;
  /** The session of the latest lane-0 dial per address: later lanes of that link join it. */
  readonly #current = new Map<string, WtSessionLanes<WebTransportSession>>();
  readonly #sessions = new Set<WtSessionLanes<WebTransportSession>>();
  readonly #pending = new Set<WebTransportSession>();
  readonly #redials = new Set<Redial>();
  #closed = false;

  constructor(o: Resolved, ctor: WebTransportConstructor) {
    this.#o = o;
    this.credential = o.credential;
    this.#ctor = ctor;
  }

  async listen(_host: ListenHost): Promise<string | undefined> {
    return undefined;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    if (request.reconnect && request.lane === 0 && !this.#closed) {
      const redial = new Redial(request, events, this.#o, () => this.#openSession(request), this.#redials);
      return { close: () => redial.stop(), linked: () => redial.linked() };
    }
    let cancelled = false;
    let conn: WtStreamConn | undefined;
    const fail = (error: LanemuxError): void => {
      if (cancelled) return;
      cancelled = true;
      events.fail(error);
    };
    if (this.#closed) {
      queueMicrotask(() => fail(new TransportError('ERR_CLOSED', 'webtransport client transport is closed')));
      return {
        close: () => {
          cancelled = true;
        },
      };
    }
    const existing = request.lane === 0 ? undefined : this.#current.get(request.address);
    const opened = existing?.usable === true ? this.#openOn(existing, request) : this.#openSession(request);
    opened.then(
      (c) => {
        if (cancelled) {
          c.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort');
          return;
        }
        conn = c;
        events.open(c);
      },
      (e: unknown) =>
        fail(
          failureKind(e) === 'certificate'
            ? certificateRefused(
                request.address,
                e,
                this.#o.serverCertificateHashes !== undefined,
                'check serverCertificateHashes',
              )
            : asTransportError('ERR_CONNECT', `webtransport to ${request.address} (lane ${request.lane})`, e),
        ),
    );
    return {
      close: () => {
        if (conn !== undefined) conn.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort');
        cancelled = true;
      },
    };
  }

  /** A new session for a new link (lane 0), then its first stream. */
  async #openSession(request: DialRequest): Promise<WtStreamConn> {
    const o = this.#o;
    const init: WebTransportInit = { allowPooling: false };
    const rt = request.runtime;
    const hashes = await this.#certificateHashes(request.address, rt);
    if (hashes !== undefined) init.serverCertificateHashes = hashes;
    if (o.congestionControl !== 'default') init.congestionControl = o.congestionControl;
    let session: WebTransportSession;
    try {
      session = new this.#ctor(request.address, init);
    } catch (e) {
      throw new TransportError(
        'ERR_UNSUPPORTED_ADDRESS',
        `not a WebTransport URL (https://host:port/path): ${request.address}`,
        { cause: e },
      );
    }
    // Neither promise may reject unhandled, whatever happens below.
    session.closed.catch(() => {});
    session.ready.catch(() => {});
    this.#pending.add(session);
    try {
      await this.#timed(rt, session.ready, `webtransport session to ${request.address} not ready`, session);
    } finally {
      this.#pending.delete(session);
    }
    if (this.#closed) {
      session.close({ closeCode: 0, reason: 'closed' });
      throw new TransportError('ERR_CLOSED', 'webtransport client transport is closed');
    }
    const lanes = new WtSessionLanes(session, request.address, o.closeGraceMs, rt, () => {
      this.#sessions.delete(lanes);
      if (this.#current.get(request.address) === lanes) this.#current.delete(request.address);
    });
    this.#sessions.add(lanes);
    this.#current.set(request.address, lanes);
    return this.#openOn(lanes, request);
  }

  /** The hashes for a new session: the fixed list, or what the function returns now (checked, bounded in time). */
  async #certificateHashes(address: string, rt: Runtime): Promise<WebTransportHash[] | undefined> {
    const source = this.#o.serverCertificateHashes;
    if (source === undefined) return undefined;
    const copy = (list: readonly WebTransportHash[]): WebTransportHash[] =>
      list.map((h) => ({ algorithm: h.algorithm, value: h.value }));
    if (typeof source !== 'function') return copy(source);
    let got: unknown;
    try {
      // Called from a promise so that a function that throws fails the attempt like one that rejects.
      got = await this.#timed(
        rt,
        Promise.resolve().then(source),
        `serverCertificateHashes() for ${address} did not settle`,
      );
    } catch (cause) {
      if (cause instanceof TransportError && cause.code === 'ERR_CONNECT') throw tagged(cause, 'hashes');
      throw tagged(
        new TransportError(
          'ERR_CONNECT',
          `webtransport to ${address}: serverCertificateHashes() failed: ${describeThrown(cause)}`,
          { cause, retryable: true },
        ),
        'hashes',
      );
    }
    const parsed = parse(hashesSchema, got);
    if (!parsed.success) {
      throw new ConfigError(
        'serverCertificateHashes',
        `webtransport to ${address}: serverCertificateHashes() must return at most 16 { algorithm: 'sha-256', value: BufferSource } entries: ${z.prettifyError(parsed.error)}`,
        { where: 'webTransportClientTransport' },
      );
    }
    return copy(parsed.data);
  }

  /** One more lane of a link: a new bidirectional stream on its session. */
  async #openOn(lanes: WtSessionLanes<WebTransportSession>, request: DialRequest): Promise<WtStreamConn> {
    lanes.opening(1);
    let stream: WtBidiStream;
    try {
      stream = await this.#timed(
        lanes.runtime,
        lanes.session.createBidirectionalStream(),
        `webtransport stream to ${request.address} not opened`,
      );
    } catch (e) {
      lanes.opening(-1);
      // A session that cannot open a lane's stream cannot carry the link.
      lanes.close();
      throw e;
    }
    if (!lanes.usable) {
      lanes.opening(-1);
      throw new TransportError(
        'ERR_PEER_GONE',
        `webtransport session to ${request.address} closed while lane ${request.lane} opened`,
        { retryable: true },
      );
    }
    const conn = new WtStreamConn(
      stream,
      request.address,
      request.frameLimit,
      { highWaterMark: this.#o.highWaterMark, maxPendingBytes: this.#o.maxPendingBytes },
      lanes,
      request.framePolicy,
    );
    lanes.opening(-1);
    return conn;
  }

  /** `p`, or ERR_CONNECT after `connectTimeoutMs` on `rt`'s clock (closing `session` if given). */
  #timed<T>(rt: Runtime, p: Promise<T>, what: string, session?: WebTransportSession): Promise<T> {
    const ms = this.#o.connectTimeoutMs;
    return new Promise<T>((resolve, reject) => {
      const timer = rt.setTimer(() => {
        if (session !== undefined) {
          try {
            session.close({ closeCode: 0, reason: 'timeout' });
          } catch {
            // Not open yet in some runtimes: closing is best effort.
          }
        }
        reject(tagged(new TransportError('ERR_CONNECT', `${what} within ${ms} ms`, { retryable: true }), 'timeout'));
      }, ms);
      p.then(
        (v) => {
          rt.clearTimer(timer);
          resolve(v);
        },
        (e: unknown) => {
          rt.clearTimer(timer);
          reject(e);
        },
      );
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const r of [...this.#redials]) r.stop();
    for (const s of this.#pending) {
      try {
        s.close({ closeCode: 0, reason: 'closed' });
      } catch {
        // Best effort.
      }
    }
    // Sessions close once their lanes' closing handshake is done (links were closed gracefully
    // before adapters), or after closeGraceMs.
    const sessions = [...this.#sessions];
    for (const s of sessions) s.update();
    await Promise.all(
      sessions.map((s) => withDeadline(s.runtime, s.closedPromise, this.#o.closeGraceMs + 100, () => s.close())),
    );
  }
}

/**
 * A lane-0 dial that survives connection loss: after its connection closes (or an attempt fails) it
 * opens a new session after a jittered, growing delay, and reports the new connection through `open`
 * again; the transport core then runs a new hello (a new link and epoch). The delay is
 * `(minReconnectionDelay + random·reconnectionJitter)·reconnectionDelayGrowFactor^n`, at most
 * `maxReconnectionDelay`; a link that formed starts the back-off over. The timer holds
 * the process open only until a session first opened (a `connect` waits on the dial until then).
 * It gives up (see the file comment) after `maxRetries` failures, `maxSameFailures` alike, or one
 * that cannot pass.
 */
class Redial {
  readonly #request: DialRequest;
  readonly #rt: Runtime;
  readonly #events: DialEvents;
  readonly #o: Resolved;
  readonly #open: () => Promise<WtStreamConn>;
  readonly #registry: Set<Redial>;
  #conn: WtStreamConn | undefined;
  #timer: TimerHandle | undefined;
  #stopped = false;
  #failures = 0;
  /** The kind of the last failure, and how many in a row were of that kind. */
  #lastKind = '';
  #sameKind = 0;
  #restarts = 0;
  /** A link formed over a session of this dial since the last retry was scheduled. */
  #linkedSinceRetry = false;
  #everOpened = false;

  constructor(
    request: DialRequest,
    events: DialEvents,
    o: Resolved,
    open: () => Promise<WtStreamConn>,
    registry: Set<Redial>,
  ) {
    this.#request = request;
    this.#rt = request.runtime;
    this.#events = events;
    this.#o = o;
    this.#open = open;
    this.#registry = registry;
    registry.add(this);
    this.#attempt();
  }

  #attempt(): void {
    this.#open().then(
      (conn) => {
        if (this.#stopped) {
          conn.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort');
          return;
        }
        this.#failures = 0;
        this.#sameKind = 0;
        this.#lastKind = '';
        this.#everOpened = true;
        this.#conn = conn;
        conn.onClosed = () => {
          if (this.#conn === conn) this.#conn = undefined;
          this.#schedule();
        };
        this.#events.open(conn);
      },
      (e: unknown) => {
        if (this.#stopped) return;
        const address = this.#request.address;
        const kind = failureKind(e);
        this.#sameKind = kind === this.#lastKind ? this.#sameKind + 1 : 1;
        this.#lastKind = kind;
        const fixedHashes = typeof this.#o.serverCertificateHashes !== 'function';
        let error: LanemuxError | undefined;
        if (kind === 'fatal') error = asTransportError('ERR_CONNECT', `webtransport to ${address}`, e);
        else if (kind === 'certificate' && fixedHashes) {
          error = certificateRefused(
            address,
            e,
            this.#o.serverCertificateHashes !== undefined,
            'serverCertificateHashes is a fixed list, so no retry can change that; pass a function that returns the current hashes',
          );
        } else if (this.#sameKind >= this.#o.maxSameFailures) {
          error =
            kind === 'certificate'
              ? certificateRefused(
                  address,
                  e,
                  true,
                  `serverCertificateHashes() returned no matching hash ${this.#sameKind} times in a row; giving up`,
                )
              : new TransportError(
                  'ERR_CONNECT',
                  `webtransport to ${address}: ${this.#sameKind} consecutive attempts failed the same way (${describeThrown(e)}); giving up`,
                  { cause: e, retryable: true },
                );
        } else if (++this.#failures > this.#o.maxRetries) {
          error = asTransportError('ERR_CONNECT', `webtransport to ${address}: ${this.#failures} attempts failed`, e);
        }
        if (error !== undefined) {
          this.stop();
          this.#events.fail(error);
          return;
        }
        this.#schedule();
      },
    );
  }

  #schedule(): void {
    if (this.#stopped || this.#timer !== undefined) return;
    // A link that formed starts the back-off over (a session lost before its HELLO keeps it growing).
    if (this.#linkedSinceRetry) this.#restarts = 0;
    this.#linkedSinceRetry = false;
    const delay = backoffDelay(backoffFor(this.#request, this.#o), this.#restarts, this.#rt);
    this.#restarts++;
    const retry = (): void => {
      this.#timer = undefined;
      if (!this.#stopped) this.#attempt();
    };
    // Until a session first opened, a connect waits on this dial (its deadline stops the dial):
    // hold the process open so that connect settles. A reconnecting link must not hold it.
    this.#timer = this.#rt.setTimer(retry, delay, !this.#everOpened);
  }

  /** The transport core formed a link over the current session. */
  linked(): void {
    this.#linkedSinceRetry = true;
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#registry.delete(this);
    if (this.#timer !== undefined) this.#rt.clearTimer(this.#timer);
    const conn = this.#conn;
    this.#conn = undefined;
    conn?.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort');
  }
}

/** Kinds of failure the adapter itself raises (the rest are classified from the runtime's error). */
const KINDS = new WeakMap<object, string>();

function tagged<E extends object>(error: E, kind: string): E {
  KINDS.set(error, kind);
  return error;
}

/**
 * What an attempt's failure says, for counting failures "of the same kind": `fatal` (no retry can
 * change it), `certificate` (the runtime named a certificate refusal: Deno's "invalid peer
 * certificate: UnknownIssuer"), `timeout`, `hashes`, or the error's message with digits removed.
 */
function failureKind(e: unknown): string {
  if (typeof e === 'object' && e !== null) {
    const own = KINDS.get(e);
    if (own !== undefined) return own;
    const code = (e as { code?: unknown }).code;
    if (code === 'ERR_UNSUPPORTED_ADDRESS' || code === 'ERR_INVALID_CONFIG' || code === 'ERR_CLOSED') return 'fatal';
  }
  const text = describeThrown(e);
  if (/certificate|UnknownIssuer|BadSignature|NotValidForName|CERT_|x509/i.test(text)) return 'certificate';
  return `other: ${text.replace(/\d+/g, '#').slice(0, 200)}`;
}

/** The error for a server certificate the client does not accept (not retryable: the same hashes are refused again). */
function certificateRefused(address: string, cause: unknown, hashes: boolean, why: string): LanemuxError {
  const which = hashes
    ? 'it matches none of serverCertificateHashes (a restarted development server has a new certificate) and is not signed by a CA this runtime trusts'
    : 'it is not signed by a CA this runtime trusts (a self-signed development certificate needs serverCertificateHashes)';
  return new TransportError(
    'ERR_CONNECT',
    `webtransport to ${address}: the server's certificate is not accepted (${describeThrown(cause)}): ${which}; ${why}`,
    { cause },
  );
}

/** Wait for `p` at most `ms` on `rt`'s clock, then call `onLate` and stop waiting. */
function withDeadline(rt: Runtime, p: Promise<void>, ms: number, onLate: () => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = rt.setTimer(() => {
      onLate();
      resolve();
    }, ms);
    void p.then(() => {
      rt.clearTimer(timer);
      resolve();
    });
  });
}
