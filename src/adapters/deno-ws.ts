/**
 * WebSocket server adapter for Deno, on `Deno.serve` + `Deno.upgradeWebSocket`: accepts one
 * WebSocket per lane (listen only; Deno clients dial with `webSocketClientTransport`, which uses
 * Deno's global `WebSocket`). Same wire as the Node server (`ws-server.ts`); the connection logic
 * is shared (`message-socket-conn.ts`).
 *
 * - Binary messages only, one lanemux message per WebSocket message; the frame limit (4 KiB before
 *   the HELLO) is checked on each message as it is delivered. Deno has no per-socket payload limit:
 *   the runtime assembles a message of up to 64 MiB (its own cap) before that check refuses it, so
 *   an unauthenticated peer can make the server buffer that much per connection. Put a proxy with a
 *   message-size limit in front of a Deno WebSocket server that faces untrusted clients, or use the
 *   Node server (`ws` lowers its limit per connection before the HELLO).
 * - Admission follows the socket's `bufferedAmount` against `highWaterMark`; Deno has no drain
 *   event, so the buffer is re-checked every `drainPollMs` while an admission waits.
 * - Deno cannot pause reading a server WebSocket: `pause()` returns false, and receive-side
 *   back-pressure relies on the mux's credit. Use `denoTcpTransport` between servers when a
 *   stalled reader must stall the sender's socket.
 * - Requests to other paths go to `fetch` (an HTTP app's handler) if given, else get 404; plain HTTP
 *   on the path gets 426.
 *
 * Needs Deno (`--allow-net`). Elsewhere {@link denoWebSocketServerTransport} throws
 * `ERR_UNSUPPORTED_RUNTIME`.
 *
 * @example
 * ```ts
 * import { denoWebSocketServerTransport } from 'lanemux/transport/deno-ws';
 * const node = await createNode({ transports: [denoWebSocketServerTransport({ port: 8080 })] });
 * node.address; // 'ws://127.0.0.1:8080/lanemux'
 * ```
 *
 * @packageDocumentation
 */
import type { AdmissionLimits } from '../transport/admission.ts';
import { listenFailure } from '../transport/errors.ts';
import { closeConnections, quietly, refuseDial } from './listen-only.ts';
import { MessageSocketConnection, type MessageSocketDriver } from './message-socket-conn.ts';
import { parseOptions } from '../validate.ts';
import { headerRecord, type Authenticate, type UpgradeRequest } from '../transport/auth.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from '../transport/port.ts';
import { runtimeGlobal, unsupportedRuntimeError } from '../transport/runtime-guard.ts';
import {
  formatWsAddress,
  wsListenerOptionsSchema,
  type WebSocketListenerOptions,
  type WsListenerOptions,
} from './socket-options.ts';

/** Options of {@link denoWebSocketServerTransport}. */
export type DenoWebSocketServerTransportOptions = WebSocketListenerOptions;

// The few Deno APIs used, declared here because the TypeScript libs of this package have no Deno.
interface DenoServeInfo {
  readonly remoteAddr: { readonly hostname: string; readonly port: number };
}
interface DenoHttpServer {
  readonly addr: { readonly hostname: string; readonly port: number };
  readonly finished: Promise<void>;
  shutdown(): Promise<void>;
}
interface DenoServe {
  serve(
    options: {
      hostname: string;
      port: number;
      signal: AbortSignal;
      onListen(): void;
      onError(error: unknown): Response;
    },
    handler: (request: Request, info: DenoServeInfo) => Response | Promise<Response>,
  ): DenoHttpServer;
  upgradeWebSocket(request: Request): { socket: WebSocket; response: Response };
}

/** Create a Deno WebSocket server adapter. Throws `ERR_UNSUPPORTED_RUNTIME` outside Deno. */
export function denoWebSocketServerTransport(options: DenoWebSocketServerTransportOptions = {}): TransportAdapter {
  const deno = runtimeGlobal<DenoServe>('Deno', ['serve', 'upgradeWebSocket']);
  if (deno === undefined)
    throw unsupportedRuntimeError(
      'denoWebSocketServerTransport',
      'deno-ws',
      'Deno.serve and Deno.upgradeWebSocket',
      'ws-server',
    );
  return new DenoWsServerAdapter(deno, parseOptions(wsListenerOptionsSchema, options, 'denoWebSocketServerTransport'));
}

