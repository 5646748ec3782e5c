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
 * @example
 * ```ts
 * const consumer = await createNode({ messenger: a, perStream: tcpStreamTransport(), mux: { enabled: false } });
 * const producer = await createNode({ messenger: b, perStream: tcpStreamTransport(), mux: { enabled: false } });
 * ```
 *
 * @packageDocumentation
 */
import net from 'node:net';
import { z } from 'zod/mini';
import type { LanemuxError } from '../errors.ts';
import type { PerStreamConnection, PerStreamSink, PerStreamTransport } from '../transport/per-stream-port.ts';
import { FrameDecoder } from '../transport/frame.ts';
import { defaultFramePolicy, type FramePolicy } from '../transport/frame-pool.ts';
import { parseOptions } from '../validate.ts';
import { int } from '../validate.ts';
import { MAX_MAX_MESSAGE_SIZE } from '../transport/port.ts';
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
import { TCP_STREAM_KEY as TCP_STREAM_TRANSPORT_KEY } from '../wire/constants.ts';

/** Bytes of the connection preface: `[u64 anchorId][u64 sessionId]`, big-endian. */
export const TCP_STREAM_PREFACE_BYTES = 16;

/** Bytes of each frame's length prefix (`u32`, big-endian). */
export const TCP_STREAM_PREFIX_BYTES = 4;

/** The consumer's stop request, consumer → producer: a 1-byte body, action 0 (docs/protocol.md §9). */
const STOP_FRAME: Uint8Array = /*@__PURE__*/ Uint8Array.of(0, 0, 0, 1, 0);
/** Action byte of a 1-byte consumer → producer body: stop. Other values are reserved. */
const ACTION_STOP = 0;

/** Options of {@link tcpStreamTransport}. */
export interface TcpStreamTransportOptions {
  /**
   * Listen on this host; it is also the host named in the endpoint handed to producers, so use an
   * address they can dial (not `0.0.0.0`). Defaults to `127.0.0.1`.
   */
  readonly host?: string;
  /** Listen on this port; 0 picks a free one. Defaults to 0. */
  readonly port?: number;
  /**
   * Largest frame body accepted (consumer: checked against the length prefix before allocating)
   * and written (producer). At most 256 MiB. Defaults to 1 MiB.
   */
  readonly maxFrameBytes?: number;
  /**
   * Socket high-water mark, both directions: a producer's `write` returns a drain promise once this
   * many bytes are queued, and a paused consumer lets Node buffer at most about this much.
   * Defaults to 64 KiB.
   */
  readonly highWaterMark?: number;
  /** Accepted connections held at once; more are reset on arrival. Defaults to 65,536. */
  readonly maxConnections?: number;
  /** An accepted socket must deliver its 16-byte preface within this, or it is reset. Defaults to 10,000 ms. */
  readonly prefaceTimeoutMs?: number;
  /** Time allowed for one dial. Defaults to 10,000 ms. */
  readonly connectTimeoutMs?: number;
  /**
   * Bounds on frames that have not arrived whole (consumer side): the pool their bytes are reserved
   * in, and the deadline of a large one; a connection over either is reset. Pass the node's policy to
   * bound them together with its other connections. Defaults to a policy of this transport's own
   * (64 MiB pool, frames over 64 KiB must complete within 10 s: `defaultFramePolicy`).
   */
  readonly framePolicy?: FramePolicy;
}

/** A {@link PerStreamTransport} over Node TCP, with a few read-only gauges for operators and tests. */
export interface TcpStreamTransport extends PerStreamTransport {
  /** The endpoint producers dial (`tcp-stream://host:port`), once `listen` resolved; else null. */
  readonly endpoint: string | null;
  /** True while the listener accepts connections. */
  readonly listening: boolean;
  /** Open sockets, accepted and dialled (pending dials included). 0 after `close()` resolved. */
  readonly openSockets: number;
  /** Accepted connections reset on arrival because `maxConnections` were already held. */
  readonly refusedOverLimit: number;
}

