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
import { credentialOption, type CredentialSource } from './auth.ts';
import { z } from 'zod/mini';
import type { LanemuxError } from '../errors.ts';
import { TransportError, asTransportError } from './errors.ts';
import { admissionSchema, parseOptions } from './options.ts';
import { int, num } from '../validate.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from './port.ts';
import { setUnrefTimeout, type TimerHandle } from './runtime.ts';
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

/** A `WebTransport` constructor: the global one by default. */
export type WebTransportConstructor = new (url: string, options?: WebTransportInit) => WebTransportSession;

/** Options of {@link webTransportClientTransport}. */
export interface WebTransportClientTransportOptions {
  /** The WebTransport constructor. Defaults to `globalThis.WebTransport`. */
  readonly WebTransport?: WebTransportConstructor;
  /**
   * Accept a self-signed server certificate with one of these SHA-256 hashes (ECDSA P-256, ≤ 14 days;
   * pass current and next during a rotation). Defaults to none: the certificate must be CA-signed.
   */
  readonly serverCertificateHashes?: readonly WebTransportHash[];
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
   * Credential presented in the HELLO of every connect and reconnect: a string, or a function called
   * each time (a browser refreshes a short-lived token). Defaults to the messenger's `credential`.
   */
  readonly credential?: CredentialSource;
}

const hashSchema = z.object({
  algorithm: z.literal('sha-256'),
  value: z.custom<BufferSource>((v) => ArrayBuffer.isView(v) || v instanceof ArrayBuffer, 'not a BufferSource'),
});

const optionsSchema = z.object({
  WebTransport: z.optional(z.custom<WebTransportConstructor>((v) => typeof v === 'function', 'not a WebTransport constructor')),
  serverCertificateHashes: z.optional(z.array(hashSchema).check(z.maxLength(16))),
  congestionControl: z._default(z.enum(['default', 'throughput', 'low-latency']), 'default'),
  ...admissionSchema,
  connectTimeoutMs: z._default(int(1, 600_000), 10_000),
  closeGraceMs: z._default(int(0, 600_000), 2_000),
  minReconnectionDelay: z._default(num(0, 600_000), 500),
  reconnectionJitter: z._default(num(0, 600_000), 2_500),
  maxReconnectionDelay: z._default(num(0, 3_600_000), 30_000),
  reconnectionDelayGrowFactor: z._default(num(1, 10), 1.3),
  maxRetries: z._default(num(0), Number.POSITIVE_INFINITY),
  ...credentialOption,
});

type Resolved = z.output<typeof optionsSchema>;

