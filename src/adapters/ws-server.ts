/**
 * WebSocket server adapter for Node, on `ws`: accepts one WebSocket per lane (listen only; Node
 * clients dial with the WHATWG client adapter in `websocket.ts`).
 *
 * - Binary messages only; one lanemux message per WebSocket message (no extra framing).
 * - `maxPayload` is our `maxMessageSize`, so `ws` refuses larger messages before buffering them
 *   (close 1009); before the hello the limit is 4 KiB.
 * - Admission follows `ws.bufferedAmount` against `highWaterMark`, woken by the socket's `'drain'`.
 * - A burst of sends in one task is corked into one `writev`.
 * - The connection itself (admission, frame limit, GOAWAY, close codes) is the one Deno and Bun use
 *   (`message-socket-conn.ts`); this file is the `ws` socket and the listener.
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
import * as z from '../schema.ts';
import { ConfigError } from '../errors.ts';
import type { AdmissionLimits } from '../transport/admission.ts';
import { authenticateOption, headerRecord, type Authenticate } from '../transport/auth.ts';
import { TransportError, listenFailure } from '../transport/errors.ts';
import { admissionSchema } from '../transport/options.ts';
import { parseOptions } from '../validate.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from '../transport/port.ts';
import { int } from '../validate.ts';
import { MessageSocketConnection, type MessageSocketDriver } from './message-socket-conn.ts';

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
  server: z.optional(
    z.custom<HttpServer>((v) => typeof v === 'object' && v !== null && 'listen' in v, 'not an http.Server'),
  ),
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
  readonly #conns = new Set<MessageSocketConnection>();
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
    const verifyClient = (
      info: { req: { url?: string | undefined } },
      done: (ok: boolean, code?: number, message?: string) => void,
    ): void => {
      const url = info.req.url ?? '/';
      const q = url.indexOf('?');
      if ((q < 0 ? url : url.slice(0, q)) === o.path) done(true);
      else done(false, 404, 'Not Found');
    };
    const common = { verifyClient, maxPayload: host.maxMessageSize, perMessageDeflate: false, clientTracking: true };
    const wss =
      o.server !== undefined
        ? new WebSocketServer({ ...common, server: o.server })
        : new WebSocketServer({ ...common, host: o.host, port: o.port });
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
      const driver = new NodeWsDriver(ws, host.frameLimit, this.#conns);
      // No drain polling: `ws` reports drains.
      const conn = new MessageSocketConnection(
        driver,
        remote,
        host.frameLimit,
        this.#limits,
        o.closeGraceMs,
        0,
        host.runtime,
      );
      driver.adopt(conn);
      const hostHeader = req.headers.host ?? '127.0.0.1';
      conn.request = {
        url: `${secure ? 'wss' : 'ws'}://${hostHeader}${req.url ?? '/'}`,
        headers: headerRecord(req.headers),
      };
      host.accept(conn);
    });
    let addr: ReturnType<WebSocketServer['address']> | null;
    try {
      addr = wss.address();
    } catch {
      addr = null;
    }
    if (addr === null || typeof addr !== 'object')
      throw new ConfigError('server', 'the HTTP server is not listening (call server.listen() first)', {
        where: 'webSocketServerTransport',
      });
    const hostName = o.server !== undefined ? addr.address : o.host;
    // An https.Server (a tls.Server) behind this adapter serves `wss://`.
    const scheme = o.server instanceof TlsServer ? 'wss' : 'ws';
    return `${scheme}://${hostName.includes(':') ? `[${hostName}]` : hostName}:${addr.port}${o.path}`;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    queueMicrotask(() =>
      events.fail(
        new TransportError(
          'ERR_UNSUPPORTED_ADDRESS',
          `the ws server adapter does not dial (${request.address}); use webSocketClientTransport`,
        ),
      ),
    );
    return { close() {} };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const err = new TransportError('ERR_CLOSED', 'websocket server closing');
    const closing = [...this.#conns].map((c) => c.closeAndWait(err));
    const wss = this.#wss;
    const serverClosed =
      wss === undefined ? Promise.resolve() : new Promise<void>((resolve) => wss.close(() => resolve()));
    await Promise.all([...closing, serverClosed]);
  }
}

/**
 * A `ws` server socket as a {@link MessageSocketDriver}. Paused until the connection starts, so nothing
 * arrives before there is a receiver; a task's sends are corked into one `writev`.
 */
