/**
 * WebSocket client adapter on the WHATWG `WebSocket` API wrapped in partysocket, so the same file runs
 * in browsers, Deno, Bun and Node (Node 20 passes `ws` as the constructor). One WebSocket per lane.
 *
 * partysocket is configured so that lanemux owns every byte:
 * - `maxEnqueuedMessages: 0`: partysocket never queues a frame while disconnected, so nothing encoded
 *   for one connection can be replayed on the next; `send() === false` means "not sent".
 * - `binaryType = 'arraybuffer'`: no async Blob hop per message.
 * - partysocket never reconnects by itself (`shouldReconnectOnClose: () => false`, `maxRetries: 0`):
 *   its back-off timers are neither unref'd nor cancelled by `close()`, so a closed messenger could keep
 *   the process alive for up to `maxReconnectionDelay`. lanemux drives every reconnect from its own
 *   unref'd, cancellable timer calling `reconnect()`, with jittered exponential back-off
 *   (`(minReconnectionDelay + random·reconnectionJitter)·reconnectionDelayGrowFactor^n`, at most
 *   `maxReconnectionDelay`); `reconnect()` resets partysocket's retry count, so its own delay is 0.
 * - Each open is a new {@link Connection} (a new epoch for the transport core); the old connection
 *   object is closed before partysocket can open the next socket, so a stale send is refused.
 *
 * - A dial's **first** socket that fails to open (refused, unknown host, an HTTP answer instead of the
 *   upgrade, a TLS refusal, `connectionTimeout`) fails the dial at once with `ERR_CONNECT` saying which:
 *   the caller's `connect` rejects instead of waiting out its deadline while partysocket retries. So
 *   does a first socket the server closes with a non-lanemux close code before sending anything. Once
 *   a socket has opened, a lost connection is dialled again (up to `maxRetries` failed attempts).
 * - The restart timer holds the process open until the dial has heard from the server (a `connect` is
 *   waiting on it); after that it is unref'd, so a reconnecting node never keeps a process alive.
 *
 * Lane 0 is the reconnecting dial; lanes 1..L-1 are single-attempt sockets the transport core opens
 * anew after each lane-0 hello. Back-pressure comes from `bufferedAmount`, polled while a send waits
 * (the WHATWG API has no drain event). Reading cannot be paused on this API: `pause()` returns false.
 *
 * @example
 * ```ts
 * import WebSocket from 'ws'; // Node 20 only; browsers, Deno, Bun and Node ≥ 22 have a global
 * const client = await createMessenger({ transports: [webSocketClientTransport({ WebSocket })] });
 * await client.connect('ws://127.0.0.1:8080/lanemux');
 * ```
 *
 * @packageDocumentation
 */
import { backoffDelay, backoffFor } from './backoff.ts';
import { credentialOption, type CredentialSource } from '../transport/auth.ts';
import ReconnectingWebSocket from 'partysocket/ws';
import * as z from '../schema.ts';
import { ConfigError } from '../errors.ts';
import type { AdmissionLimits } from '../transport/admission.ts';
import { TransportError } from '../transport/errors.ts';
import { admissionSchema } from '../transport/options.ts';
import { parseOptions } from '../validate.ts';
import { int, num } from '../validate.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from '../transport/port.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { MessageSocketConnection, type MessageSocketDriver } from './message-socket-conn.ts';
import { describeOpenFailure, describeEarlyClose, type OpenFailureDetail } from './ws-open-failure.ts';
import { TERMINAL_CLOSE_CODES, errorForClose } from '../transport/ws-codes.ts';

/** A WHATWG-compatible WebSocket constructor (the global one, or `ws` on Node 20). */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => unknown;

