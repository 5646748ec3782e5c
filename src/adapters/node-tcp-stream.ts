/**
 * The per-stream (legacy) transport over Node TCP, key `tcp-stream`: one dedicated TCP connection
 * per stream. It is the fallback for peers without the mux, the rollback (`mux.enabled = false`)
 * and the benchmark baseline, so it deliberately does what the mux avoids: Nagle off and one
 * `socket.write` (one segment) per frame.
 *
 * Wire format (docs/protocol.md §9), producer → consumer:
 *
 * ```text
 * preface  [u64 BE anchorId][u64 BE sessionId]        16 bytes, once
 * frame    [u32 BE length][length bytes: StreamFrame]  repeated; 0-byte bodies are allowed
 * ```
 *
 * and consumer → producer, only to carry a stop: `[u32 BE 1][u8 0]`, at most once per connection.
 * The producer skips every other body unread (reserved), so nothing the consumer writes can make
 * it allocate; an older producer discards the whole direction.
 *
 * The producer ends a stream with a FIN after its last frame. The consumer refuses a connection,
 * or drops one that breaks framing, with an RST (`resetAndDestroy`), so the producer sees an error
 * rather than a clean close even if it has already ended its side. `destroy()` on the producer
 * also resets, but `sink.end(null)` only promises a FIN after whole frames: an RST that lands on
 * unread data may surface as a plain EOF, so whether the stream completed is the stream layer's
 * call (its terminal frame), not the transport's.
 *
 * The parts: this file is the transport (listener, dials, close); `node-tcp-stream-inbound.ts` the
 * consumer side of a connection, `node-tcp-stream-outbound.ts` the producer side;
 * `node-tcp-stream-wire.ts` and `node-tcp-stream-socket.ts` what both share; the options in
 * `node-tcp-stream-options.ts`.
 *
 * @example
 * ```ts
 * const consumer = await createNode({ messenger: a, perStream: tcpStreamTransport(), mux: { enabled: false } });
 * const producer = await createNode({ messenger: b, perStream: tcpStreamTransport(), mux: { enabled: false } });
 * ```
 *
 * @packageDocumentation
 */
import net from 'node:net';
import type { LanemuxError } from '../errors.ts';
import { defaultFramePolicy } from '../transport/frame-pool.ts';
import type { PerStreamConnection, PerStreamSink, PerStreamTransport } from '../transport/per-stream-port.ts';
import { parseOptions } from '../validate.ts';
import { systemRuntime, type Runtime } from '../runtime/runtime.ts';
import { TCP_STREAM_KEY as TCP_STREAM_TRANSPORT_KEY } from '../wire/constants.ts';
import { Inbound, type InboundOwner } from './node-tcp-stream-inbound.ts';
import {
  type ResolvedTcpStreamOptions,
  type TcpStreamTransportOptions,
  tcpStreamOptionsSchema,
} from './node-tcp-stream-options.ts';
import { Outbound, type OutboundOwner } from './node-tcp-stream-outbound.ts';
import { reset } from './node-tcp-stream-socket.ts';
import { formatEndpoint, parseEndpoint, TCP_STREAM_PREFACE_BYTES, U64_MAX } from './node-tcp-stream-wire.ts';
import { TcpStreamError } from './tcp-stream-errors.ts';

/** For the `framePolicy` option (sharing one pool across transports). */
export {
  DEFAULT_FRAME_DEADLINE_MS,
  DEFAULT_INCOMPLETE_FRAME_BYTES,
  DEFAULT_LARGE_FRAME_BYTES,
  IncompleteFramePool,
  defaultFramePolicy,
} from '../transport/frame-pool.ts';
export type { FramePolicy } from '../transport/frame-pool.ts';

/** The transport key of this path (the same string as `TCP_STREAM_KEY` of the stream layer). */
export { TCP_STREAM_KEY as TCP_STREAM_TRANSPORT_KEY } from '../wire/constants.ts';

/** The wire's sizes: the preface, and each frame's length prefix. */
export { TCP_STREAM_PREFACE_BYTES, TCP_STREAM_PREFIX_BYTES } from './node-tcp-stream-wire.ts';

