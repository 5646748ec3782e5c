/**
 * One client adapter for browser pages: WebTransport first, WebSocket when it must. It dials the
 * server's WebTransport URL (`https://host:port/path`, the address given to `connect`) with
 * `webTransportClientTransport`, and the server's WebSocket endpoint (`webSocket.url`) with
 * `webSocketClientTransport` when WebTransport cannot carry the link. Both are the product adapters,
 * used one attempt at a time; this file only decides which one and when to retry.
 *
 * **Which transport.** A (re)connect tries WebTransport, unless the page has no `WebTransport` (no
 * secure context, an older browser) or the page fell back recently (below). WebSocket is tried at
 * once, in the same attempt, when the WebTransport session fails to open within
 * `webTransport.connectTimeoutMs` (or opens but closes before the server answers), provided
 * WebTransport has never worked on this page or has now failed `maxWebTransportFailures` times in a
 * row; before that, a reconnect retries WebTransport after the back-off (a server restarting is not a
 * reason to change transports). A connection "works" once the server sent something on it (its HELLO).
 *
 * **Staying on WebSocket.** After a fallback (WebTransport failed, WebSocket then worked) the page
 * stays on WebSocket: every reconnect uses it until `webTransportRetryMs` (5 minutes) has passed since,
 * then the next reconnect tries WebTransport once more first. A live WebSocket link is never torn
 * down to go back. `transportInUse` and `onTransport` say which transport carries the link.
 *
 * **Giving up.** The first connect of a dial fails at once (`ERR_CONNECT`, naming both failures) when
 * neither transport works, so `connect` rejects instead of waiting out its deadline. After a link was
 * up, the dial reconnects with jittered exponential back-off and fails after `maxRetries` attempts in
 * a row that found no working transport. Either way the failure reaches the messenger's
 * `onDialEnded`; a terminal refusal by the server (version, authentication) ends the dial there too.
 *
 * Certificate hashes given as a function are called again before every WebTransport session, so a
 * development server restarted with a new certificate is reachable again without a reload.
 *
 * @example
 * ```ts
 * const client = await createMessenger({
 *   transports: [
 *     browserClientTransport({
 *       webTransport: { serverCertificateHashes: () => fetch('/cert-hash').then(toHashes) },
 *       webSocket: { url: 'wss://example.com/lanemux' },
 *       onTransport: (e) => console.log(`lanemux over ${e.transport}`, e.reason ?? ''),
 *     }),
 *   ],
 * });
 * await client.connect('https://example.com:4433/lanemux');
 * ```
 *
 * @packageDocumentation
 */
import { backoffDelay, backoffFor } from './backoff.ts';
import * as z from '../schema.ts';
import { ConfigError, type LanemuxError } from '../errors.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { credentialOption, type CredentialSource } from '../transport/auth.ts';
import { TransportError, describeThrown } from '../transport/errors.ts';
import type {
  Connection,
  ConnectionReceiver,
  DialEvents,
  DialHandle,
  DialRequest,
  ListenHost,
  TransportAdapter,
} from '../transport/port.ts';
import { int, num, parseOptions } from '../validate.ts';
import { webSocketClientTransport, type WebSocketClientTransportOptions } from './websocket.ts';
import {
  webTransportClientTransport,
  type WebTransportClientTransportOptions,
  type WebTransportConstructor,
} from './webtransport.ts';

/** The transport a link of {@link browserClientTransport} runs on. */
export type BrowserTransportKind = 'webtransport' | 'websocket';

/** What {@link BrowserClientTransportOptions.onTransport} is told when the transport in use changes. */
export interface TransportInUseEvent {
  /** The transport that now carries the link. */
  readonly transport: BrowserTransportKind;
  /** The dialled address (the WebTransport URL given to `connect`). */
  readonly address: string;
  /** The URL actually connected: the address, or the WebSocket URL. */
  readonly url: string;
  /** Why not WebTransport, when `transport` is `'websocket'`; undefined otherwise. */
  readonly reason: string | undefined;
}