const optionsSchema = z.object({
  host: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
  port: z._default(int(0, 65535), 0),
  maxFrameBytes: z._default(int(1, MAX_MAX_MESSAGE_SIZE), 1024 * 1024),
  highWaterMark: z._default(int(1, 2 ** 30), 64 * 1024),
  maxConnections: z._default(int(1, 2 ** 24), 65_536),
  prefaceTimeoutMs: z._default(int(1, 600_000), 10_000),
  connectTimeoutMs: z._default(int(1, 600_000), 10_000),
  framePolicy: z.optional(
    z.custom<FramePolicy>(
      (v) => typeof v === 'object' && v !== null && 'pool' in v && 'largeFrameBytes' in v && 'deadlineMs' in v,
      'not a FramePolicy ({ pool, largeFrameBytes, deadlineMs })',
    ),
  ),
});

type Resolved = Omit<z.output<typeof optionsSchema>, 'framePolicy'> & { readonly framePolicy: FramePolicy };

/**
 * Create the Node TCP per-stream transport (key `tcp-stream`). Options are validated at once; a bad
 * value throws a `ConfigError` (`ERR_INVALID_CONFIG`) naming the field.
 *
 * Defaults: host `127.0.0.1`, port 0, `maxFrameBytes` 1 MiB, `highWaterMark` 64 KiB,
 * `maxConnections` 65,536, `prefaceTimeoutMs` 10 s, `connectTimeoutMs` 10 s, a frame policy of its own.
 */
export function tcpStreamTransport(options: TcpStreamTransportOptions = {}): TcpStreamTransport {
  const o = parseOptions(optionsSchema, options, 'tcpStreamTransport');
  return new NodeTcpStreamTransport({ ...o, framePolicy: o.framePolicy ?? defaultFramePolicy() });
}

const U64_MAX = (1n << 64n) - 1n;

function formatEndpoint(host: string, port: number): string {
  return `tcp-stream://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Parse `tcp-stream://host:port` strictly: the endpoint comes from a peer, so nothing else is dialled. */
function parseEndpoint(endpoint: string): { host: string; port: number } | undefined {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return undefined;
  }
  const port = Number(url.port);
  if (
    url.protocol !== 'tcp-stream:' ||
    url.hostname === '' ||
    url.username !== '' ||
    url.password !== '' ||
    (url.pathname !== '' && url.pathname !== '/') ||
    url.search !== '' ||
    url.hash !== '' ||
    !Number.isInteger(port) ||
    port <= 0 ||
    port > 65535
  ) {
    return undefined;
  }
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port };
}

/**
 * Abort a socket with an RST, so the other side sees an error rather than a clean FIN. Only while
 * our write side is open: libuv refuses to reset a socket that is shutting down (EINVAL), and Node
 * then never closes the handle (no 'close', a leaked fd). Once we sent a FIN, a plain destroy it is.
 */
