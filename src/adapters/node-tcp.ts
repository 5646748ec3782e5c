/**
 * Node TCP transport adapter (`node:net`, or `node:tls` with the `tls` option): one TCP connection
 * per lane, length-prefixed frames.
 *
 * - Frames are `[u32 length BE][message]`; the length is checked against the limit before any
 *   allocation (`transport/frame.ts`), and a frame over it closes the connection with a GOAWAY saying so. A
 *   split frame grows as its bytes arrive, within the node's {@link IncompleteFramePool}, and a
 *   large one has a deadline (`transport/frame-pool.ts`).
 * - `setNoDelay(true)`: tokens must not wait for Nagle.
 * - Writes are grouped: the first write of a task corks the socket and a microtask uncorks it, so a
 *   burst of sends (one per lane batch, replies, pings) leaves in one `writev` syscall.
 * - Admission follows `socket.writableLength` against `highWaterMark`, woken by `'drain'`.
 * - The connection itself (framing, admission, GOAWAY, close) is the one Deno and Bun use
 *   (`byte-stream-conn.ts`); this file is the Node socket and the listener.
 * - With `tls`, the same frames inside TLS (`tls.createServer` / `tls.connect`), addresses
 *   `tls://host:port`; a connection is handed over once its handshake is done.
 *
 * @example
 * ```ts
 * const server = await createMessenger({ transports: [tcpTransport({ port: 0 })], lanes: 8 });
 * const client = await createMessenger({ transports: [tcpTransport({ listen: false })], lanes: 8 });
 * const peer = await client.connect(server.addresses[0]!);
 * // Across machines: tcpTransport({ host: '0.0.0.0', port: 7000, tls: { key, cert } }) listens on tls://…,
 * // and tcpTransport({ listen: false, tls: { ca } }) dials it.
 * ```
 *
 * @packageDocumentation
 */
import net from 'node:net';
import tls from 'node:tls';
import type { AdmissionLimits } from '../transport/admission.ts';
import type { Authenticate, CredentialSource } from '../transport/auth.ts';
import { TransportError, asTransportError, listenFailure } from '../transport/errors.ts';
import { failDial } from '../transport/fail-dial.ts';
import { defaultFramePolicy, type FramePolicy } from '../transport/frame-pool.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from '../transport/port.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { WritePool } from './write-pool.ts';
import { ByteStreamConnection, type ByteSocketDriver, type ByteSocketEvents } from './byte-stream-conn.ts';
import {
  formatTcpAddress,
  parseTcpAddress,
  parseTcpOptions,
  tcpDialRefusal,
  tlsDialError,
  type SocketTcpTransportOptions,
  type TcpOptions,
} from './socket-options.ts';

/**
 * Options of {@link tcpTransport}: the same type, schema, defaults and addresses (`tcp://host:port`,
 * `tls://host:port` with `tls`) as the Deno and Bun TCP adapters (`socket-options.ts`), so the three
 * runtimes accept and print the same.
 */
export type TcpTransportOptions = SocketTcpTransportOptions;
export type { PemInput, SocketTlsOptions as TcpTlsOptions } from './socket-options.ts';

/**
 * Create a Node TCP transport adapter (name `tcp`, or `tls` with the `tls` option). Options are
 * validated at once; a bad value throws a `ConfigError` (`ERR_INVALID_CONFIG`) naming every bad field.
 * A port already taken fails `listen` with `ERR_ADDRESS_IN_USE` (retryable) naming host and port.
 *
 * Defaults: host `127.0.0.1`, port 0, listening, `highWaterMark` 1 MiB, `maxPendingBytes` 8 MiB,
 * `connectTimeoutMs` 10 s, `closeGraceMs` 2 s, no TLS, no credential or authenticate of its own.
 */
export function tcpTransport(options: TcpTransportOptions = {}): TransportAdapter {
  return new TcpAdapter(parseTcpOptions(options, 'tcpTransport'));
}

class TcpAdapter implements TransportAdapter {
  readonly name: 'tcp' | 'tls';
  readonly dialSchemes: readonly string[];
  readonly credential: CredentialSource | undefined;
  readonly authenticate: Authenticate | undefined;
  readonly #o: TcpOptions;
  readonly #limits: AdmissionLimits;
  /** Live sockets, with the runtime of the node that listened or dialled (its close grace timer). */
  readonly #sockets = new Map<net.Socket, Runtime>();
  /** TLS: every TCP connection the server accepted, still in its handshake or under a TLS socket. */
  readonly #raw = new Set<net.Socket>();
  #server: net.Server | undefined;
  /** For a host or request without a node's policy (the adapter used on its own). */
  #ownPolicy: FramePolicy | undefined;
  #closed = false;