/** Options of {@link webSocketClientTransport}. */
export interface WebSocketClientTransportOptions {
  /** The WebSocket constructor. Defaults to `globalThis.WebSocket` (pass `ws` on Node 20). */
  readonly WebSocket?: WebSocketConstructor;
  /** Admission is synchronous while `bufferedAmount` is below this. Defaults to 1 MiB. */
  readonly highWaterMark?: number;
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  readonly maxPendingBytes?: number;
  /** Smallest reconnect delay before jitter. Defaults to 500 ms. */
  readonly minReconnectionDelay?: number;
  /** Random extra added to the smallest delay, drawn per dial and per restart. Defaults to 2,500 ms. */
  readonly reconnectionJitter?: number;
  /** Largest reconnect delay. Defaults to 30,000 ms. */
  readonly maxReconnectionDelay?: number;
  /** Growth of the delay per failed attempt. Defaults to 1.3. */
  readonly reconnectionDelayGrowFactor?: number;
  /** Time allowed for one WebSocket to open. Defaults to 8,000 ms. */
  readonly connectionTimeout?: number;
  /**
   * Consecutive failed reconnect attempts (sockets that did not open) before a dial whose link was
   * up gives up. A dial's first socket is not retried: it fails the connect at once. Defaults to Infinity.
   */
  readonly maxRetries?: number;
  /** How often `bufferedAmount` is polled while a send waits for admission. Defaults to 2 ms. */
  readonly drainPollMs?: number;
  /**
   * Credential presented in the HELLO of every connect and reconnect: a string, or a function called
   * each time (a browser refreshes a short-lived token). Defaults to the messenger's `credential`.
   */
  readonly credential?: CredentialSource;
}

const optionsSchema = z.object({
  WebSocket: z.optional(z.custom<WebSocketConstructor>((v) => typeof v === 'function', 'not a WebSocket constructor')),
  ...admissionSchema,
  minReconnectionDelay: z._default(num(0, 600_000), 500),
  reconnectionJitter: z._default(num(0, 600_000), 2_500),
  maxReconnectionDelay: z._default(num(0, 3_600_000), 30_000),
  reconnectionDelayGrowFactor: z._default(num(1, 10), 1.3),
  connectionTimeout: z._default(int(1, 600_000), 8_000),
  maxRetries: z._default(num(0), Number.POSITIVE_INFINITY),
  drainPollMs: z._default(int(1, 1000), 2),
  ...credentialOption,
});

type Resolved = z.output<typeof optionsSchema>;

/** Create a WHATWG WebSocket client adapter (partysocket). Dials `ws://` and `wss://`; never listens. */
export function webSocketClientTransport(options: WebSocketClientTransportOptions = {}): TransportAdapter {
  const o = parseOptions(optionsSchema, options, 'webSocketClientTransport');
  const ctor = o.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (ctor === undefined) {
    throw new ConfigError(
      'WebSocket',
      'no global WebSocket in this runtime; pass `WebSocket` (e.g. from the ws package on Node 20)',
      { where: 'webSocketClientTransport' },
    );
  }
  return new WsClientAdapter(o, ctor);
}

class WsClientAdapter implements TransportAdapter {
  readonly name = 'ws-client';
  readonly dialSchemes = ['ws', 'wss'] as const;
  readonly reconnects = true;
  readonly credential: CredentialSource | undefined;
  readonly #o: Resolved;
  readonly #ctor: WebSocketConstructor;
  readonly #limits: AdmissionLimits;
  readonly #dials = new Set<ClientDial>();

  constructor(o: Resolved, ctor: WebSocketConstructor) {
    this.#o = o;
    this.credential = o.credential;
    this.#ctor = ctor;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
  }