function reset(socket: net.Socket): void {
  if (socket.destroyed) return;
  if (socket.writableEnded) {
    socket.destroy();
    return;
  }
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

function peerOf(socket: net.Socket): string {
  return `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`;
}

/** What connections need from their transport. */
interface Owner {
  readonly options: Resolved;
  countWrite(): void;
  forgetInbound(conn: Inbound): void;
  forgetOutbound(conn: Outbound): void;
}

class NodeTcpStreamTransport implements TcpStreamTransport, Owner {
  readonly key = TCP_STREAM_TRANSPORT_KEY;
  readonly options: Resolved;
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

  constructor(options: Resolved) {
    this.options = options;
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
        clearTimeout(timer);
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
      const timer = setTimeout(
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
      timer.unref();
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

/**
 * Consumer side of one accepted connection: preface, then frames into the sink. When the sink
 * says stop, the unread rest of the current chunk is kept aside and the socket paused, so no frame
 * is ever offered to a full sink (the node's sink would drop it).
 */
class Inbound {
  readonly #socket: net.Socket;
  readonly #owner: Owner;
  readonly #accept: (anchorId: bigint, sessionId: bigint) => PerStreamSink | null;
  readonly #maxFrameBytes: number;
  readonly #preface = Buffer.alloc(TCP_STREAM_PREFACE_BYTES);
  #prefaceFill = 0;
  #prefaceTimer: ReturnType<typeof setTimeout> | null;
  #sink: PerStreamSink | null = null;
  /** Frames after the preface; it holds what arrives while the sink has paused us. */
  readonly #decoder: FrameDecoder;
  /** The producer's FIN arrived (possibly while we still hold stashed frames). */
  #eof = false;
  #socketClosed = false;
  #socketError: Error | undefined;
  /** The sink has been ended (or the connection refused): nothing more is delivered. */
  #finished = false;
  /** The stop request went out (once per connection). */
  #stopSent = false;

  constructor(socket: net.Socket, owner: Owner, accept: (anchorId: bigint, sessionId: bigint) => PerStreamSink | null) {
    this.#socket = socket;
    this.#owner = owner;
    this.#accept = accept;
    this.#maxFrameBytes = owner.options.maxFrameBytes;
    // Copies, not views: a consumer may hold a small item for long, and a view would pin the whole chunk.
    this.#decoder = new FrameDecoder(this.#maxFrameBytes, `tcp-stream peer ${peerOf(socket)}`, {
      copy: true,
      policy: owner.options.framePolicy,
      onDeadline: (e) => this.#fail(e),
    });
    const timeoutMs = owner.options.prefaceTimeoutMs;
    this.#prefaceTimer = setTimeout(() => {
      this.#fail(
        new TcpStreamError('ERR_PREFACE', `no tcp-stream preface from ${peerOf(socket)} within ${timeoutMs} ms`),
      );
    }, timeoutMs);
    this.#prefaceTimer.unref();
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('end', () => {
      this.#eof = true;
      if (!this.#decoder.paused) this.#endOfInput();
    });
    socket.on('error', (e: Error) => {
      this.#socketError ??= e;
    });
    socket.on('close', () => this.#onClose());
  }

  /** Tear down from the transport side (close()). */
  abort(error: LanemuxError): void {
    this.#fail(error);
  }

  #onData(chunk: Uint8Array): void {
    if (this.#finished) return;
    let rest = chunk;
    if (this.#sink === null) {
      const n = Math.min(TCP_STREAM_PREFACE_BYTES - this.#prefaceFill, chunk.byteLength);
      this.#preface.set(chunk.subarray(0, n), this.#prefaceFill);
      this.#prefaceFill += n;
      if (this.#prefaceFill < TCP_STREAM_PREFACE_BYTES || !this.#onPreface()) return;
      rest = chunk.subarray(n);
      if (rest.byteLength === 0) return;
    }
    this.#check(this.#decoder.push(rest, this.#deliver));
    // Data that raced a pause is held by the decoder, in order; keep the socket paused meanwhile.
    if (this.#decoder.paused && !this.#finished) this.#socket.pause();
  }

  #check(error: LanemuxError | undefined): void {
    if (error === undefined) return;
    // The decoder's codes keep their meaning on the per-stream path.
    const code = error.code === 'ERR_FRAME_TOO_LARGE' || error.code === 'ERR_FRAME_DEADLINE' ? error.code : undefined;
    this.#fail(
      code === undefined ? error : new TcpStreamError(code, `${error.message} (tcp-stream)`, { cause: error }),
    );
  }

  /** The preface is complete: ask the listener. False when refused (the socket is reset). */
  #onPreface(): boolean {
    if (this.#prefaceTimer !== null) {
      clearTimeout(this.#prefaceTimer);
      this.#prefaceTimer = null;
    }
    const anchorId = this.#preface.readBigUInt64BE(0);
    const sessionId = this.#preface.readBigUInt64BE(8);
    let sink: PerStreamSink | null;
    let cause: unknown;
    try {
      sink = this.#accept(anchorId, sessionId);
    } catch (e) {
      sink = null;
      cause = e;
    }
    if (sink === null) {
      const id = `anchor 0x${anchorId.toString(16)} session 0x${sessionId.toString(16)}`;
      this.#fail(
        new TcpStreamError('ERR_REFUSED', `tcp-stream connection from ${peerOf(this.#socket)} refused: unknown ${id}`, {
          cause,
        }),
      );
      return false;
    }
    this.#sink = sink;
    sink.resume = this.#resume;
    sink.abort = this.#abort;
    sink.stop = this.#stop;
    return true;
  }

  /** One frame to the sink; false (pause) when it is full. */
  readonly #deliver = (body: Uint8Array): boolean => {
    if (this.#finished) return false;
    try {
      return this.#sink!.frame(body);
    } catch (cause) {
      this.#fail(
        new TcpStreamError('ERR_MALFORMED_FRAME', `the sink threw on a tcp-stream frame from ${peerOf(this.#socket)}`, {
          cause,
        }),
      );
      return false;
    }
  };

  /** Installed as `sink.abort`: the consumer gave up on the stream; the producer sees a reset. */
  readonly #abort = (error: LanemuxError): void => {
    this.#fail(error);
  };

  /**
   * Installed as `sink.stop`: the consumer's stop request, written once. Not after the producer's
   * FIN (Node ended our side with it) nor after the end: the stream is over then anyway.
   */
  readonly #stop = (): void => {
    if (this.#finished || this.#stopSent) return;
    this.#stopSent = true;
    const s = this.#socket;
    if (!s.destroyed && !s.writableEnded) s.write(STOP_FRAME);
  };

  /** Installed as `sink.resume`: called often (after every take), so cheap when not paused. */
  readonly #resume = (): void => {
    if (!this.#decoder.paused || this.#finished) return;
    this.#check(this.#decoder.resume(this.#deliver));
    if (this.#decoder.paused || this.#finished) return;
    if (this.#eof) this.#endOfInput();
    else this.#socket.resume();
  };

  /** The FIN arrived and every byte before it was parsed. */
  #endOfInput(): void {
    if (this.#finished) return;
    if (this.#sink === null) {
      this.#fail(
        new TcpStreamError(
          'ERR_PREFACE',
          `tcp-stream connection from ${peerOf(this.#socket)} ended before its preface`,
        ),
      );
    } else if (this.#decoder.midFrame) {
      this.#fail(
        new TcpStreamError(
          'ERR_MALFORMED_FRAME',
          `tcp-stream connection from ${peerOf(this.#socket)} ended inside a frame`,
        ),
      );
    } else {
      this.#finish(null);
    }
  }

  #onClose(): void {
    this.#socketClosed = true;
    if (this.#prefaceTimer !== null) {
      clearTimeout(this.#prefaceTimer);
      this.#prefaceTimer = null;
    }
    // A clean FIN while we still hold stashed frames: the sink gets them (and its end) on resume.
    if (!this.#finished && !(this.#eof && this.#decoder.paused && this.#socketError === undefined)) {
      const cause = this.#socketError;
      const detail = cause === undefined ? 'closed before the stream ended' : `failed: ${cause.message}`;
      this.#finish(
        new TcpStreamError('ERR_SENDER_DROPPED', `tcp-stream connection from ${peerOf(this.#socket)} ${detail}`, {
          cause,
          retryable: true,
        }),
      );
    }
    this.#maybeForget();
  }

  #fail(error: LanemuxError): void {
    this.#finish(error);
    reset(this.#socket);
  }

  #finish(error: LanemuxError | null): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#decoder.stop();
    if (this.#prefaceTimer !== null) {
      clearTimeout(this.#prefaceTimer);
      this.#prefaceTimer = null;
    }
    const sink = this.#sink;
    if (sink !== null) {
      sink.resume = null;
      sink.abort = null;
      sink.stop = null;
      try {
        sink.end(error);
      } catch {
        // The sink's own failure is its business; the connection is over either way.
      }
    }
    this.#maybeForget();
  }

  #maybeForget(): void {
    if (this.#finished && this.#socketClosed) this.#owner.forgetInbound(this);
  }
}