/** WebTransport options of {@link browserClientTransport} (reconnecting is the browser client's own). */
export interface BrowserWebTransportOptions
  extends Pick<
    WebTransportClientTransportOptions,
    | 'WebTransport'
    | 'serverCertificateHashes'
    | 'congestionControl'
    | 'highWaterMark'
    | 'maxPendingBytes'
    | 'closeGraceMs'
  > {
  /**
   * Time allowed for a session to become ready before the attempt counts as failed (and WebSocket is
   * tried). Defaults to 4,000 ms, so that a fallback fits the messenger's 10 s connect deadline.
   */
  readonly connectTimeoutMs?: number;
}

/** WebSocket options of {@link browserClientTransport}. */
export interface BrowserWebSocketOptions
  extends Pick<WebSocketClientTransportOptions, 'WebSocket' | 'highWaterMark' | 'maxPendingBytes' | 'drainPollMs'> {
  /** The server's WebSocket endpoint (`ws://` or `wss://`), or a function of the dialled address that returns it. */
  readonly url: string | ((address: string) => string);
  /** Time allowed for one WebSocket to open. Defaults to 5,000 ms. */
  readonly connectionTimeout?: number;
}

/** Options of {@link browserClientTransport}. */
export interface BrowserClientTransportOptions {
  /** How to reach the server over WebTransport. Defaults to `{}` (the global `WebTransport`, CA-signed certificate). */
  readonly webTransport?: BrowserWebTransportOptions;
  /** How to reach the server over WebSocket. Required: it is the fallback. */
  readonly webSocket: BrowserWebSocketOptions;
  /**
   * Once WebTransport has worked on this page, reconnects that fail on it in a row before WebSocket is
   * tried as well (before it has worked, the first failure falls back). 1..1000. Defaults to 3.
   */
  readonly maxWebTransportFailures?: number;
  /** After a fallback, how long reconnects stay on WebSocket before WebTransport is tried again. Defaults to 300,000 ms. */
  readonly webTransportRetryMs?: number;
  /**
   * Reconnect attempts made after a link is lost, none of which found a working transport, before the
   * dial fails with `ERR_CONNECT` (any answered connection starts the count over). At least 1. Defaults to 10.
   */
  readonly maxRetries?: number;
  /** Smallest reconnect delay before jitter. Defaults to 500 ms. */
  readonly minReconnectionDelay?: number;
  /** Random extra added to the smallest delay, drawn per attempt. Defaults to 2,500 ms. */
  readonly reconnectionJitter?: number;
  /** Largest reconnect delay. Defaults to 30,000 ms. */
  readonly maxReconnectionDelay?: number;
  /** Growth of the delay per failed attempt. Defaults to 1.3. */
  readonly reconnectionDelayGrowFactor?: number;
  /**
   * Credential presented in the HELLO of every connect and reconnect, on either transport: a string,
   * or a function called each time. Defaults to the messenger's `credential`.
   */
  readonly credential?: CredentialSource;
  /** Called when the transport in use changes (the first connection included). Defaults to none. */
  readonly onTransport?: (event: TransportInUseEvent) => void;
}

/** The adapter {@link browserClientTransport} returns. */
export interface BrowserClientTransport extends TransportAdapter {
  /** The transport of the latest connection the server answered on; undefined until one has. */
  readonly transportInUse: BrowserTransportKind | undefined;
}

const isObject = (v: unknown): v is object => typeof v === 'object' && v !== null;

