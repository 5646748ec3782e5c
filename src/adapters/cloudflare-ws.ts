/**
 * WebSocket server adapter for Cloudflare Workers: a Worker's (or a Durable Object's) `fetch` handler
 * hands lanemux's upgrade requests to {@link CloudflareWebSocketTransport.fetch}, which answers with one
 * end of a `WebSocketPair` and accepts the other as a lane connection. Same wire as the Node, Deno and
 * Bun servers (the connection logic is `message-socket-conn.ts`); the core is unchanged.
 *
 * Workers forbid using one request's I/O from another, so a node that serves many sockets lives in a
 * Durable Object (every socket is the object's I/O); in a plain Worker, make one node per request.
 * Nothing may start at global scope there either: create the node inside `fetch` or the object's
 * constructor. Workers expose no send-buffer size, so admission sees 0 buffered: what one link holds is
 * bounded by credit and the peer window instead (docs/protocol.md §8.2).
 *
 * @example
 * ```ts
 * import { cloudflareWebSocketTransport } from 'lanemux/transport/cloudflare';
 * export class Hub {
 *   transport = cloudflareWebSocketTransport();
 *   node = createNode({ transports: [this.transport] });
 *   async fetch(request: Request) { await this.node; return this.transport.fetch(request); }
 * }
 * ```
 *
 * @packageDocumentation
 */
import type { AdmissionLimits } from '../transport/admission.ts';
import { headerRecord, type Authenticate, type UpgradeRequest } from '../transport/auth.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from '../transport/port.ts';
import { unsupportedRuntimeError } from '../transport/runtime-guard.ts';
import { parseOptions } from '../validate.ts';
import { closeConnections, quietly, refuseDial } from './listen-only.ts';
import { MessageSocketConnection, type MessageSocketDriver } from './message-socket-conn.ts';
import { type SocketWebSocketServerOptions, type WsServerOptions, wsServerOptionsSchema } from './socket-options.ts';

/** Options of {@link cloudflareWebSocketTransport}: those of the other WebSocket servers but `host`/`port` (the Worker has them). */
export type CloudflareWebSocketTransportOptions = Omit<SocketWebSocketServerOptions, 'host' | 'port'>;

/** The adapter: a transport for `createNode`, plus the upgrade handler the Worker calls. */
export interface CloudflareWebSocketTransport extends TransportAdapter {
  /**
   * Answer a request for this node: a WebSocket upgrade on the adapter's path (default `/lanemux`)
   * gets `101` with the client end of a new `WebSocketPair`; the path without an upgrade gets 426,
   * another path 404, and a request before `createNode` has started the adapter (or after close) 503.
   */
  fetch(request: Request): Response;
}

// The Workers APIs used, declared here because this package's TypeScript libs have no Workers types.
interface WorkersWebSocket {
  accept(): void;
  send(data: ArrayBuffer | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: 'message', listener: (e: { data: unknown }) => void): void;
  addEventListener(type: 'close', listener: (e: { code: number; reason: string }) => void): void;
  addEventListener(type: 'error', listener: () => void): void;
  readonly readyState: number;
  readonly bufferedAmount?: number;
  binaryType?: string;
}
type WebSocketPairCtor = new () => { 0: WorkersWebSocket; 1: WorkersWebSocket };
type WorkersResponseInit = ResponseInit & { webSocket: WorkersWebSocket };

const OPEN = 1;

/** Create the Workers WebSocket server adapter. Throws `ERR_UNSUPPORTED_RUNTIME` where there is no `WebSocketPair`. */
export function cloudflareWebSocketTransport(
  options: CloudflareWebSocketTransportOptions = {},
): CloudflareWebSocketTransport {
  const pair = (globalThis as { WebSocketPair?: WebSocketPairCtor }).WebSocketPair;
  if (typeof pair !== 'function')
    throw unsupportedRuntimeError('cloudflareWebSocketTransport', 'cloudflare', 'WebSocketPair', 'ws-server');
  const o = parseOptions(wsServerOptionsSchema, options, 'cloudflareWebSocketTransport');
  return new CloudflareWsAdapter(pair, o);
}

class CloudflareWsAdapter implements CloudflareWebSocketTransport {
  readonly name = 'cloudflare-ws-server';
  readonly dialSchemes = [] as const;
  readonly authenticate: Authenticate | undefined;
  readonly #Pair: WebSocketPairCtor;
  readonly #o: WsServerOptions;
  readonly #limits: AdmissionLimits;
  readonly #conns = new Set<MessageSocketConnection>();
  #host: ListenHost | undefined;
  #closed = false;

  constructor(Pair: WebSocketPairCtor, o: WsServerOptions) {
    this.#Pair = Pair;
    this.#o = o;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
    this.authenticate = o.authenticate;
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    this.#host = host;
    // The Worker's public URL is the platform's: peers dial it, the node has no address of its own.
    return undefined;
  }

  fetch(request: Request): Response {
    if (new URL(request.url).pathname !== this.#o.path) return new Response('not found', { status: 404 });
    if (request.headers.get('upgrade')?.toLowerCase() !== 'websocket')
      return new Response('lanemux WebSocket endpoint', { status: 426 });
    const host = this.#host;
    if (host === undefined || this.#closed) return new Response('not ready', { status: 503 });
    const pair = new this.#Pair();
    const client = pair[0];
    const server = pair[1];
    // Newer compatibility dates deliver binary messages as Blobs (the standard default): ask for bytes.
    if ('binaryType' in server) server.binaryType = 'arraybuffer';
    server.accept();
    const remote = request.headers.get('cf-connecting-ip') ?? 'cloudflare';
    const upgrade: UpgradeRequest = { url: request.url, headers: headerRecord(request.headers) };
    const conn = new MessageSocketConnection(
      driverFor(server),
      `ws://${remote}`,
      host.frameLimit,
      this.#limits,
      this.#o.closeGraceMs,
      this.#o.drainPollMs,
      host.runtime,
    );
    conn.request = upgrade;
    this.#conns.add(conn);
    server.addEventListener('message', (e) => conn.message(e.data));
    server.addEventListener('error', () => {});
    server.addEventListener('close', (e) => {
      this.#conns.delete(conn);
      conn.socketClosed(e.code, e.reason);
    });
    host.accept(conn);
    return new Response(null, { status: 101, webSocket: client } as WorkersResponseInit);
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    return refuseDial('Workers WebSocket server', request, events);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await closeConnections(this.#conns);
  }
}

function driverFor(ws: WorkersWebSocket): MessageSocketDriver {
  return {
    send: (frame) => {
      if (ws.readyState !== OPEN) return false;
      ws.send(frame);
      return true;
    },
    // Workers report no send buffer; admission then never waits (credit and the peer window bound it).
    buffered: () => ws.bufferedAmount ?? 0,
    drainEvents: false,
    pause: () => false,
    resume: () => {},
    close: (code, reason) => quietly(() => ws.close(code, reason)),
    terminate: () => quietly(() => ws.close(1001, 'terminated')),
  };
}