/** A drain promise shared by every write made while the socket is over its high-water mark. */
interface Drain {
  readonly promise: Promise<void>;
  readonly resolve: () => void;
  readonly reject: (error: LanemuxError) => void;
}

/** Producer side of one dialled connection. */
class Outbound implements PerStreamConnection {
  readonly #socket: net.Socket;
  readonly #owner: Owner;
  readonly #endpoint: string;
  readonly #maxFrameBytes: number;
  #ending = false;
  #closed = false;
  /** Why we tore the connection down ourselves (destroy, oversize write). */
  #localError: LanemuxError | null = null;
  #socketError: Error | undefined;
  /** The consumer closed its side before we ended ours. */
  #remoteEndedFirst = false;
  #closeError: LanemuxError | null = null;
  #drain: Drain | null = null;
  #listeners: Array<(error: LanemuxError | null) => void> = [];
  /** Consumer → producer frames, parsed in place: prefix bytes seen, the length, body bytes left. */
  #inPrefix = 0;
  #inLength = 0;
  #inLeft = 0;
  #stopped = false;
  #stopListeners: Array<() => void> = [];

  constructor(socket: net.Socket, owner: Owner, endpoint: string) {
    this.#socket = socket;
    this.#owner = owner;
    this.#endpoint = endpoint;
    this.#maxFrameBytes = owner.options.maxFrameBytes;
    socket.on('error', (e: Error) => {
      this.#socketError ??= e;
    });
    // The consumer writes only its stop request; keep reading so its FIN (or RST) is seen too.
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('end', () => {
      if (!this.#ending) this.#remoteEndedFirst = true;
    });
    socket.on('drain', () => {
      const d = this.#drain;
      this.#drain = null;
      d?.resolve();
    });
    socket.on('close', () => this.#onClose());
  }

  write(body: Uint8Array): true | Promise<void> {
    if (this.#closed || this.#ending || this.#localError !== null) return this.#rejected(this.#writeError());
    const n = body.byteLength;
    if (n > this.#maxFrameBytes) {
      const error = new TcpStreamError(
        'ERR_FRAME_TOO_LARGE',
        `tcp-stream frame of ${n} bytes exceeds the limit of ${this.#maxFrameBytes} bytes`,
      );
      // A stream with a frame missing is broken: tear it down rather than skip the frame.
      this.destroy(error);
      return this.#rejected(error);
    }
    // One allocation and one socket.write per frame: prefix and body leave in the same segment.
    const frame = Buffer.allocUnsafe(TCP_STREAM_PREFIX_BYTES + n);
    frame.writeUInt32BE(n, 0);
    frame.set(body, TCP_STREAM_PREFIX_BYTES);
    this.#owner.countWrite();
    if (this.#socket.write(frame)) return true;
    if (this.#drain === null) {
      let resolve!: () => void;
      let reject!: (error: LanemuxError) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      // Marked handled: a caller may drop it (a terminal write), and a later rejection must not crash the process.
      promise.catch(() => {});
      this.#drain = { promise, resolve, reject };
    }
    return this.#drain.promise;
  }

  end(): void {
    if (this.#closed || this.#ending || this.#localError !== null) return;
    this.#ending = true;
    // Graceful: queued frames leave first, then the FIN.
    this.#socket.end();
  }

  destroy(error?: LanemuxError): void {
    if (this.#closed || this.#localError !== null) return;
    this.#localError =
      error ?? new TcpStreamError('ERR_CLOSED', `tcp-stream connection to ${this.#endpoint} destroyed by the producer`);
    // RST, not FIN: the consumer must see an abort (sink.end(error)), never a clean end.
    reset(this.#socket);
  }

  onClose(listener: (error: LanemuxError | null) => void): void {
    if (this.#closed) {
      // Late registration still hears about the close, once, asynchronously like the live case.
      const error = this.#closeError;
      queueMicrotask(() => listener(error));
      return;
    }
    this.#listeners.push(listener);
  }

  onStop(listener: () => void): void {
    if (this.#stopped) {
      queueMicrotask(listener);
      return;
    }
    this.#stopListeners.push(listener);
  }

  /** Consumer → producer bytes: `[u32 length][body]` frames; a 1-byte body 0 is a stop, the rest is skipped. */
  #onData(chunk: Uint8Array): void {
    const n = chunk.byteLength;
    let i = 0;
    while (i < n) {
      if (this.#inPrefix < TCP_STREAM_PREFIX_BYTES) {
        // Multiply, not shift: a length of 2^31 or more must stay positive.
        this.#inLength = this.#inLength * 256 + chunk[i++]!;
        if (++this.#inPrefix === TCP_STREAM_PREFIX_BYTES) {
          this.#inLeft = this.#inLength;
          if (this.#inLeft === 0) this.#nextInFrame();
        }
        continue;
      }
      if (this.#inLength === 1) {
        const action = chunk[i++]!;
        this.#nextInFrame();
        if (action === ACTION_STOP) this.#onStop();
        continue;
      }
      // A reserved body: skipped by count, never buffered.
      const take = Math.min(this.#inLeft, n - i);
      i += take;
      this.#inLeft -= take;
      if (this.#inLeft === 0) this.#nextInFrame();
    }
  }

  #nextInFrame(): void {
    this.#inPrefix = 0;
    this.#inLength = 0;
    this.#inLeft = 0;
  }

  #onStop(): void {
    if (this.#stopped || this.#closed) return;
    this.#stopped = true;
    const listeners = this.#stopListeners;
    this.#stopListeners = [];
    for (const l of listeners) {
      try {
        l();
      } catch {
        // A listener's failure must not keep the others from hearing about the stop.
      }
    }
  }

  #writeError(): LanemuxError {
    if (this.#localError !== null) return this.#localError;
    if (this.#closeError !== null) return this.#closeError;
    return new TcpStreamError(
      'ERR_CLOSED',
      `tcp-stream connection to ${this.#endpoint} is ${this.#closed ? 'closed' : 'ending'}`,
    );
  }

  #rejected(error: LanemuxError): Promise<void> {
    const p = Promise.reject(error);
    p.catch(() => {});
    return p;
  }

  #onClose(): void {
    if (this.#closed) return;
    this.#closed = true;
    let error: LanemuxError | null;
    if (this.#localError !== null) error = this.#localError;
    else if (this.#socketError !== undefined) {
      const cause = this.#socketError;
      error = new TcpStreamError(
        'ERR_SENDER_DROPPED',
        `tcp-stream connection to ${this.#endpoint} lost (the consumer refused or dropped it): ${cause.message}`,
        {
          cause,
          retryable: true,
        },
      );
    } else if (this.#ending && !this.#remoteEndedFirst) error = null;
    else
      error = new TcpStreamError(
        'ERR_SENDER_DROPPED',
        `tcp-stream connection to ${this.#endpoint} closed by the consumer before the stream ended`,
        { retryable: true },
      );
    this.#closeError = error;
    const d = this.#drain;
    this.#drain = null;
    if (d !== null) {
      if (error === null) d.resolve();
      else d.reject(error);
    }
    this.#owner.forgetOutbound(this);
    this.#stopListeners = [];
    const listeners = this.#listeners;
    this.#listeners = [];
    for (const l of listeners) {
      try {
        l(error);
      } catch {
        // A listener's failure must not keep the others from hearing about the close.
      }
    }
  }
}
