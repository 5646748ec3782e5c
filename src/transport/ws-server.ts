/**
 * WebSocket server adapter for Node, on `ws`: accepts one WebSocket per lane (listen only; Node
 * clients dial with the WHATWG client adapter in `websocket.ts`).
 *
 * - Binary messages only; one lanemux message per WebSocket message (no extra framing).
 * - `maxPayload` is our `maxMessageSize`, so `ws` refuses larger messages before buffering them
 *   (close 1009); before the hello the limit is 4 KiB.
 * - Admission follows `ws.bufferedAmount` against `highWaterMark`, woken by the socket's `'drain'`.
 * - A burst of sends in one task is corked into one `writev`.
 * - `perMessageDeflate` is off: token batches are small and latency-bound.
 *
 * @example
 * ```ts
 * const server = await createMessenger({ transports: [webSocketServerTransport({ port: 0 })] });
 * server.addresses[0]; // 'ws://127.0.0.1:PORT/lanemux'
 * ```
 *
 * @packageDocumentation
 */
import type { Server as HttpServer } from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import { WebSocketServer, type WebSocket } from 'ws';
import { z } from 'zod/mini';
import { ConfigError, type LanemuxError } from '../errors.ts';
import { AdmissionGate, type AdmissionLimits } from './admission.ts';
import { TransportError, listenFailure } from './errors.ts';
import { describeBytes, encodeGoaway } from './hello.ts';
import { admissionSchema, parseOptions } from './options.ts';
import { int } from '../validate.ts';
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
import { closeFrameFor, errorForClose } from './ws-codes.ts';
import { authenticateOption, headerRecord, type Authenticate, type UpgradeRequest } from './auth.ts';

/** Options of {@link webSocketServerTransport}. */
export interface WebSocketServerTransportOptions {
  /** Listen on this host (ignored with `server`). Defaults to `127.0.0.1`. */
  readonly host?: string;
  /** Listen on this port, 0 for a free one (ignored with `server`). Defaults to 0. */
  readonly port?: number;
  /** Attach to an existing, already listening HTTP server instead of creating one. */
  readonly server?: HttpServer;
  /**
   * URL path of the endpoint. Defaults to `/lanemux`. An upgrade at another path is answered with
   * HTTP 404, so a client can say "wrong path" rather than just "refused".
   */
  readonly path?: string;
  /** Admission is synchronous while the socket buffers fewer bytes than this. Defaults to 1 MiB. */
  readonly highWaterMark?: number;
  /** Bytes that may wait for admission per connection before a send is refused. Defaults to 8 MiB. */
  readonly maxPendingBytes?: number;
  /** After a graceful close, terminate the socket if the close handshake has not finished. Defaults to 2,000 ms. */
  readonly closeGraceMs?: number;
  /**
   * Authenticate each peer from its upgrade request (URL, headers, cookies) and HELLO credential;
   * see `Authenticate`. Defaults to the messenger's `authenticate`, else none.
   */
  readonly authenticate?: Authenticate;
}

const optionsSchema = z.object({
  host: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  port: z._default(int(0, 65535), 0),
  server: z.optional(z.custom<HttpServer>((v) => typeof v === 'object' && v !== null && 'listen' in v, 'not an http.Server')),
  path: z._default(z.string().check(z.startsWith('/')), '/lanemux'),
  ...admissionSchema,
  closeGraceMs: z._default(int(0, 600_000), 2_000),
  ...authenticateOption,
});

type Resolved = z.output<typeof optionsSchema>;

/** Create a WebSocket server adapter (Node, `ws`). */
export function webSocketServerTransport(options: WebSocketServerTransportOptions = {}): TransportAdapter {
  return new WsServerAdapter(parseOptions(optionsSchema, options, 'webSocketServerTransport'));
}

class WsServerAdapter implements TransportAdapter {
  readonly name = 'ws-server';
  readonly dialSchemes = [] as const;
  readonly authenticate: Authenticate | undefined;
  readonly #o: Resolved;
  readonly #limits: AdmissionLimits;
  readonly #conns = new Set<WsServerConn>();
  #wss: WebSocketServer | undefined;
  #closed = false;