class DenoWsServerAdapter implements TransportAdapter {
  readonly name = 'deno-ws-server';
  readonly dialSchemes = [] as const;
  readonly authenticate: Authenticate | undefined;
  readonly #deno: DenoServe;
  readonly #o: WsListenerOptions;
  readonly #limits: AdmissionLimits;
  readonly #conns = new Set<MessageSocketConnection>();
  readonly #abort = new AbortController();
  #server: DenoHttpServer | undefined;
  #closed = false;

  constructor(deno: DenoServe, o: WsListenerOptions) {
    this.#deno = deno;
    this.#o = o;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
    this.authenticate = o.authenticate;
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    const o = this.#o;
    const handler = (request: Request, info: DenoServeInfo): Response | Promise<Response> => {
      if (new URL(request.url).pathname !== o.path)
        return o.fetch === undefined ? new Response('not found', { status: 404 }) : o.fetch(request);
      if (request.headers.get('upgrade')?.toLowerCase() !== 'websocket')
        return new Response('lanemux WebSocket endpoint', { status: 426 });
      if (this.#closed) return new Response('closing', { status: 503 });
      // Read the peer address before upgrading: Deno drops it from the request afterwards.
      const remote = formatWsAddress(info.remoteAddr.hostname, info.remoteAddr.port, '');
      const upgrade: UpgradeRequest = { url: request.url, headers: headerRecord(request.headers) };
      const { socket, response } = this.#deno.upgradeWebSocket(request);
      this.#adopt(socket, remote, host, upgrade);
      return response;
    };
    try {
      this.#server = this.#deno.serve(
        {
          hostname: o.host,
          port: o.port,
          signal: this.#abort.signal,
          onListen() {},
          onError: () => new Response('error', { status: 500 }),
        },
        handler,
      );
    } catch (e) {
      throw listenFailure('denoWebSocketServerTransport', o.host, o.port, e);
    }
    return formatWsAddress(o.host, this.#server.addr.port, o.path);
  }

  /** Wire a freshly upgraded socket: the connection is handed over once the socket is open. */
  #adopt(socket: WebSocket, remote: string, host: ListenHost, upgrade: UpgradeRequest): void {
    socket.binaryType = 'arraybuffer';
    const driver: MessageSocketDriver = {
      send: (frame) => {
        if (socket.readyState !== WebSocket.OPEN) return false;
        socket.send(frame as Uint8Array<ArrayBuffer>);
        return true;
      },
      buffered: () => socket.bufferedAmount,
      drainEvents: false,
      pause: () => false,
      resume: () => {},
      close: (code, reason) => closeQuietly(socket, code, reason),
      terminate: () => closeQuietly(socket, undefined, undefined),
    };
    let conn: MessageSocketConnection | undefined;
    socket.onopen = () => {
      if (this.#closed) {
        closeQuietly(socket, 1001, 'server closing');
        return;
      }
      conn = new MessageSocketConnection(
        driver,
        remote,
        host.frameLimit,
        this.#limits,
        this.#o.closeGraceMs,
        this.#o.drainPollMs,
        host.runtime,
      );
      conn.request = upgrade;
      this.#conns.add(conn);
      host.accept(conn);
    };
    socket.onmessage = (e) => conn?.message(e.data);
    socket.onerror = () => {};
    socket.onclose = (e) => {
      if (conn === undefined) return;
      this.#conns.delete(conn);
      conn.socketClosed(e.code, e.reason);
    };
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    return refuseDial('Deno WebSocket server', request, events);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await closeConnections(this.#conns);
    this.#abort.abort();
    await this.#server?.finished.catch(() => {});
  }
}

/** Close unless the socket is already closing or closed (then nothing is left to do). */
function closeQuietly(socket: WebSocket, code: number | undefined, reason: string | undefined): void {
  if (socket.readyState === WebSocket.CLOSING || socket.readyState === WebSocket.CLOSED) return;
  quietly(() => (code === undefined ? socket.close() : socket.close(code, reason)));
}
