/**
 * Node TCP transport adapter (`node:net`): one TCP connection per lane, length-prefixed frames.
 *
 * - Frames are `[u32 length BE][message]`; the length is checked against the limit before any
 *   allocation (`frame.ts`), and a frame over it closes the connection with a GOAWAY saying so.
 * - `setNoDelay(true)`: tokens must not wait for Nagle.
 * - Writes are grouped: the first write of a task corks the socket and a microtask uncorks it, so a
 *   burst of sends (one per lane batch, replies, pings) leaves in one `writev` syscall.
 * - Admission follows `socket.writableLength` against `highWaterMark`, woken by `'drain'`.
 *
 * @example
 * ```ts
 * const server = await createMessenger({ transports: [tcpTransport({ port: 0 })], lanes: 8 });
 * const client = await createMessenger({ transports: [tcpTransport({ listen: false })], lanes: 8 });
 * const peer = await client.connect(server.addresses[0]!);
 * ```
 *
 * @packageDocumentation
 */
import net from 'node:net';
import type { LanemuxError } from '../errors.ts';
import { AdmissionGate, type AdmissionLimits } from './admission.ts';
import { TransportError, asTransportError } from './errors.ts';
import { FRAME_PREFIX_BYTES, FrameDecoder, writeFrame } from './frame.ts';
import { encodeGoaway } from './hello.ts';
import { parseOptions } from './options.ts';
import { failDial } from './fail-dial.ts';
import { formatTcpAddress, parseTcpAddress, tcpDialRefusal, tcpOptionsSchema, type SocketTcpTransportOptions, type TcpOptions } from './socket-options.ts';
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

/**
 * Options of {@link tcpTransport}: the same type, schema, defaults and `tcp://host:port` addresses as the
 * Deno and Bun TCP adapters (`socket-options.ts`), so the three runtimes accept and print the same.
 */
export type TcpTransportOptions = SocketTcpTransportOptions;

/** Create a Node TCP transport adapter. */
export function tcpTransport(options: TcpTransportOptions = {}): TransportAdapter {
  return new TcpAdapter(parseOptions(tcpOptionsSchema, options, 'tcpTransport'));
}

class TcpAdapter implements TransportAdapter {
  readonly name = 'tcp';
  readonly dialSchemes = ['tcp'] as const;
  readonly #o: TcpOptions;
  readonly #limits: AdmissionLimits;
  readonly #sockets = new Set<net.Socket>();
  #server: net.Server | undefined;
  #closed = false;

  constructor(o: TcpOptions) {
    this.#o = o;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
  }