class NodeWsDriver implements MessageSocketDriver {
  readonly drainEvents = true;
  // Small messages come from Node's slab pool; the connection overwrites every byte.
  readonly alloc = Buffer.allocUnsafe;
  readonly #ws: WebSocket;
  readonly #socket: Socket;
  /** The adapter's open connections: this one leaves it when it is closed, by either side. */
  readonly #registry: Set<MessageSocketConnection>;
  #conn: MessageSocketConnection | undefined;
  #corked = false;

  constructor(ws: WebSocket, frameLimit: number, registry: Set<MessageSocketConnection>) {
    this.#ws = ws;
    // `ws` exposes its net.Socket as `_socket` (stable across ws 7–8); needed for 'drain' and cork.
    this.#socket = (ws as unknown as { _socket: Socket })._socket;
    this.#registry = registry;
    this.setFrameLimit(frameLimit);
    // Until start(), stop reading so nothing is lost.
    ws.pause();
  }

  /** Join the adapter's registry and learn of the socket's close (also before `start`). */
  adopt(conn: MessageSocketConnection): void {
    this.#conn = conn;
    this.#registry.add(conn);
    this.#ws.on('error', () => {});
    this.#ws.on('close', (code, reason) => {
      this.#registry.delete(conn);
      conn.socketClosed(code, reason.toString('utf8'));
    });
  }

  start(conn: MessageSocketConnection): void {
    const ws = this.#ws;
    ws.on('message', (data, isBinary) => {
      const bytes = toBytes(data);
      if (isBinary) conn.binary(bytes);
      else conn.text(bytes);
    });
    this.#socket.on('drain', () => conn.drained());
    ws.resume();
  }

  /**
   * Make `ws` itself refuse (close 1009) a message over the current frame limit while it arrives,
   * rather than buffer up to the server-wide `maxPayload` (the largest message after the HELLO) and
   * let us refuse it afterwards: before the HELLO the limit is 4 KiB. Like `_socket` above this uses a
   * private field, `_receiver._maxPayload` (stable across ws 7–8); if it is missing, the connection's
   * own size check still applies, only later.
   */
  setFrameLimit(bytes: number): void {
    const receiver = (this.#ws as unknown as { _receiver?: { _maxPayload?: unknown } })._receiver;
    if (receiver !== undefined && typeof receiver._maxPayload === 'number') receiver._maxPayload = bytes;
  }

  send(frame: Uint8Array): boolean {
    if (!this.#corked) {
      this.#corked = true;
      this.#socket.cork();
      queueMicrotask(this.#uncork);
    }
    this.#ws.send(frame, { binary: true });
    return true;
  }

  readonly #uncork = (): void => {
    if (!this.#corked) return;
    this.#corked = false;
    this.#socket.uncork();
  };

  buffered(): number {
    return this.#ws.bufferedAmount;
  }

  pause(): boolean {
    this.#ws.pause();
    return true;
  }

  resume(): void {
    this.#ws.resume();
  }

  close(code: number, reason: string): void {
    const ws = this.#ws;
    this.#leave();
    // A paused `ws` reads no answer to the close: the grace timer then terminates it.
    if (ws.readyState === ws.OPEN) ws.close(code, reason);
    else ws.terminate();
  }

  terminate(): void {
    this.#leave();
    this.#ws.terminate();
  }

  #leave(): void {
    if (this.#conn !== undefined) this.#registry.delete(this.#conn);
    this.#uncork();
  }
}

/** `ws` hands over a Buffer, an ArrayBuffer or (fragmented) a Buffer[] depending on binaryType. */
function toBytes(data: unknown): Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (Array.isArray(data)) return Buffer.concat(data as Buffer[]);
  return new Uint8Array(0);
}