const optionsSchema = z.object({
  webTransport: z._default(
    z.custom<BrowserWebTransportOptions>(isObject, 'webTransport must be an object of WebTransport options'),
    {},
  ),
  webSocket: z.custom<BrowserWebSocketOptions>((v) => {
    const url = isObject(v) ? (v as { url?: unknown }).url : undefined;
    return typeof url === 'function' || (typeof url === 'string' && /^wss?:\/\//i.test(url));
  }, 'webSocket.url is required: a ws:// or wss:// URL, or a function of the dialled address that returns one'),
  maxWebTransportFailures: z._default(int(1, 1000), 3),
  webTransportRetryMs: z._default(num(0), 300_000),
  maxRetries: z._default(num(1), 10),
  minReconnectionDelay: z._default(num(0, 600_000), 500),
  reconnectionJitter: z._default(num(0, 600_000), 2_500),
  maxReconnectionDelay: z._default(num(0, 3_600_000), 30_000),
  reconnectionDelayGrowFactor: z._default(num(1, 10), 1.3),
  onTransport: z.optional(
    z.custom<(event: TransportInUseEvent) => void>((v) => typeof v === 'function', 'not a function'),
  ),
  ...credentialOption,
});

type Resolved = z.output<typeof optionsSchema>;

/**
 * Create the browser client adapter: WebTransport first, WebSocket when it must (see the file
 * comment for the policy). Dials `https://` addresses (the server's WebTransport URL); never listens.
 */
export function browserClientTransport(options: BrowserClientTransportOptions): BrowserClientTransport {
  const o = parseOptions(optionsSchema, options, 'browserClientTransport');
  const { url: _url, connectionTimeout = 5_000, ...wsRest } = o.webSocket;
  const ws = webSocketClientTransport({ ...wsRest, connectionTimeout });
  const wtCtor = o.webTransport.WebTransport ?? (globalThis as { WebTransport?: WebTransportConstructor }).WebTransport;
  const wt =
    wtCtor === undefined
      ? undefined
      : webTransportClientTransport({ connectTimeoutMs: 4_000, ...o.webTransport, WebTransport: wtCtor });
  return new BrowserClientAdapter(o, wt, ws);
}

/** An attempt that got no answer: why, and the URL it tried. */
interface Failure {
  readonly error: LanemuxError;
  readonly url: string;
}

/** The state of one attempt on one transport. */
interface Attempt {
  readonly kind: BrowserTransportKind;
  readonly url: string;
  /** How the other transport failed earlier in the same round, if it was tried. */
  readonly previous: Failure | undefined;
  handle: DialHandle | undefined;
  conn: Connection | undefined;
  /** The server sent something on the connection: this transport works. */
  heard: boolean;
  /** What the inner dial reported after its connection opened (the WebSocket adapter's reason for an early close). */
  late: LanemuxError | undefined;
}

class BrowserClientAdapter implements BrowserClientTransport {
  readonly name = 'browser-client';
  readonly dialSchemes = ['https'] as const;
  readonly reconnects = true;
  readonly credential: CredentialSource | undefined;
  readonly o: Resolved;
  readonly wt: TransportAdapter | undefined;
  readonly ws: TransportAdapter;
  /** The transport lane 0 of each address's current link uses: its other lanes follow it. */
  readonly #lanesVia = new Map<string, BrowserTransportKind>();
  readonly #dials = new Set<BrowserDial>();
  #inUse: BrowserTransportKind | undefined;
  /** Page-wide: WebTransport carried a link here once; its failures in a row since it last worked. */
  #wtWorked = false;
  #wtFailures = 0;
  /** When this page last fell back to WebSocket, and why (undefined: not on WebSocket by choice). */
  #fellBackAt: number | undefined;
  #fallbackReason: string | undefined;
  #closed = false;

  constructor(o: Resolved, wt: TransportAdapter | undefined, ws: TransportAdapter) {
    this.o = o;
    this.wt = wt;
    this.ws = ws;
    this.credential = o.credential;
  }

  get transportInUse(): BrowserTransportKind | undefined {
    return this.#inUse;
  }

  async listen(_host: ListenHost): Promise<string | undefined> {
    return undefined;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    if (this.#closed) {
      let cancelled = false;
      queueMicrotask(() => {
        if (!cancelled) events.fail(new TransportError('ERR_CLOSED', 'browser client transport is closed'));
      });
      return {
        close: () => {
          cancelled = true;
        },
      };
    }
    if (request.lane !== 0) {
      // Lanes 1..L-1 of a link follow its lane 0 (the same WebTransport session, or more WebSockets).
      const via = this.#lanesVia.get(request.address) ?? (this.wt === undefined ? 'websocket' : 'webtransport');
      if (via === 'webtransport' && this.wt !== undefined) return this.wt.dial(request, events);
      let url: string;
      try {
        url = this.webSocketUrl(request.address);
      } catch (e) {
        queueMicrotask(() => events.fail(e as LanemuxError));
        return { close() {} };
      }
      return this.ws.dial({ ...request, address: url }, events);
    }
    const dial = new BrowserDial(this, request, events, this.#dials);
    return { close: () => dial.stop(), linked: () => dial.linked() };
  }

  /** The WebSocket URL for `address` (throws a ConfigError when the function gives no ws:// URL). */
  webSocketUrl(address: string): string {
    const url = this.o.webSocket.url;
    if (typeof url === 'string') return url;
    const got: unknown = url(address);
    if (typeof got !== 'string' || !/^wss?:\/\//i.test(got)) {
      throw new ConfigError(
        'webSocket.url',
        `webSocket.url(${address}) must return a ws:// or wss:// URL, got ${typeof got === 'string' ? got : typeof got}`,
        { where: 'browserClientTransport' },
      );
    }
    return got;
  }

  /** The transport a new round starts on, now. */
  choose(now: number): BrowserTransportKind {
    if (this.wt === undefined) return 'websocket';
    if (this.#fellBackAt !== undefined && now - this.#fellBackAt < this.o.webTransportRetryMs) return 'websocket';
    return 'webtransport';
  }

  /**
   * A WebTransport attempt failed: true if the page should fall back (WebTransport never worked here,
   * the page is on WebSocket already and this was a re-probe, or it failed too often in a row).
   */
  webTransportFailed(): boolean {
    this.#wtFailures++;
    return !this.#wtWorked || this.#fellBackAt !== undefined || this.#wtFailures >= this.o.maxWebTransportFailures;
  }

  /** The lane-0 connection of `address` opened on `kind`: its later lanes use the same transport. */
  opened(address: string, kind: BrowserTransportKind): void {
    this.#lanesVia.set(address, kind);
  }

  /** The server answered on `attempt`'s connection: `attempt.kind` carries the link. */
  worked(address: string, attempt: Attempt, rt: Runtime): void {
    let reason: string | undefined;
    if (attempt.kind === 'webtransport') {
      this.#wtWorked = true;
      this.#wtFailures = 0;
      this.#fellBackAt = undefined;
      this.#fallbackReason = undefined;
    } else if (this.wt === undefined) {
      reason = 'this page has no WebTransport';
    } else if (attempt.previous !== undefined) {
      this.#fellBackAt = rt.now();
      this.#fallbackReason = `WebTransport failed: ${attempt.previous.error.message}`;
      reason = this.#fallbackReason;
    } else {
      reason = this.#fallbackReason;
    }
    if (this.#inUse === attempt.kind) return;
    this.#inUse = attempt.kind;
    const listener = this.o.onTransport;
    if (listener === undefined) return;
    try {
      listener({ transport: attempt.kind, address, url: attempt.url, reason });
    } catch {
      // A throwing listener must not break the link.
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const d of [...this.#dials]) d.stop();
    await Promise.all([this.wt?.close(), this.ws.close()]);
  }
}

/**
 * A lane-0 dial: rounds of single attempts (WebTransport, then WebSocket if the policy says so),
 * a jittered back-off between rounds once a link was up. Each attempt is a one-shot dial of the inner
 * adapter; the connection's receiver is tapped to learn when the server answered and when it closed.
 */
class BrowserDial {
  readonly #a: BrowserClientAdapter;
  readonly #request: DialRequest;
  readonly #rt: Runtime;
  readonly #events: DialEvents;
  readonly #registry: Set<BrowserDial>;
  #attempt: Attempt | undefined;
  #timer: TimerHandle | undefined;
  #stopped = false;
  /** A connection of this dial was answered by the server: later failures are reconnects. */
  #worked = false;
  /** Reconnect rounds in a row that found no working transport (bounded by `maxRetries`). */
  #rounds = 0;
  #restarts = 0;
  /** A link formed over a connection of this dial since the last round was scheduled. */
  #linkedSinceRound = false;

  constructor(adapter: BrowserClientAdapter, request: DialRequest, events: DialEvents, registry: Set<BrowserDial>) {
    this.#a = adapter;
    this.#request = request;
    this.#rt = request.runtime;
    this.#events = events;
    this.#registry = registry;
    registry.add(this);
    this.#round();
  }

  #round(): void {
    this.#try(this.#a.choose(this.#rt.now()), undefined);
  }

  #try(kind: BrowserTransportKind, previous: Failure | undefined): void {
    const address = this.#request.address;
    const inner = kind === 'webtransport' ? this.#a.wt : this.#a.ws;
    let url = address;
    if (kind === 'websocket') {
      try {
        url = this.#a.webSocketUrl(address);
      } catch (e) {
        queueMicrotask(() => this.#fail(e as LanemuxError));
        return;
      }
    }
    const attempt: Attempt = { kind, url, previous, handle: undefined, conn: undefined, heard: false, late: undefined };
    this.#attempt = attempt;
    // One attempt at a time: the reconnecting is done here, so both inner dials are one-shot.
    attempt.handle = (inner as TransportAdapter).dial(
      { ...this.#request, address: url, reconnect: false },
      {
        open: (conn) => this.#opened(attempt, conn),
        fail: (error) => {
          if (this.#stopped || this.#attempt !== attempt) return;
          if (attempt.conn !== undefined) attempt.late = error;
          else this.#failed(attempt, error);
        },
      },
    );
  }

  #opened(attempt: Attempt, conn: Connection): void {
    if (this.#stopped || this.#attempt !== attempt) {
      conn.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort');
      return;
    }
    attempt.conn = conn;
    this.#a.opened(this.#request.address, attempt.kind);
    // The tap sits on the receive side only (one call per received message): sends go straight to
    // the inner connection, which is what the transport core holds.
    const start = conn.start;
    conn.start = (receiver: ConnectionReceiver): void => start.call(conn, new ReceiverTap(receiver, this, attempt));
    this.#events.open(conn);
  }

  /** The server sent the first message on `attempt`'s connection. */
  heard(attempt: Attempt): void {
    if (this.#stopped || this.#attempt !== attempt) return;
    this.#worked = true;
    this.#rounds = 0;
    this.#a.worked(this.#request.address, attempt, this.#rt);
  }

  /** `attempt`'s connection closed (after the transport core heard of it). */
  ended(attempt: Attempt, error: LanemuxError): void {
    // A microtask: the WebSocket adapter reports why an unanswered socket closed right after the close.
    queueMicrotask(() => {
      if (this.#stopped || this.#attempt !== attempt) return;
      if (!attempt.heard) {
        this.#failed(attempt, attempt.late ?? error);
        return;
      }
      this.#attempt = undefined;
      // A one-shot dial ends with its link (the transport core stops it).
      if (this.#request.reconnect) this.#schedule();
    });
  }

  /** `attempt` got no answer from the server. */
  #failed(attempt: Attempt, error: LanemuxError): void {
    this.#attempt = undefined;
    attempt.handle?.close();
    if (error.code === 'ERR_INVALID_CONFIG') {
      this.#fail(error);
      return;
    }
    const address = this.#request.address;
    const previous = attempt.previous;
    if (attempt.kind === 'webtransport') {
      if (previous !== undefined) {
        this.#roundFailed(bothFailed(address, error, previous.error, previous.url));
        return;
      }
      // A first connect tries both before it fails; a reconnect stays on WebTransport a while (the
      // server may be restarting) unless the policy says to fall back.
      const fallBack = this.#a.webTransportFailed();
      if (fallBack || !this.#worked || !this.#request.reconnect) this.#try('websocket', { error, url: attempt.url });
      else this.#roundFailed(error);
      return;
    }
    if (previous !== undefined) {
      this.#roundFailed(bothFailed(address, previous.error, error, attempt.url));
      return;
    }
    if (this.#a.wt !== undefined) {
      // On WebSocket by choice (after a fallback): before the round counts as failed, try WebTransport.
      this.#try('webtransport', { error, url: attempt.url });
      return;
    }
    this.#roundFailed(
      new TransportError(
        'ERR_CONNECT',
        `${address}: this page has no WebTransport, and WebSocket ${attempt.url} failed (${error.message})`,
        { cause: error, retryable: error.retryable },
      ),
    );
  }

  #roundFailed(error: LanemuxError): void {
    // A first connect is not retried: the caller learns at once that neither transport works.
    if (!this.#worked || !this.#request.reconnect) {
      this.#fail(error);
      return;
    }
    if (++this.#rounds >= this.#a.o.maxRetries) {
      this.#fail(
        new TransportError(
          'ERR_CONNECT',
          `${this.#request.address}: ${this.#rounds} reconnect attempts in a row found no working transport; giving up (last: ${describeThrown(error)})`,
          { cause: error, retryable: true },
        ),
      );
      return;
    }
    this.#schedule();
  }

  #fail(error: LanemuxError): void {
    if (this.#stopped) return;
    this.stop();
    this.#events.fail(error);
  }

  /** The transport core formed a link over the current connection. */
  linked(): void {
    this.#linkedSinceRound = true;
  }

  /** The next round after a jittered, growing delay; a link that formed starts the back-off over. */
  #schedule(): void {
    if (this.#stopped || this.#timer !== undefined) return;
    if (this.#linkedSinceRound) this.#restarts = 0;
    this.#linkedSinceRound = false;
    const delay = backoffDelay(backoffFor(this.#request, this.#a.o), this.#restarts, this.#rt);
    this.#restarts++;
    this.#timer = this.#rt.setTimer(() => {
      this.#timer = undefined;
      if (!this.#stopped) this.#round();
    }, delay);
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#registry.delete(this);
    if (this.#timer !== undefined) this.#rt.clearTimer(this.#timer);
    this.#timer = undefined;
    const attempt = this.#attempt;
    this.#attempt = undefined;
    attempt?.handle?.close();
  }
}

/** The error of a round in which both transports failed. */
function bothFailed(address: string, wt: LanemuxError, ws: LanemuxError, wsUrl: string): LanemuxError {
  return new TransportError(
    'ERR_CONNECT',
    `${address}: WebTransport failed (${wt.message}), and so did WebSocket ${wsUrl} (${ws.message})`,
    { cause: ws, retryable: ws.retryable || wt.retryable },
  );
}

/** The receiver the transport core gave a lane-0 connection, watched for the first message and the close. */
class ReceiverTap implements ConnectionReceiver {
  readonly #receiver: ConnectionReceiver;
  readonly #dial: BrowserDial;
  readonly #attempt: Attempt;

  constructor(receiver: ConnectionReceiver, dial: BrowserDial, attempt: Attempt) {
    this.#receiver = receiver;
    this.#dial = dial;
    this.#attempt = attempt;
  }

  message(bytes: Uint8Array): void {
    if (!this.#attempt.heard) {
      this.#attempt.heard = true;
      this.#dial.heard(this.#attempt);
    }
    this.#receiver.message(bytes);
  }

  closed(error: LanemuxError): void {
    this.#receiver.closed(error);
    this.#dial.ended(this.#attempt, error);
  }
}