/** Create a WebTransport client adapter (browsers, Deno). Dials `https://` addresses; never listens. */
export function webTransportClientTransport(options: WebTransportClientTransportOptions = {}): TransportAdapter {
  const o = parseOptions(optionsSchema, options, 'webTransportClientTransport');
  const ctor = o.WebTransport ?? (globalThis as { WebTransport?: WebTransportConstructor }).WebTransport;
  if (ctor === undefined) {
    throw new TransportError(
      'ERR_CONFIG',
      'webTransportClientTransport: this runtime has no WebTransport (Node and Bun lack it; Deno needs --unstable-net; ' +
        'browsers need a secure context). Use webSocketClientTransport there, or pass `WebTransport`.',
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
      return { close: () => redial.stop() };
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
      return { close: () => { cancelled = true; } };
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
      (e: unknown) => fail(asTransportError('ERR_CONNECT', `webtransport to ${request.address} (lane ${request.lane})`, e)),
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
    if (o.serverCertificateHashes !== undefined) init.serverCertificateHashes = o.serverCertificateHashes.map((h) => ({ algorithm: h.algorithm, value: h.value }));
    if (o.congestionControl !== 'default') init.congestionControl = o.congestionControl;
    let session: WebTransportSession;
    try {
      session = new this.#ctor(request.address, init);
    } catch (e) {
      throw new TransportError('ERR_UNSUPPORTED_ADDRESS', `not a WebTransport URL (https://host:port/path): ${request.address}`, { cause: e });
    }
    // Neither promise may reject unhandled, whatever happens below.
    session.closed.catch(() => {});
    session.ready.catch(() => {});
    this.#pending.add(session);
    try {
      await this.#timed(session.ready, `webtransport session to ${request.address} not ready`, session);
    } finally {
      this.#pending.delete(session);
    }
    if (this.#closed) {
      session.close({ closeCode: 0, reason: 'closed' });
      throw new TransportError('ERR_CLOSED', 'webtransport client transport is closed');
    }
    const lanes = new WtSessionLanes(session, request.address, o.closeGraceMs, () => {
      this.#sessions.delete(lanes);
      if (this.#current.get(request.address) === lanes) this.#current.delete(request.address);
    });
    this.#sessions.add(lanes);
    this.#current.set(request.address, lanes);
    return this.#openOn(lanes, request);
  }

  /** One more lane of a link: a new bidirectional stream on its session. */
  async #openOn(lanes: WtSessionLanes<WebTransportSession>, request: DialRequest): Promise<WtStreamConn> {
    lanes.opening(1);
    let stream: WtBidiStream;
    try {
      stream = await this.#timed(lanes.session.createBidirectionalStream(), `webtransport stream to ${request.address} not opened`);
    } catch (e) {
      lanes.opening(-1);
      // A session that cannot open a lane's stream cannot carry the link.
      lanes.close();
      throw e;
    }
    if (!lanes.usable) {
      lanes.opening(-1);
      throw new TransportError('ERR_PEER_GONE', `webtransport session to ${request.address} closed while lane ${request.lane} opened`, { retryable: true });
    }
    const conn = new WtStreamConn(stream, request.address, request.frameLimit, { highWaterMark: this.#o.highWaterMark, maxPendingBytes: this.#o.maxPendingBytes }, lanes, request.framePolicy);
    lanes.opening(-1);
    return conn;
  }

  /** `p`, or ERR_CONNECT after `connectTimeoutMs` (closing `session` if given). */
  #timed<T>(p: Promise<T>, what: string, session?: WebTransportSession): Promise<T> {
    const ms = this.#o.connectTimeoutMs;
    return new Promise<T>((resolve, reject) => {
      const timer = setUnrefTimeout(() => {
        if (session !== undefined) {
          try {
            session.close({ closeCode: 0, reason: 'timeout' });
          } catch {
            // Not open yet in some runtimes: closing is best effort.
          }
        }
        reject(new TransportError('ERR_CONNECT', `${what} within ${ms} ms`, { retryable: true }));
      }, ms);
      p.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (e: unknown) => {
          clearTimeout(timer);
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
    await Promise.all(sessions.map((s) => withDeadline(s.closedPromise, this.#o.closeGraceMs + 100, () => s.close())));
  }
}

/**
 * A lane-0 dial that survives connection loss: after its connection closes (or an attempt fails) it
 * opens a new session after a jittered, growing delay on an unref'd timer, and reports the new
 * connection through `open` again; the transport core then runs a new hello (a new link and epoch).
 * The delay is `(minReconnectionDelay + random·reconnectionJitter)·reconnectionDelayGrowFactor^n`, at
 * most `maxReconnectionDelay`; a connection that stayed up 5 s starts the back-off over.
 */
class Redial {
  readonly #request: DialRequest;
  readonly #events: DialEvents;
  readonly #o: Resolved;
  readonly #open: () => Promise<WtStreamConn>;
  readonly #registry: Set<Redial>;
  #conn: WtStreamConn | undefined;
  #timer: TimerHandle | undefined;
  #stopped = false;
  #failures = 0;
  #restarts = 0;
  #openedAt = 0;

  constructor(request: DialRequest, events: DialEvents, o: Resolved, open: () => Promise<WtStreamConn>, registry: Set<Redial>) {
    this.#request = request;
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
        this.#openedAt = performance.now();
        this.#conn = conn;
        conn.onClosed = () => {
          if (this.#conn === conn) this.#conn = undefined;
          this.#schedule();
        };
        this.#events.open(conn);
      },
      (e: unknown) => {
        if (this.#stopped) return;
        if (++this.#failures > this.#o.maxRetries) {
          this.stop();
          this.#events.fail(asTransportError('ERR_CONNECT', `webtransport to ${this.#request.address}: ${this.#failures} attempts failed`, e));
          return;
        }
        this.#schedule();
      },
    );
  }

  #schedule(): void {
    if (this.#stopped || this.#timer !== undefined) return;
    if (this.#openedAt > 0 && performance.now() - this.#openedAt > 5_000) this.#restarts = 0;
    this.#openedAt = 0;
    const o = this.#o;
    const delay = Math.min(o.maxReconnectionDelay, (o.minReconnectionDelay + Math.random() * o.reconnectionJitter) * o.reconnectionDelayGrowFactor ** this.#restarts);
    this.#restarts++;
    this.#timer = setUnrefTimeout(() => {
      this.#timer = undefined;
      if (!this.#stopped) this.#attempt();
    }, delay);
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#registry.delete(this);
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const conn = this.#conn;
    this.#conn = undefined;
    conn?.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort');
  }
}

/** Wait for `p` at most `ms`, then call `onLate` and stop waiting. */
function withDeadline(p: Promise<void>, ms: number, onLate: () => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setUnrefTimeout(() => {
      onLate();
      resolve();
    }, ms);
    void p.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
