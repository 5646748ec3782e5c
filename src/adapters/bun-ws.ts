/**
 * WebSocket server adapter for Bun, on `Bun.serve`'s `websocket` handler: accepts one WebSocket per
 * lane (listen only; Bun clients dial with `webSocketClientTransport`, which uses Bun's global
 * `WebSocket`). Same wire as the Node server (`ws-server.ts`); the connection logic is shared
 * (`message-socket-conn.ts`).
 *
 * - Binary messages only, one lanemux message per WebSocket message. `maxPayloadLength` is our
 *   `maxMessageSize`, so Bun refuses larger messages before buffering them (close 1009); the
 *   per-connection limit (4 KiB before the HELLO) is checked on each message.
 * - Admission follows `getBufferedAmount()` against `highWaterMark`, woken by Bun's `drain`
 *   handler. `backpressureLimit` is set above anything admission lets through, so Bun never drops
 *   a message silently.
 * - `pause()`/`resume()` stop and restart reading (the client sees TCP back-pressure).
 * - Requests to other paths go to `fetch` (an HTTP app's handler) if given, else get 404; plain HTTP
 *   on the path gets 426.
 *
 * Needs Bun. Elsewhere {@link bunWebSocketServerTransport} throws `ERR_UNSUPPORTED_RUNTIME`.
 *
 * @example
 * ```ts
 * import { bunWebSocketServerTransport } from 'lanemux/transport/bun-ws';
 * const node = await createNode({ transports: [bunWebSocketServerTransport({ port: 8080 })] });
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

/** Options of {@link bunWebSocketServerTransport}. */
export type BunWebSocketServerTransportOptions = WebSocketListenerOptions;

// The few Bun APIs used, declared here because the TypeScript libs of this package have no Bun.
interface SocketData {
  readonly remote: string;
  conn: MessageSocketConnection | undefined;
  readonly upgrade: UpgradeRequest;
}
interface BunServerWebSocket {
  readonly data: SocketData;
  /** Bytes sent, or -1 when queued under back-pressure, or 0 when dropped. */
  send(data: Uint8Array, compress?: boolean): number;
  getBufferedAmount(): number;
  close(code?: number, reason?: string): void;
  terminate(): void;
  pause?(): void;
  resume?(): void;
}
interface BunServer {
  readonly port: number;
  upgrade(request: Request, options: { data: SocketData }): boolean;
  requestIP(request: Request): { address: string; port: number } | null;
  stop(closeActiveConnections?: boolean): unknown;
}
interface BunServe {
  serve(options: {
    hostname: string;
    port: number;
    fetch(request: Request, server: BunServer): Response | Promise<Response> | undefined;
    error(error: unknown): Response;
    websocket: {
      maxPayloadLength: number;
      backpressureLimit: number;
      closeOnBackpressureLimit: boolean;
      perMessageDeflate: boolean;
      open(ws: BunServerWebSocket): void;
      message(ws: BunServerWebSocket, message: string | Uint8Array): void;
      drain(ws: BunServerWebSocket): void;
      close(ws: BunServerWebSocket, code: number, reason: string): void;
    };
  }): BunServer;
}

/** Bun clamps `backpressureLimit` to an unsigned 32-bit integer. */
const MAX_BACKPRESSURE_LIMIT = 2 ** 32 - 1;

/**
 * Create a Bun WebSocket server adapter. Throws `ERR_UNSUPPORTED_RUNTIME` outside Bun.
 *
 * Bun's payload limit is server-wide (`maxPayloadLength` = `maxMessageSize`): a message before the
 * HELLO is buffered up to that size before the 4 KiB pre-HELLO check refuses it.
 */
export function bunWebSocketServerTransport(options: BunWebSocketServerTransportOptions = {}): TransportAdapter {
  const bun = runtimeGlobal<BunServe>('Bun', ['serve']);
  if (bun === undefined)
    throw unsupportedRuntimeError('bunWebSocketServerTransport', 'bun-ws', 'Bun.serve', 'ws-server');
  return new BunWsServerAdapter(bun, parseOptions(wsListenerOptionsSchema, options, 'bunWebSocketServerTransport'));
}