/** A {@link PerStreamTransport} over Node TCP, with a few read-only gauges for operators and tests. */
export interface TcpStreamTransport extends PerStreamTransport {
  /** Run the dial and preface deadlines on `runtime` (createNode gives its own). Defaults to the current runtime's. */
  setRuntime(runtime: Runtime): void;
  /** The endpoint producers dial (`tcp-stream://host:port`), once `listen` resolved; else null. */
  readonly endpoint: string | null;
  /** True while the listener accepts connections. */
  readonly listening: boolean;
  /** Open sockets, accepted and dialled (pending dials included). 0 after `close()` resolved. */
  readonly openSockets: number;
  /** Accepted connections reset on arrival because `maxConnections` were already held. */
  readonly refusedOverLimit: number;
}

/** The options of {@link tcpStreamTransport}, declared beside their schema. */
export type { TcpStreamTransportOptions } from './node-tcp-stream-options.ts';

/**
 * Create the Node TCP per-stream transport (key `tcp-stream`). Options are validated at once; a bad
 * value throws a `ConfigError` (`ERR_INVALID_CONFIG`) naming the field.
 *
 * Defaults: host `127.0.0.1`, port 0, `maxFrameBytes` 1 MiB, `highWaterMark` 64 KiB,
 * `maxConnections` 65,536, `prefaceTimeoutMs` 10 s, `connectTimeoutMs` 10 s, a frame policy of its own.
 */
export function tcpStreamTransport(options: TcpStreamTransportOptions = {}): TcpStreamTransport {
  const o = parseOptions(tcpStreamOptionsSchema, options, 'tcpStreamTransport');
  return new NodeTcpStreamTransport({ ...o, framePolicy: o.framePolicy ?? defaultFramePolicy() });
}

class NodeTcpStreamTransport implements TcpStreamTransport, InboundOwner, OutboundOwner {
  readonly key = TCP_STREAM_TRANSPORT_KEY;
  readonly options: ResolvedTcpStreamOptions;
  #writes = 0;
  #server: net.Server | null = null;
  #endpoint: string | null = null;
  #closed = false;
  #closing: Promise<void> | null = null;
  #refusedOverLimit = 0;
  /** Every socket not yet closed, both sides: what `close()` waits for. */
  readonly #sockets = new Set<net.Socket>();
  readonly #inbound = new Set<Inbound>();
  readonly #outbound = new Set<Outbound>();
  /** Dials in progress: each entry fails its dial. */
  readonly #dials = new Set<(error: LanemuxError) => void>();

  /** Timers run here: the node's runtime once `setRuntime` gave it (createNode does). */
  runtime: Runtime = systemRuntime();

  constructor(options: ResolvedTcpStreamOptions) {
    this.options = options;
  }

  setRuntime(runtime: Runtime): void {
    this.runtime = runtime;
  }

  get writes(): number {
    return this.#writes;
  }
  get endpoint(): string | null {
    return this.#endpoint;
  }
  get listening(): boolean {
    return this.#server?.listening ?? false;
  }
  get openSockets(): number {
    return this.#sockets.size;
  }
  get refusedOverLimit(): number {
    return this.#refusedOverLimit;
  }

  countWrite(): void {
    this.#writes++;
  }
  forgetInbound(conn: Inbound): void {
    this.#inbound.delete(conn);
  }
  forgetOutbound(conn: Outbound): void {
    this.#outbound.delete(conn);
  }