  #track(socket: net.Socket): void {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    if (!this.#o.listen) return undefined;
    const server = net.createServer({ noDelay: true }, (socket) => {
      if (this.#closed) {
        socket.destroy();
        return;
      }
      this.#track(socket);
      socket.setNoDelay(true);
      const remote = formatTcpAddress(socket.remoteAddress ?? '?', socket.remotePort ?? 0);
      host.accept(new TcpConn(socket, remote, host.frameLimit, this.#limits, this.#o.closeGraceMs));
    });
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#o.port, this.#o.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // Errors after listening (e.g. EMFILE on accept) must not crash the process.
    server.on('error', () => {});
    const addr = server.address() as net.AddressInfo;
    return formatTcpAddress(this.#o.host, addr.port);
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    const target = parseTcpAddress(request.address);
    if (target === undefined || this.#closed) return failDial(events, tcpDialRefusal(request.address, this.#closed, 'tcp transport'));
    const socket = net.connect({ host: target.host, port: target.port, noDelay: true });
    this.#track(socket);
    let settled = false;
    let conn: TcpConn | undefined;
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      socket.destroy();
      events.fail(new TransportError('ERR_CONNECT', `tcp connect to ${request.address} timed out after ${this.#o.connectTimeoutMs} ms`, { retryable: true }));
    }, this.#o.connectTimeoutMs);
    timer.unref();
    const onError = (error: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      events.fail(asTransportError('ERR_CONNECT', `tcp connect to ${request.address}`, error));
    };
    socket.once('error', onError);
    socket.once('connect', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('error', onError);
      socket.setNoDelay(true);
      conn = new TcpConn(socket, request.address, request.frameLimit, this.#limits, this.#o.closeGraceMs);
      events.open(conn);
    });
    return {
      close: () => {
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          socket.destroy();
        } else {
          conn?.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort');
        }
      },
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const server = this.#server;
    const closing = [...this.#sockets].map(
      (s) =>
        new Promise<void>((resolve) => {
          if (s.destroyed) return resolve();
          s.once('close', () => resolve());
          if (s.connecting) {
            s.destroy();
            return;
          }
          // Graceful: let queued bytes (a GOAWAY) leave, then force after the grace period.
          s.end();
          const t = setTimeout(() => s.destroy(), this.#o.closeGraceMs);
          t.unref();
          s.once('close', () => clearTimeout(t));
        }),
    );
    const serverClosed = server === undefined ? Promise.resolve() : new Promise<void>((resolve) => server.close(() => resolve()));
    await Promise.all([...closing, serverClosed]);
  }
}

class TcpConn implements Connection {
  readonly remote: string;
  readonly #socket: net.Socket;
  readonly #decoder: FrameDecoder;
  readonly #gate: AdmissionGate;
  readonly #closeGraceMs: number;
  #receiver: ConnectionReceiver | undefined;
  #corked = false;
  #closed = false;
  #socketError: Error | undefined;

  constructor(socket: net.Socket, remote: string, frameLimit: number, limits: AdmissionLimits, closeGraceMs: number) {
    this.#socket = socket;
    this.remote = remote;
    this.#closeGraceMs = closeGraceMs;
    this.#decoder = new FrameDecoder(frameLimit, remote);
    this.#gate = new AdmissionGate({ buffered: () => socket.writableLength, write: (f) => this.#write(f) }, limits, remote);
  }

  start(receiver: ConnectionReceiver): void {
    this.#receiver = receiver;
    const s = this.#socket;
    s.on('data', (chunk: Buffer) => {
      const error = this.#decoder.push(chunk, this.#onFrame);
      if (error !== undefined) this.#refuse(error);
    });
    s.on('drain', () => this.#gate.drain());
    s.on('error', (e) => {
      this.#socketError ??= e;
    });
    s.on('end', () => this.#lost());
    s.on('close', () => this.#lost());
  }

  readonly #onFrame = (message: Uint8Array): void => {
    if (!this.#closed) this.#receiver?.message(message);
  };

  setFrameLimit(bytes: number): void {
    this.#decoder.limit = bytes;
  }

  send(head: Uint8Array, body?: Uint8Array): Admission {
    if (this.#closed) return Promise.reject(new TransportError('ERR_PEER_GONE', `tcp connection to ${this.remote} is closed`, { retryable: true }));
    // Buffer.allocUnsafe draws small frames from Node's slab pool; every byte is overwritten below.
    const frame = Buffer.allocUnsafe(FRAME_PREFIX_BYTES + head.byteLength + (body?.byteLength ?? 0));
    writeFrame(frame, head, body);
    return this.#gate.offer(frame);
  }

  #write(frame: Uint8Array): void {
    const s = this.#socket;
    if (!this.#corked) {
      this.#corked = true;
      s.cork();
      queueMicrotask(this.#uncork);
    }
    s.write(frame);
  }

  readonly #uncork = (): void => {
    if (!this.#corked) return;
    this.#corked = false;
    this.#socket.uncork();
  };

  bufferedAmount(): number {
    return this.#socket.writableLength + this.#gate.pendingBytes;
  }

  pause(): boolean {
    this.#socket.pause();
    return true;
  }

  resume(): void {
    this.#socket.resume();
  }

  close(reason: LanemuxError, mode: CloseMode = 'graceful'): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#decoder.stop();
    this.#gate.fail(reason);
    const s = this.#socket;
    if (mode === 'graceful' && !s.destroyed) {
      this.#uncork();
      s.end();
      const t = setTimeout(() => s.destroy(), this.#closeGraceMs);
      t.unref();
      s.once('close', () => clearTimeout(t));
    } else {
      s.destroy();
    }
    this.#receiver?.closed(reason);
  }

  /** The peer broke framing: tell it why (GOAWAY goes out before the FIN), then close. */
  #refuse(error: LanemuxError): void {
    if (this.#closed) return;
    const goaway = encodeGoaway(error);
    const frame = Buffer.allocUnsafe(FRAME_PREFIX_BYTES + goaway.byteLength);
    writeFrame(frame, goaway, undefined);
    this.#socket.write(frame);
    this.close(error, 'graceful');
  }

  #lost(): void {
    if (this.#closed) return;
    const cause = this.#socketError;
    const detail = cause === undefined ? 'closed by peer' : `failed: ${cause.message}`;
    this.close(new TransportError('ERR_PEER_GONE', `tcp connection to ${this.remote} ${detail}`, { retryable: true, cause }), 'abort');
  }
}
