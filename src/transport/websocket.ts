/**
 * WebSocket client adapter on the WHATWG `WebSocket` API wrapped in partysocket, so the same file runs
 * in browsers, Deno, Bun and Node (Node 20 passes `ws` as the constructor). One WebSocket per lane.
 *
 * partysocket is configured so that lanemux owns every byte (ecosystem.md §5):
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
import { credentialOption, type CredentialSource } from './auth.ts';
import ReconnectingWebSocket from 'partysocket/ws';
import { z } from 'zod/mini';
import type { LanemuxError } from '../errors.ts';
import { AdmissionGate, type AdmissionLimits } from './admission.ts';
import { TransportError } from './errors.ts';
import { describeBytes, encodeGoaway } from './hello.ts';
import { admissionSchema, parseOptions } from './options.ts';
import { int, num } from '../validate.ts';
import type {
  Admission,
  CloseMode,
  Connection,
  ConnectionReceiver,
  DialEvents,
  DialHandle,
  DialRequest,
  ListenHost,
  TransportAdapter,
} from './port.ts';
import { setUnrefTimeout, type TimerHandle } from './runtime.ts';
import { TERMINAL_CLOSE_CODES, closeFrameFor, errorForClose } from './ws-codes.ts';

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
  /** Reconnect attempts before giving up. Defaults to Infinity. */
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
    throw new TransportError('ERR_CONFIG', 'webSocketClientTransport: no global WebSocket in this runtime; pass `WebSocket` (e.g. from the ws package on Node 20)');
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
    return { close: () => dial.stop() };
  }

  async close(): Promise<void> {
    for (const d of [...this.#dials]) d.stop();
  }
}

/** One dial: a partysocket and the connection of its current socket. */
class ClientDial {
  readonly #request: DialRequest;
  readonly #events: DialEvents;
  readonly #o: Resolved;
  readonly #limits: AdmissionLimits;
  readonly #registry: Set<ClientDial>;
  readonly #rws: ReconnectingWebSocket;
  #current: WsClientConn | undefined;
  #stopped = false;
  #restarts = 0;
  #restartTimer: TimerHandle | undefined;
  #openedAt = 0;
  /** A socket opened since the last restart was scheduled. */
  #openedSinceRestart = false;
  /** Consecutive attempts that closed without ever opening (bounded by `maxRetries`). */
  #failedAttempts = 0;
  #closingLocally = false;

  constructor(request: DialRequest, events: DialEvents, o: Resolved, ctor: WebSocketConstructor, limits: AdmissionLimits, registry: Set<ClientDial>) {
    this.#request = request;
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
  }

  readonly #onOpen = (): void => {
    if (this.#stopped) return;
    this.#openedAt = performance.now();
    this.#openedSinceRestart = true;
    this.#failedAttempts = 0;
    const conn = new WsClientConn(this.#rws, this.#request.address, this.#request.frameLimit, this.#limits, this.#o.drainPollMs, this);
    this.#current = conn;
    this.#events.open(conn);
  };

  readonly #onMessage = (ev: MessageEvent): void => {
    this.#current?.onMessage(ev.data);
  };

  readonly #onClose = (ev: { code: number; reason: string }): void => {
    if (this.#closingLocally) return;
    const conn = this.#current;
    this.#current = undefined;
    conn?.remoteClosed(errorForClose(ev.code, ev.reason, this.#request.address));
    if (this.#stopped) return;
    if (conn === undefined) this.#failedAttempts++;
    if (!this.#request.reconnect || TERMINAL_CLOSE_CODES.has(ev.code) || this.#failedAttempts > this.#o.maxRetries) {
      const error = conn === undefined
        ? new TransportError('ERR_CONNECT', `websocket to ${this.#request.address} failed to open (${ev.code}${ev.reason ? `: ${ev.reason}` : ''})`, { retryable: true })
        : errorForClose(ev.code, ev.reason, this.#request.address);
      this.stop();
      this.#events.fail(error);
      return;
    }
    this.#scheduleRestart();
  };

  /** Our side closed `conn`: close its socket, and for a reconnecting dial open a new one after a jittered delay. */
  localClose(conn: WsClientConn, reason: LanemuxError): void {
    if (this.#current !== conn) return;
    this.#current = undefined;
    const { code, reason: text } = closeFrameFor(reason);
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
    // A connection that stayed up a while starts the back-off over.
    if (this.#openedSinceRestart && performance.now() - this.#openedAt > 5_000) this.#restarts = 0;
    this.#openedSinceRestart = false;
    const o = this.#o;
    const delay = Math.min(o.maxReconnectionDelay, (o.minReconnectionDelay + Math.random() * o.reconnectionJitter) * o.reconnectionDelayGrowFactor ** this.#restarts);
    this.#restarts++;
    this.#restartTimer = setUnrefTimeout(() => {
      this.#restartTimer = undefined;
      if (!this.#stopped) this.#rws.reconnect();
    }, delay);
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#registry.delete(this);
    if (this.#restartTimer !== undefined) clearTimeout(this.#restartTimer);
    const conn = this.#current;
    this.#current = undefined;
    conn?.remoteClosed(new TransportError('ERR_CLOSED', 'dial closed'));
    this.#rws.close(1000, 'closed');
    this.#rws.removeEventListener('open', this.#onOpen);
    this.#rws.removeEventListener('message', this.#onMessage);
    this.#rws.removeEventListener('close', this.#onClose);
  }
}

class WsClientConn implements Connection {
  readonly remote: string;
  readonly #rws: ReconnectingWebSocket;
  readonly #gate: AdmissionGate;
  readonly #dial: ClientDial;
  readonly #pollMs: number;
  #frameLimit: number;
  #receiver: ConnectionReceiver | undefined;
  #closed = false;
  #poll: TimerHandle | undefined;
  /** Messages that arrived before start() (an open event and a message can share a task). */
  #early: Uint8Array[] | undefined = [];

  constructor(rws: ReconnectingWebSocket, remote: string, frameLimit: number, limits: AdmissionLimits, pollMs: number, dial: ClientDial) {
    this.#rws = rws;
    this.remote = remote;
    this.#frameLimit = frameLimit;
    this.#pollMs = pollMs;
    this.#dial = dial;
    this.#gate = new AdmissionGate(
      {
        buffered: () => rws.bufferedAmount,
        write: (frame) => {
          // With maxEnqueuedMessages: 0, false means the socket is not open: the frame is not sent.
          if (!rws.send(frame as Uint8Array<ArrayBuffer>)) this.#lostNow();
        },
        blocked: () => this.#schedulePoll(),
      },
      limits,
      remote,
    );
  }

  start(receiver: ConnectionReceiver): void {
    this.#receiver = receiver;
    const early = this.#early ?? [];
    this.#early = undefined;
    for (const m of early) {
      if (this.#closed) return;
      this.#deliver(m);
    }
  }

  onMessage(data: unknown): void {
    if (this.#closed) return;
    let bytes: Uint8Array;
    if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else {
      this.#refuse(new TransportError('ERR_MALFORMED_ENVELOPE', `non-binary WebSocket message from ${this.remote} (${typeof data}); lanemux speaks binary only`));
      return;
    }
    if (this.#early !== undefined) this.#early.push(bytes);
    else this.#deliver(bytes);
  }

  #deliver(bytes: Uint8Array): void {
    if (bytes.byteLength > this.#frameLimit) {
      this.#refuse(new TransportError('ERR_FRAME_TOO_LARGE', `message of ${bytes.byteLength} bytes from ${this.remote} exceeds the limit of ${this.#frameLimit} bytes (${describeBytes(bytes)})`));
      return;
    }
    this.#receiver?.message(bytes);
  }

  setFrameLimit(bytes: number): void {
    this.#frameLimit = bytes;
  }

  send(head: Uint8Array, body?: Uint8Array): Admission {
    if (this.#closed) return Promise.reject(new TransportError('ERR_PEER_GONE', `websocket to ${this.remote} is closed`, { retryable: true }));
    const frame = new Uint8Array(head.byteLength + (body?.byteLength ?? 0));
    frame.set(head, 0);
    if (body !== undefined) frame.set(body, head.byteLength);
    return this.#gate.offer(frame);
  }

  #schedulePoll(): void {
    if (this.#poll !== undefined || this.#closed) return;
    this.#poll = setUnrefTimeout(() => {
      this.#poll = undefined;
      this.#gate.drain();
      if (this.#gate.waiting > 0) this.#schedulePoll();
    }, this.#pollMs);
  }

  bufferedAmount(): number {
    return this.#rws.bufferedAmount + this.#gate.pendingBytes;
  }

  pause(): boolean {
    return false;
  }

  resume(): void {}

  close(reason: LanemuxError, _mode: CloseMode = 'graceful'): void {
    if (this.#closed) return;
    this.#finish(reason);
    this.#dial.localClose(this, reason);
    this.#receiver?.closed(reason);
  }

  /** The socket closed under us. */
  remoteClosed(error: LanemuxError): void {
    if (this.#closed) return;
    this.#finish(error);
    this.#receiver?.closed(error);
  }

  #finish(error: LanemuxError): void {
    this.#closed = true;
    this.#early = undefined;
    if (this.#poll !== undefined) clearTimeout(this.#poll);
    this.#gate.fail(error);
  }

  #lostNow(): void {
    queueMicrotask(() => this.remoteClosed(new TransportError('ERR_PEER_GONE', `websocket to ${this.remote} is not open`, { retryable: true })));
  }

  #refuse(error: LanemuxError): void {
    if (this.#closed) return;
    this.#rws.send(encodeGoaway(error) as Uint8Array<ArrayBuffer>);
    this.close(error, 'graceful');
  }
}