  async listen(_host: ListenHost): Promise<string | undefined> {
    return undefined;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    const dial = new ClientDial(request, events, this.#o, this.#ctor, this.#limits, this.#dials);
    return { close: () => dial.stop(), linked: () => dial.linked() };
  }

  async close(): Promise<void> {
    for (const d of [...this.#dials]) d.stop();
  }
}

/** One dial: a partysocket and the connection of its current socket. */
class ClientDial {
  readonly #request: DialRequest;
  readonly #rt: Runtime;
  readonly #events: DialEvents;
  readonly #o: Resolved;
  readonly #limits: AdmissionLimits;
  readonly #registry: Set<ClientDial>;
  readonly #rws: ReconnectingWebSocket;
  #current: MessageSocketConnection | undefined;
  #stopped = false;
  #restarts = 0;
  #restartTimer: TimerHandle | undefined;
  /** A link formed over a socket of this dial since the last restart was scheduled. */
  #linkedSinceRestart = false;
  /** Consecutive attempts that closed without ever opening (bounded by `maxRetries`). */
  #failedAttempts = 0;
  #closingLocally = false;
  /** Some socket of this dial opened: later failures are reconnects, not a failed first connect. */
  #everOpened = false;
  /** Some message arrived on this dial: a lanemux server answered at least once. */
  #everHeard = false;
  /** What the runtime said about the last failed attempt (its `error` event follows the close). */
  #lastError: OpenFailureDetail | undefined;

  constructor(
    request: DialRequest,
    events: DialEvents,
    o: Resolved,
    ctor: WebSocketConstructor,
    limits: AdmissionLimits,
    registry: Set<ClientDial>,
  ) {
    this.#request = request;
    this.#rt = request.runtime;
    this.#events = events;
    this.#o = o;
    this.#limits = limits;
    this.#registry = registry;
    registry.add(this);
    this.#rws = new ReconnectingWebSocket(request.address, undefined, {
      WebSocket: ctor,
      maxEnqueuedMessages: 0,
      connectionTimeout: o.connectionTimeout,
      // Never reconnect by itself: see the file comment. lanemux calls reconnect() from its own timer.
      maxRetries: 0,
      shouldReconnectOnClose: () => false,
    });
    this.#rws.binaryType = 'arraybuffer';
    this.#rws.addEventListener('open', this.#onOpen);
    this.#rws.addEventListener('message', this.#onMessage);
    this.#rws.addEventListener('close', this.#onClose);
    this.#rws.addEventListener('error', this.#onError);
  }

  readonly #onOpen = (): void => {
    if (this.#stopped) return;
    this.#failedAttempts = 0;
    this.#everOpened = true;
    this.#lastError = undefined;
    const rws = this.#rws;
    let conn!: MessageSocketConnection;
    const driver: MessageSocketDriver = {
      // With maxEnqueuedMessages: 0, false means the socket is not open: the frame is not sent.
      send: (frame) => rws.send(frame as Uint8Array<ArrayBuffer>),
      buffered: () => rws.bufferedAmount,
      drainEvents: false,
      // The WHATWG WebSocket cannot stop reading.
      pause: () => false,
      resume: () => {},
      close: (code, text) => this.localClose(conn, code, text),
      terminate: () => this.localClose(conn, 1000, 'closed'),
      closeIsFinal: true,
    };
    // The close grace is unused: closing the client's socket is final (closeIsFinal).
    conn = new MessageSocketConnection(
      driver,
      this.#request.address,
      this.#request.frameLimit,
      this.#limits,
      0,
      this.#o.drainPollMs,
      this.#rt,
    );
    this.#current = conn;
    this.#events.open(conn);
  };

  readonly #onMessage = (ev: MessageEvent): void => {
    if (this.#current !== undefined) this.#everHeard = true;
    this.#current?.message(ev.data);
  };

  /** partysocket's `error` event: the only place the runtime says why a socket did not open. */
  readonly #onError = (ev: unknown): void => {
    this.#lastError = errorDetail(ev);
  };