  #track(socket: net.Socket): void {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  async listen(accept: (anchorId: bigint, sessionId: bigint) => PerStreamSink | null): Promise<string> {
    if (this.#closed) throw new TcpStreamError('ERR_CLOSED', 'the tcp-stream transport is closed');
    if (this.#server !== null) throw new TcpStreamError('ERR_LISTEN', 'the tcp-stream transport is already listening');
    const o = this.options;
    const server = net.createServer({ noDelay: true, highWaterMark: o.highWaterMark }, (socket) =>
      this.#onSocket(socket, accept),
    );
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      const onError = (cause: Error): void => {
        this.#server = null; // a failed bind may be retried (another port, after the holder left)
        reject(
          new TcpStreamError('ERR_LISTEN', `tcp-stream listen on ${o.host}:${o.port}: ${cause.message}`, { cause }),
        );
      };
      server.once('error', onError);
      server.listen(o.port, o.host, () => {
        server.off('error', onError);
        resolve();
      });
    });
    // Errors after listening (EMFILE on accept …) must not crash the process; the socket is lost either way.
    server.on('error', () => {});
    if (this.#closed) {
      // close() ran while we were binding: it saw no listening server, so release it here.
      server.close();
      throw new TcpStreamError('ERR_CLOSED', 'the tcp-stream transport closed while listening');
    }
    this.#endpoint = formatEndpoint(o.host, (server.address() as net.AddressInfo).port);
    return this.#endpoint;
  }

  #onSocket(socket: net.Socket, accept: (anchorId: bigint, sessionId: bigint) => PerStreamSink | null): void {
    // A socket must always have an error listener: an unhandled 'error' would crash the process.
    socket.on('error', () => {});
    if (this.#closed) {
      reset(socket);
      return;
    }
    if (this.#inbound.size >= this.options.maxConnections) {
      this.#refusedOverLimit++;
      reset(socket);
      return;
    }
    this.#track(socket);
    socket.setNoDelay(true);
    this.#inbound.add(new Inbound(socket, this, accept));
  }

  connect(
    endpoint: string,
    anchorId: bigint,
    sessionId: bigint,
    options: { signal?: AbortSignal } = {},
  ): Promise<PerStreamConnection> {
    if (this.#closed) return Promise.reject(new TcpStreamError('ERR_CLOSED', 'the tcp-stream transport is closed'));
    for (const [name, id] of [
      ['anchorId', anchorId],
      ['sessionId', sessionId],
    ] as const) {
      if (typeof id !== 'bigint' || id < 0n || id > U64_MAX) {
        return Promise.reject(
          new TcpStreamError('ERR_INVALID_ARGUMENT', `${name} must be a u64 bigint, got ${String(id)}`),
        );
      }
    }
    const target = parseEndpoint(endpoint);
    if (target === undefined) {
      return Promise.reject(
        new TcpStreamError(
          'ERR_UNSUPPORTED_ADDRESS',
          `not a tcp-stream://host:port endpoint: ${endpoint.slice(0, 256)}`,
        ),
      );
    }
    const signal = options.signal;
    if (signal?.aborted)
      return Promise.reject(new TcpStreamError('ERR_ABORTED', `dial of ${endpoint} aborted`, { cause: signal.reason }));
    const o = this.options;
    return new Promise<PerStreamConnection>((resolve, reject) => {
      // highWaterMark is a stream option net.Socket passes on to Duplex; @types/node omits it here.
      const socket = net.connect({
        host: target.host,
        port: target.port,
        noDelay: true,
        highWaterMark: o.highWaterMark,
      } as net.TcpNetConnectOpts);
      this.#track(socket);
      let settled = false;
      const cleanup = (): void => {
        settled = true;
        this.runtime.clearTimer(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#dials.delete(fail);
        socket.off('error', onError);
      };
      const fail = (error: LanemuxError): void => {
        if (settled) return;
        cleanup();
        socket.on('error', () => {}); // late errors of the dying socket go nowhere
        socket.destroy();
        reject(error);
      };
      const onError = (cause: Error): void =>
        fail(
          new TcpStreamError('ERR_CONNECT', `tcp-stream connect to ${endpoint}: ${cause.message}`, {
            cause,
            retryable: true,
          }),
        );
      const onAbort = (): void =>
        fail(new TcpStreamError('ERR_ABORTED', `dial of ${endpoint} aborted`, { cause: signal?.reason }));
      const timer = this.runtime.setTimer(
        () =>
          fail(
            new TcpStreamError(
              'ERR_CONNECT',
              `tcp-stream connect to ${endpoint} timed out after ${o.connectTimeoutMs} ms`,
              { retryable: true },
            ),
          ),
        o.connectTimeoutMs,
      );
      socket.on('error', onError);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#dials.add(fail);
      socket.once('connect', () => {
        if (settled) return;
        cleanup();
        socket.setNoDelay(true);
        const conn = new Outbound(socket, this, endpoint);
        this.#outbound.add(conn);
        const preface = Buffer.allocUnsafe(TCP_STREAM_PREFACE_BYTES);
        preface.writeBigUInt64BE(anchorId, 0);
        preface.writeBigUInt64BE(sessionId, 8);
        // Connection setup, not a frame: not counted in `writes` (one write per frame is the baseline).
        socket.write(preface);
        resolve(conn);
      });
    });
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    const error = new TcpStreamError('ERR_CLOSED', 'the tcp-stream transport closed');
    for (const fail of [...this.#dials]) fail(error);
    for (const conn of [...this.#inbound]) conn.abort(error);
    for (const conn of [...this.#outbound]) conn.destroy(error);
    const closing = [...this.#sockets].map((s) => new Promise<void>((resolve) => s.once('close', () => resolve())));
    const server = this.#server;
    const serverClosed =
      server === null || !server.listening
        ? Promise.resolve()
        : new Promise<void>((resolve) => server.close(() => resolve()));
    await Promise.all([...closing, serverClosed]);
  }
}