  constructor(o: TcpOptions) {
    this.#o = o;
    this.name = o.scheme;
    this.dialSchemes = [o.scheme];
    this.credential = o.credential;
    this.authenticate = o.authenticate;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
  }

  #policy(given: FramePolicy | undefined): FramePolicy {
    return given ?? (this.#ownPolicy ??= defaultFramePolicy());
  }

  #track(socket: net.Socket, rt: Runtime): void {
    this.#sockets.set(socket, rt);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    const o = this.#o;
    if (!o.listen) return undefined;
    const policy = this.#policy(host.framePolicy);
    const onSocket = (socket: net.Socket): void => {
      if (this.#closed) {
        socket.destroy();
        return;
      }
      this.#track(socket, host.runtime);
      socket.setNoDelay(true);
      const remote = formatTcpAddress(socket.remoteAddress ?? '?', socket.remotePort ?? 0, o.scheme);
      host.accept(nodeConn(socket, remote, host.frameLimit, this.#limits, o.closeGraceMs, policy, host.runtime));
    };
    const t = o.tls;
    let server: net.Server;
    if (t === undefined) {
      server = net.createServer({ noDelay: true }, onSocket);
    } else {
      const secure = tls.createServer(
        {
          key: t.key,
          cert: t.cert,
          ...(t.ca !== undefined ? { ca: [...t.ca] } : {}),
          requestCert: t.requestCert,
          rejectUnauthorized: t.rejectUnauthorized,
          handshakeTimeout: t.handshakeTimeoutMs,
          noDelay: true,
        },
        onSocket,
      );
      // A client that fails its handshake (wrong CA, plain TCP, a scanner, handshakeTimeoutMs passed)
      // never became a connection: drop it, telling no one. node:tls reports it but leaves the TCP
      // connection open (a silent one would stay forever).
      secure.on('tlsClientError', (_error, socket) => socket.destroy());
      // Raw connections too, for close(): server.close() would otherwise wait for one still in its
      // handshake until handshakeTimeoutMs.
      secure.on('connection', (raw: net.Socket) => {
        if (this.#closed) {
          raw.destroy();
          return;
        }
        this.#raw.add(raw);
        raw.once('close', () => this.#raw.delete(raw));
      });
      server = secure;
    }
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      const fail = (e: unknown): void =>
        reject(listenFailure(o.tls === undefined ? 'tcpTransport' : 'tcpTransport (tls)', o.host, o.port, e));
      server.once('error', fail);
      server.listen(o.port, o.host, () => {
        server.off('error', fail);
        resolve();
      });
    });
    // Errors after listening (e.g. EMFILE on accept) must not crash the process.
    server.on('error', () => {});
    const addr = server.address() as net.AddressInfo;
    return formatTcpAddress(o.host, addr.port, o.scheme);
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    const o = this.#o;
    const target = parseTcpAddress(request.address, o.scheme);
    if (target === undefined || this.#closed)
      return failDial(events, tcpDialRefusal(request.address, this.#closed, `${o.scheme} transport`, o.scheme));
    const t = o.tls;
    const socket: net.Socket =
      t === undefined
        ? net.connect({ host: target.host, port: target.port, noDelay: true })
        : tls.connect({
            host: target.host,
            port: target.port,
            ...(t.servername !== undefined ? { servername: t.servername } : {}),
            ...(t.ca !== undefined ? { ca: [...t.ca] } : {}),
            ...(t.key !== undefined ? { key: t.key, cert: t.cert } : {}),
            rejectUnauthorized: t.rejectUnauthorized,
          });
    const rt = request.runtime;
    this.#track(socket, rt);
    let settled = false;
    let conn: ByteStreamConnection | undefined;
    const timer = rt.setTimer(() => {
      if (settled) return;
      settled = true;
      socket.destroy();
      events.fail(
        new TransportError(
          'ERR_CONNECT',
          `${o.scheme} connect to ${request.address} timed out after ${o.connectTimeoutMs} ms`,
          { retryable: true },
        ),
      );
    }, o.connectTimeoutMs);
    const onError = (error: Error): void => {
      if (settled) return;
      settled = true;
      rt.clearTimer(timer);
      socket.destroy();
      events.fail(
        t === undefined
          ? asTransportError('ERR_CONNECT', `tcp connect to ${request.address}`, error)
          : tlsDialError(request.address, error),
      );
    };
    socket.once('error', onError);
    // A TLS socket is usable once its handshake is done (and the server's certificate verified).
    socket.once(t === undefined ? 'connect' : 'secureConnect', () => {
      if (settled) return;
      settled = true;
      rt.clearTimer(timer);
      socket.off('error', onError);
      socket.setNoDelay(true);
      conn = nodeConn(
        socket,
        request.address,
        request.frameLimit,
        this.#limits,
        o.closeGraceMs,
        this.#policy(request.framePolicy),
        rt,
      );
      events.open(conn);
    });
    return {
      close: () => {
        if (!settled) {
          settled = true;
          rt.clearTimer(timer);
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
      ([s, rt]) =>
        new Promise<void>((resolve) => {
          if (s.destroyed) return resolve();
          s.once('close', () => resolve());
          if (s.connecting) {
            s.destroy();
            return;
          }
          // Graceful: let queued bytes (a GOAWAY) leave, then force after the grace period.
          s.end();
          const t = rt.setTimer(() => s.destroy(), this.#o.closeGraceMs);
          s.once('close', () => rt.clearTimer(t));
        }),
    );
    const serverClosed =
      server === undefined ? Promise.resolve() : new Promise<void>((resolve) => server.close(() => resolve()));
    // Once the TLS connections closed (with their TCP connections), what is left is still in its handshake.
    const pending = Promise.all(closing).then(() => {
      for (const raw of this.#raw) raw.destroy();
    });
    await Promise.all([...closing, pending, serverClosed]);
  }
}

/**
 * A `node:net` (or `node:tls`) socket as a {@link ByteSocketDriver}. It groups a task's writes itself:
 * the first write corks the socket and a microtask uncorks it, so they leave in one `writev`.
 */
class NodeSocketDriver implements ByteSocketDriver {
  readonly coalesces = true;
  readonly #socket: net.Socket;
  /** Batch-sized frames, reused once written (the connection overwrites every byte of a frame). */
  readonly #pool = new WritePool();
  readonly #rt: Runtime;
  #corked = false;
  #ended = false;
  #error: Error | undefined;

  constructor(socket: net.Socket, rt: Runtime) {
    this.#socket = socket;
    this.#rt = rt;
  }

  start(events: ByteSocketEvents): void {
    const s = this.#socket;
    const ended = (): void => {
      if (this.#ended) return;
      this.#ended = true;
      events.ended(this.#error);
    };
    s.on('data', events.data);
    s.on('drain', events.drained);
    s.on('error', (e) => {
      this.#error ??= e;
    });
    s.on('end', ended);
    s.on('close', ended);
  }

  // Small frames come from Node's slab pool, batch-sized ones from the write pool.
  readonly alloc = (bytes: number): Uint8Array => {
    const pool = this.#pool;
    return pool.pooled(bytes) ? Buffer.from(pool.take(bytes), 0, bytes) : Buffer.allocUnsafe(bytes);
  };

  write(chunk: Uint8Array): void {
    const s = this.#socket;
    if (!this.#corked) {
      this.#corked = true;
      s.cork();
      queueMicrotask(this.#uncork);
    }
    const ab = this.#pool.owner(chunk);
    if (ab === null) s.write(chunk);
    else {
      const pool = this.#pool;
      // Written (handed to the OS): the memory may take the next frame. Not after a failed write.
      s.write(chunk, (error) => {
        if (error == null) pool.give(ab);
      });
    }
  }

  readonly #uncork = (): void => {
    if (!this.#corked) return;
    this.#corked = false;
    this.#socket.uncork();
  };

  buffered(): number {
    return this.#socket.writableLength;
  }

  pause(): boolean {
    this.#socket.pause();
    return true;
  }

  resume(): void {
    this.#socket.resume();
  }

  end(graceMs: number): void {
    const s = this.#socket;
    if (s.destroyed) {
      s.destroy();
      return;
    }
    this.#uncork();
    s.end();
    const rt = this.#rt;
    const t = rt.setTimer(() => s.destroy(), graceMs);
    s.once('close', () => rt.clearTimer(t));
  }

  destroy(): void {
    this.#socket.destroy();
  }
}

/** A lane connection over a Node socket (its errors say just "connection", as they always have). */
function nodeConn(
  socket: net.Socket,
  remote: string,
  frameLimit: number,
  limits: AdmissionLimits,
  closeGraceMs: number,
  policy: FramePolicy,
  rt: Runtime,
): ByteStreamConnection {
  return new ByteStreamConnection(
    new NodeSocketDriver(socket, rt),
    '',
    remote,
    frameLimit,
    limits,
    closeGraceMs,
    policy,
    rt,
  );
}