class BunWsServerAdapter implements TransportAdapter {
  readonly name = 'bun-ws-server';
  readonly dialSchemes = [] as const;
  readonly authenticate: Authenticate | undefined;
  readonly #bun: BunServe;
  readonly #o: WsListenerOptions;
  readonly #limits: AdmissionLimits;
  readonly #conns = new Set<MessageSocketConnection>();
  #server: BunServer | undefined;
  #closed = false;

  constructor(bun: BunServe, o: WsListenerOptions) {
    this.#bun = bun;
    this.#o = o;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
    this.authenticate = o.authenticate;
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    const o = this.#o;
    try {
      this.#server = this.#bun.serve({
        hostname: o.host,
        port: o.port,
        fetch: (request, server) => {
          if (new URL(request.url).pathname !== o.path)
            return o.fetch === undefined ? new Response('not found', { status: 404 }) : o.fetch(request);
          if (request.headers.get('upgrade')?.toLowerCase() !== 'websocket')
            return new Response('lanemux WebSocket endpoint', { status: 426 });
          if (this.#closed) return new Response('closing', { status: 503 });
          const ip = server.requestIP(request);
          const remote = formatWsAddress(ip?.address ?? '?', ip?.port ?? 0, '');
          const upgrade: UpgradeRequest = { url: request.url, headers: headerRecord(request.headers) };
          return server.upgrade(request, { data: { remote, conn: undefined, upgrade } })
            ? undefined
            : new Response('upgrade failed', { status: 400 });
        },
        // A failing `fetch` app: a bare 500, as on Deno, rather than Bun's page showing the error.
        error: () => new Response('error', { status: 500 }),
        websocket: {
          maxPayloadLength: host.maxMessageSize,
          // Admission keeps the buffer under highWaterMark plus one message: Bun must never drop one.
          backpressureLimit: Math.min(MAX_BACKPRESSURE_LIMIT, o.highWaterMark + host.maxMessageSize + 64 * 1024),
          closeOnBackpressureLimit: false,
          perMessageDeflate: false,
          open: (ws) => {
            if (this.#closed) {
              ws.close(1001, 'server closing');
              return;
            }
            const conn = new MessageSocketConnection(
              driverFor(ws),
              ws.data.remote,
              host.frameLimit,
              this.#limits,
              o.closeGraceMs,
              o.drainPollMs,
              host.runtime,
            );
            conn.request = ws.data.upgrade;
            ws.data.conn = conn;
            this.#conns.add(conn);
            host.accept(conn);
          },
          message: (ws, message) => ws.data.conn?.message(message),
          drain: (ws) => ws.data.conn?.drained(),
          close: (ws, code, reason) => {
            const conn = ws.data.conn;
            if (conn === undefined) return;
            this.#conns.delete(conn);
            conn.socketClosed(code, reason);
          },
        },
      });
    } catch (e) {
      throw listenFailure('bunWebSocketServerTransport', o.host, o.port, e);
    }
    return formatWsAddress(o.host, this.#server.port, o.path);
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    return refuseDial('Bun WebSocket server', request, events);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await closeConnections(this.#conns);
    await this.#server?.stop(true);
  }
}

function driverFor(ws: BunServerWebSocket): MessageSocketDriver {
  return {
    // 0 means dropped (socket closed): the connection learns it is gone.
    send: (frame) => ws.send(frame, false) !== 0,
    buffered: () => ws.getBufferedAmount(),
    drainEvents: true,
    pause: () => {
      if (typeof ws.pause !== 'function') return false;
      ws.pause();
      return true;
    },
    resume: () => ws.resume?.(),
    close: (code, reason) => {
      // Read on, so the client's answer to the close arrives even while paused.
      ws.resume?.();
      quietly(() => ws.close(code, reason));
    },
    terminate: () => quietly(() => ws.terminate()),
  };
}