  constructor(o: Resolved) {
    this.#o = o;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
    this.authenticate = o.authenticate;
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    const o = this.#o;
    // No `path` option: `ws` answers an upgrade at another path with a bare 400, which a client
    // cannot tell from a malformed request. verifyClient runs after ws's own header checks.
    const verifyClient = (info: { req: { url?: string | undefined } }, done: (ok: boolean, code?: number, message?: string) => void): void => {
      const url = info.req.url ?? '/';
      const q = url.indexOf('?');
      if ((q < 0 ? url : url.slice(0, q)) === o.path) done(true);
      else done(false, 404, 'Not Found');
    };
    const common = { verifyClient, maxPayload: host.maxMessageSize, perMessageDeflate: false, clientTracking: true };
    const wss = o.server !== undefined ? new WebSocketServer({ ...common, server: o.server }) : new WebSocketServer({ ...common, host: o.host, port: o.port });
    this.#wss = wss;
    if (o.server === undefined) {
      await new Promise<void>((resolve, reject) => {
        const fail = (e: unknown): void => reject(listenFailure('webSocketServerTransport', o.host, o.port, e));
        wss.once('error', fail);
        wss.once('listening', () => {
          wss.off('error', fail);
          resolve();
        });
      });
    }
    wss.on('error', () => {});
    wss.on('connection', (ws, req) => {
      if (this.#closed) {
        ws.terminate();
        return;
      }
      const secure = (req.socket as { encrypted?: boolean }).encrypted === true;
      const remote = `${secure ? 'wss' : 'ws'}://${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? 0}`;
      const conn = new WsServerConn(ws, remote, host.frameLimit, this.#limits, o.closeGraceMs, this.#conns);
      const hostHeader = req.headers.host ?? '127.0.0.1';
      conn.request = { url: `${secure ? 'wss' : 'ws'}://${hostHeader}${req.url ?? '/'}`, headers: headerRecord(req.headers) };
      host.accept(conn);
    });
    let addr: ReturnType<WebSocketServer['address']> | null;
    try {
      addr = wss.address();
    } catch {
      addr = null;
    }
    if (addr === null || typeof addr !== 'object') throw new ConfigError('server', 'the HTTP server is not listening (call server.listen() first)', { where: 'webSocketServerTransport' });
    const hostName = o.server !== undefined ? addr.address : o.host;
    // An https.Server (a tls.Server) behind this adapter serves `wss://`.
    const scheme = o.server instanceof TlsServer ? 'wss' : 'ws';
    return `${scheme}://${hostName.includes(':') ? `[${hostName}]` : hostName}:${addr.port}${o.path}`;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    queueMicrotask(() => events.fail(new TransportError('ERR_UNSUPPORTED_ADDRESS', `the ws server adapter does not dial (${request.address}); use webSocketClientTransport`)));
    return { close() {} };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const err = new TransportError('ERR_CLOSED', 'websocket server closing');
    const closing = [...this.#conns].map((c) => c.closeAndWait(err));
    const wss = this.#wss;
    const serverClosed = wss === undefined ? Promise.resolve() : new Promise<void>((resolve) => wss.close(() => resolve()));
    await Promise.all([...closing, serverClosed]);
  }
}

class WsServerConn implements Connection {
  readonly remote: string;
  /** The upgrade request, for `authenticate`. */
  request: UpgradeRequest | undefined;
  readonly #ws: WebSocket;
  readonly #socket: Socket;
  readonly #gate: AdmissionGate;
  readonly #closeGraceMs: number;
  readonly #registry: Set<WsServerConn>;
  readonly #done: Promise<void>;
  #frameLimit: number;
  #receiver: ConnectionReceiver | undefined;
  #corked = false;
  #closed = false;

  constructor(ws: WebSocket, remote: string, frameLimit: number, limits: AdmissionLimits, closeGraceMs: number, registry: Set<WsServerConn>) {
    this.#ws = ws;
    // `ws` exposes its net.Socket as `_socket` (stable across ws 7–8); needed for 'drain' and cork.
    this.#socket = (ws as unknown as { _socket: Socket })._socket;
    this.remote = remote;
    this.#frameLimit = frameLimit;
    this.#applyFrameLimit();
    this.#closeGraceMs = closeGraceMs;
    this.#registry = registry;
    registry.add(this);
    this.#done = new Promise<void>((resolve) => ws.once('close', () => resolve()));
    this.#gate = new AdmissionGate({ buffered: () => ws.bufferedAmount, write: (f) => this.#write(f) }, limits, remote);
    // Until start(), stop reading so nothing is lost.
    ws.pause();
  }

  start(receiver: ConnectionReceiver): void {
    this.#receiver = receiver;
    const ws = this.#ws;
    ws.on('message', (data, isBinary) => {
      if (this.#closed) return;
      const bytes = toBytes(data);
      if (!isBinary) {
        this.#refuse(new TransportError('ERR_MALFORMED_ENVELOPE', `text WebSocket message from ${this.remote} (${describeBytes(bytes)}); lanemux speaks binary only`));
        return;
      }
      if (bytes.byteLength > this.#frameLimit) {
        this.#refuse(new TransportError('ERR_FRAME_TOO_LARGE', `message of ${bytes.byteLength} bytes from ${this.remote} exceeds the limit of ${this.#frameLimit} bytes`));
        return;
      }
      receiver.message(bytes);
    });
    ws.on('error', () => {});
    ws.on('close', (code, reason) => this.#lost(errorForClose(code, reason.toString('utf8'), this.remote)));
    this.#socket.on('drain', () => this.#gate.drain());
    ws.resume();
  }

  setFrameLimit(bytes: number): void {
    this.#frameLimit = bytes;
    this.#applyFrameLimit();
  }

  /**
   * Make `ws` itself refuse (close 1009) a message over the current frame limit while it arrives,
   * rather than buffer up to the server-wide `maxPayload` (the largest message after the HELLO) and
   * let us refuse it afterwards: before the HELLO the limit is 4 KiB. Like `_socket` above this uses a
   * private field, `_receiver._maxPayload` (stable across ws 7–8); if it is missing, the size check in
   * the 'message' handler still applies, only later.
   */
  #applyFrameLimit(): void {
    const receiver = (this.#ws as unknown as { _receiver?: { _maxPayload?: unknown } })._receiver;
    if (receiver !== undefined && typeof receiver._maxPayload === 'number') receiver._maxPayload = this.#frameLimit;
  }

  send(head: Uint8Array, body?: Uint8Array): Admission {
    if (this.#closed) return Promise.reject(new TransportError('ERR_PEER_GONE', `websocket to ${this.remote} is closed`, { retryable: true }));
    const frame = Buffer.allocUnsafe(head.byteLength + (body?.byteLength ?? 0));
    frame.set(head, 0);
    if (body !== undefined) frame.set(body, head.byteLength);
    return this.#gate.offer(frame);
  }

  #write(frame: Uint8Array): void {
    if (!this.#corked) {
      this.#corked = true;
      this.#socket.cork();
      queueMicrotask(this.#uncork);
    }
    this.#ws.send(frame, { binary: true });
  }

  readonly #uncork = (): void => {
    if (!this.#corked) return;
    this.#corked = false;
    this.#socket.uncork();
  };

  bufferedAmount(): number {
    return this.#ws.bufferedAmount + this.#gate.pendingBytes;
  }

  pause(): boolean {
    this.#ws.pause();
    return true;
  }

  resume(): void {
    this.#ws.resume();
  }

  close(reason: LanemuxError, mode: CloseMode = 'graceful'): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#registry.delete(this);
    this.#gate.fail(reason);
    this.#uncork();
    const ws = this.#ws;
    if (mode === 'graceful' && ws.readyState === ws.OPEN) {
      const { code, reason: text } = closeFrameFor(reason);
      ws.close(code, text);
      const t = setTimeout(() => ws.terminate(), this.#closeGraceMs);
      t.unref();
      ws.once('close', () => clearTimeout(t));
    } else {
      ws.terminate();
    }
    this.#receiver?.closed(reason);
  }

  /** Close (gracefully) and resolve when the socket is really closed. */
  closeAndWait(reason: LanemuxError): Promise<void> {
    this.close(reason, 'graceful');
    return this.#done;
  }

  #refuse(error: LanemuxError): void {
    if (this.#closed) return;
    this.#ws.send(encodeGoaway(error), { binary: true });
    this.close(error, 'graceful');
  }

  #lost(error: LanemuxError): void {
    if (this.#closed) return;
    this.close(error, 'abort');
  }
}

/** `ws` hands over a Buffer, an ArrayBuffer or (fragmented) a Buffer[] depending on binaryType. */
function toBytes(data: unknown): Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (Array.isArray(data)) return Buffer.concat(data as Buffer[]);
  return new Uint8Array(0);
}