  readonly #onClose = (ev: { code: number; reason: string }): void => {
    if (this.#closingLocally) return;
    const conn = this.#current;
    this.#current = undefined;
    if (conn === undefined) {
      // partysocket dispatches its close before the error event that says why (same task): decide
      // once that has been recorded.
      queueMicrotask(() => this.#attemptFailed(ev));
      return;
    }
    conn.lost(errorForClose(ev.code, ev.reason, this.#request.address));
    if (this.#stopped) return;
    // The first socket, closed before the server sent anything with a code lanemux never uses: this
    // is not a lanemux server, and retrying until the connect deadline would only hide that.
    const early = this.#everHeard
      ? undefined
      : describeEarlyClose(this.#request.address, ev.code, ev.reason === PARTYSOCKET_NO_REASON ? '' : ev.reason);
    if (!this.#request.reconnect || TERMINAL_CLOSE_CODES.has(ev.code) || early !== undefined) {
      this.stop();
      this.#events.fail(early ?? errorForClose(ev.code, ev.reason, this.#request.address));
      return;
    }
    this.#scheduleRestart();
  };

  /** A socket closed without ever opening. */
  #attemptFailed(ev: { code: number; reason: string }): void {
    if (this.#stopped) return;
    const detail = this.#lastError;
    this.#lastError = undefined;
    this.#failedAttempts++;
    // A first connect is not retried: the caller learns at once what is wrong at that address.
    if (
      !this.#everOpened ||
      !this.#request.reconnect ||
      TERMINAL_CLOSE_CODES.has(ev.code) ||
      this.#failedAttempts > this.#o.maxRetries
    ) {
      const error = describeOpenFailure(
        this.#request.address,
        detail,
        this.#o.connectionTimeout,
        this.#everOpened ? this.#failedAttempts : 0,
      );
      this.stop();
      this.#events.fail(error);
      return;
    }
    this.#scheduleRestart();
  }

  /** Our side closed `conn`: close its socket, and for a reconnecting dial open a new one after a jittered delay. */
  localClose(conn: MessageSocketConnection, code: number, text: string): void {
    if (this.#current !== conn) return;
    this.#current = undefined;
    // partysocket's close() dispatches its close event synchronously: ignore that one.
    this.#closingLocally = true;
    try {
      this.#rws.close(code, text);
    } finally {
      this.#closingLocally = false;
    }
    if (this.#stopped) return;
    if (!this.#request.reconnect) {
      this.stop();
      return;
    }
    this.#scheduleRestart();
  }

  /** Open a new socket after a jittered, growing delay, on our own unref'd timer (cancelled by stop()). */
  #scheduleRestart(): void {
    if (this.#stopped || this.#restartTimer !== undefined) return;
    // A link that formed starts the back-off over (a socket closed before its HELLO keeps it growing).
    if (this.#linkedSinceRestart) this.#restarts = 0;
    this.#linkedSinceRestart = false;
    const delay = backoffDelay(backoffFor(this.#request, this.#o), this.#restarts, this.#rt);
    this.#restarts++;
    const restart = (): void => {
      this.#restartTimer = undefined;
      if (!this.#stopped) this.#rws.reconnect();
    };
    // Until the server has answered once, a connect waits on this dial (its deadline stops the
    // dial): the timer holds the process open so that connect settles. Afterwards it must not.
    this.#restartTimer = this.#rt.setTimer(restart, delay, !this.#everHeard);
  }

  /** The transport core formed a link over the current socket. */
  linked(): void {
    this.#linkedSinceRestart = true;
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#registry.delete(this);
    if (this.#restartTimer !== undefined) this.#rt.clearTimer(this.#restartTimer);
    const conn = this.#current;
    this.#current = undefined;
    conn?.lost(new TransportError('ERR_CLOSED', 'dial closed'));
    this.#rws.close(1000, 'closed');
    this.#rws.removeEventListener('open', this.#onOpen);
    this.#rws.removeEventListener('message', this.#onMessage);
    this.#rws.removeEventListener('close', this.#onClose);
    this.#rws.removeEventListener('error', this.#onError);
  }
}

/** The reason partysocket (on Node) puts in a close event that had none. */
const PARTYSOCKET_NO_REASON = 'unknown reason';

/** The message and error code of a WebSocket `error` event, wherever the runtime puts them (never throws). */
function errorDetail(ev: unknown): OpenFailureDetail {
  try {
    const e = ev as { message?: unknown; error?: { message?: unknown; code?: unknown } | undefined };
    const inner = e.error;
    const message =
      typeof inner?.message === 'string' && inner.message !== ''
        ? inner.message
        : typeof e.message === 'string'
          ? e.message
          : '';
    const code = typeof inner?.code === 'string' ? inner.code : undefined;
    return { message, code, cause: inner ?? ev };
  } catch {
    return { message: '', code: undefined, cause: ev };
  }
}
