/**
 * Bun TCP transport adapter (`Bun.listen` / `Bun.connect`, with their `tls` option when the adapter
 * has `tls`): one TCP connection per lane, the same length-prefixed frames as the Node adapter
 * (`node-tcp.ts`), so Node, Deno and Bun peers dial each other freely. The connection logic is
 * shared (`byte-stream-conn.ts`); this file is the Bun socket.
 *
 * - Bun's `socket.write` takes what the kernel accepts now and returns the count; the rest is kept
 *   here, in order, and written from the `drain` handler, which also wakes admission.
 * - `pause()`/`resume()` stop and restart reading, so the peer sees TCP back-pressure.
 * - `setNoDelay(true)`: tokens must not wait for Nagle.
 *
 * Needs Bun. Elsewhere {@link bunTcpTransport} throws `ERR_UNSUPPORTED_RUNTIME`.
 *
 * TLS (`tls://host:port`) takes Node's option shape. A connection, either side, counts as open once
 * its handshake succeeded (Bun opens a TLS socket before it): a dial to an untrusted certificate
 * fails saying so, and an accepted connection that does not finish its handshake within
 * `tls.handshakeTimeoutMs` is dropped before it becomes a connection.
 *
 * @example
 * ```ts
 * import { bunTcpTransport } from 'lanemux/transport/bun-tcp';
 * const node = await createNode({ transports: [bunTcpTransport({ port: 0 })] });
 * ```
 *
 * @packageDocumentation
 */
import type { AdmissionLimits } from '../transport/admission.ts';
import type { Authenticate, CredentialSource } from '../transport/auth.ts';
import {
  ByteStreamConnection,
  dialByteStream,
  type ByteSocketDriver,
  type ByteSocketEvents,
} from './byte-stream-conn.ts';
import { listenFailure } from '../transport/errors.ts';
import { defaultFramePolicy, type FramePolicy } from '../transport/frame-pool.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from '../transport/port.ts';
import { runtimeGlobal, unsupportedRuntimeError } from '../transport/runtime-guard.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { failDial } from '../transport/fail-dial.ts';
import {
  formatTcpAddress,
  parseTcpAddress,
  parseTcpOptions,
  tcpDialRefusal,
  tlsDialError,
  type SocketTcpTransportOptions,
  type TcpOptions,
  type TlsSettings,
} from './socket-options.ts';

/** Options of {@link bunTcpTransport} (the same as Node's `tcpTransport`). */
export type BunTcpTransportOptions = SocketTcpTransportOptions;
export type { PemInput, SocketTlsOptions as BunTcpTlsOptions } from './socket-options.ts';

// The few Bun APIs used, declared here because the TypeScript libs of this package have no Bun.
interface SocketData {
  driver: BunSocket | undefined;
}
interface BunSocketLike {
  data: SocketData;
  readonly remoteAddress: string;
  readonly remotePort?: number;
  write(data: Uint8Array): number;
  end(): void;
  terminate(): void;
  pause(): void;
  resume(): void;
  setNoDelay(noDelay?: boolean): boolean;
}
interface SocketHandlers {
  open(socket: BunSocketLike): void;
  data(socket: BunSocketLike, chunk: Uint8Array): void;
  drain(socket: BunSocketLike): void;
  close(socket: BunSocketLike, error?: Error): void;
  end(socket: BunSocketLike): void;
  error(socket: BunSocketLike, error: Error): void;
  /** TLS only: the handshake finished; `success` is false when the peer's certificate was refused. */
  handshake(socket: BunSocketLike, success: boolean, authorizationError: Error | null): void;
}
interface BunListener {
  readonly port: number;
  stop(closeActiveConnections?: boolean): void;
}
/** Bun's TLS options (listen: key, cert, ca, requestCert, rejectUnauthorized; connect: ca, serverName, rejectUnauthorized, key, cert). */
interface BunTlsOptions {
  key?: string;
  cert?: string;
  ca?: string[];
  requestCert?: boolean;
  rejectUnauthorized?: boolean;
  serverName?: string;
}
interface BunNet {
  listen(options: {
    hostname: string;
    port: number;
    socket: SocketHandlers;
    data: SocketData;
    tls?: BunTlsOptions;
  }): BunListener;
  connect(options: {
    hostname: string;
    port: number;
    socket: SocketHandlers;
    data: SocketData;
    tls?: BunTlsOptions;
  }): Promise<BunSocketLike>;
}

/**
 * Create a Bun TCP transport adapter (name `bun-tcp`, or `bun-tls` with the `tls` option). Throws
 * `ERR_UNSUPPORTED_RUNTIME` outside Bun, a `ConfigError` (`ERR_INVALID_CONFIG`) for a bad option (the defaults are Node's
 * `tcpTransport`'s).
 */
export function bunTcpTransport(options: BunTcpTransportOptions = {}): TransportAdapter {
  const bun = runtimeGlobal<BunNet>('Bun', ['listen', 'connect']);
  if (bun === undefined)
    throw unsupportedRuntimeError('bunTcpTransport', 'bun-tcp', 'Bun.listen and Bun.connect', 'tcp');
  return new BunTcpAdapter(bun, parseTcpOptions(options, 'bunTcpTransport'));
}

function listenTls(t: TlsSettings): BunTlsOptions {
  return {
    key: t.key as string,
    cert: t.cert as string,
    ...(t.ca !== undefined ? { ca: [...t.ca] } : {}),
    requestCert: t.requestCert,
    rejectUnauthorized: t.rejectUnauthorized,
  };
}

function connectTls(t: TlsSettings): BunTlsOptions {
  return {
    ...(t.ca !== undefined ? { ca: [...t.ca] } : {}),
    ...(t.servername !== undefined ? { serverName: t.servername } : {}),
    ...(t.key !== undefined ? { key: t.key, cert: t.cert as string } : {}),
    rejectUnauthorized: t.rejectUnauthorized,
  };
}

/** Socket events go to the socket's driver (Bun's handlers are per listener, not per socket). */
function handlers(onOpen: (socket: BunSocketLike) => void): SocketHandlers {
  return {
    open: onOpen,
    data: (s, chunk) => s.data.driver?.onData(chunk),
    drain: (s) => s.data.driver?.onDrain(),
    close: (s, error) => s.data.driver?.onClose(error),
    end: (s) => s.data.driver?.onEnd(),
    error: (s, error) => s.data.driver?.onError(error),
    handshake: (s, success, error) => s.data.driver?.onHandshake(success, error),
  };
}

class BunTcpAdapter implements TransportAdapter {
  readonly name: string;
  readonly dialSchemes: readonly string[];
  readonly credential: CredentialSource | undefined;
  readonly authenticate: Authenticate | undefined;
  readonly #bun: BunNet;
  readonly #o: TcpOptions;
  readonly #limits: AdmissionLimits;
  readonly #sockets = new Set<BunSocket>();
  #listener: BunListener | undefined;
  /** For a host or request without a node's policy (the adapter used on its own). */
  #ownPolicy: FramePolicy | undefined;
  #closed = false;

  constructor(bun: BunNet, o: TcpOptions) {
    this.#bun = bun;
    this.#o = o;
    this.name = o.tls === undefined ? 'bun-tcp' : 'bun-tls';
    this.dialSchemes = [o.scheme];
    this.credential = o.credential;
    this.authenticate = o.authenticate;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
  }

  #policy(given: FramePolicy | undefined): FramePolicy {
    return given ?? (this.#ownPolicy ??= defaultFramePolicy());
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    const o = this.#o;
    if (!o.listen) return undefined;
    const t = o.tls;
    const policy = this.#policy(host.framePolicy);
    const onOpen = (raw: BunSocketLike): void => {
      if (this.#closed) {
        raw.terminate();
        return;
      }
      const socket = this.#track(raw, host.runtime);
      const remote = formatTcpAddress(raw.remoteAddress, raw.remotePort ?? 0, o.scheme);
      const accept = (): void =>
        host.accept(
          new ByteStreamConnection(
            socket,
            this.name,
            remote,
            host.frameLimit,
            this.#limits,
            o.closeGraceMs,
            policy,
            host.runtime,
          ),
        );
      if (t === undefined) {
        accept();
        return;
      }
      socket.awaitHandshake(t.handshakeTimeoutMs, (ok) => {
        if (ok && !this.#closed) accept();
        else socket.destroy();
      });
    };
    try {
      this.#listener = this.#bun.listen({
        hostname: o.host,
        port: o.port,
        socket: handlers(onOpen),
        data: { driver: undefined },
        ...(t !== undefined ? { tls: listenTls(t) } : {}),
      });
    } catch (e) {
      throw listenFailure('bunTcpTransport', o.host, o.port, e);
    }
    return formatTcpAddress(o.host, this.#listener.port, o.scheme);
  }

  #track(raw: BunSocketLike, rt: Runtime): BunSocket {
    raw.setNoDelay(true);
    const socket = new BunSocket(raw, rt, () => this.#sockets.delete(socket));
    raw.data = { driver: socket };
    this.#sockets.add(socket);
    return socket;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    const o = this.#o;
    const target = parseTcpAddress(request.address, o.scheme);
    if (target === undefined || this.#closed)
      return failDial(events, tcpDialRefusal(request.address, this.#closed, `bun ${o.scheme} transport`, o.scheme));
    const t = o.tls;
    const policy = this.#policy(request.framePolicy);
    const rt = request.runtime;
    return dialByteStream({
      request,
      events,
      timeoutMs: o.connectTimeoutMs,
      // Track the socket in `open` (before the promise settles) so no early read is lost.
      connect: () =>
        t === undefined
          ? this.#bun.connect({
              hostname: target.host,
              port: target.port,
              socket: handlers((raw) => void this.#track(raw, rt)),
              data: { driver: undefined },
            })
          : this.#connectTls(target, t, rt),
      wrap: (raw) =>
        new ByteStreamConnection(
          raw.data.driver ?? this.#track(raw, rt),
          this.name,
          request.address,
          request.frameLimit,
          this.#limits,
          o.closeGraceMs,
          policy,
          rt,
        ),
      discard: (raw) => (raw.data.driver ?? this.#track(raw, rt)).destroy(),
      unwanted: () => this.#closed,
      ...(t !== undefined ? { failure: (e: unknown) => tlsDialError(request.address, e) } : {}),
    });
  }

  /**
   * Connect and wait for the handshake: Bun resolves `connect` when the TCP socket opens, before the
   * server's certificate is checked, so the dial settles on the `handshake` event instead (refused
   * certificate: the dial fails with Bun's authorization error).
   */
  #connectTls(target: { host: string; port: number }, t: TlsSettings, rt: Runtime): Promise<BunSocketLike> {
    return new Promise<BunSocketLike>((resolve, reject) => {
      const onOpen = (raw: BunSocketLike): void => {
        const socket = this.#track(raw, rt);
        socket.awaitHandshake(this.#o.connectTimeoutMs, (ok, error) => {
          if (ok) {
            resolve(raw);
            return;
          }
          socket.destroy();
          reject(error ?? new Error('the TLS handshake did not complete'));
        });
      };
      this.#bun
        .connect({
          hostname: target.host,
          port: target.port,
          socket: handlers(onOpen),
          data: { driver: undefined },
          tls: connectTls(t),
        })
        .catch(reject);
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const closing = [...this.#sockets].map((s) => s.endAndWait(this.#o.closeGraceMs));
    this.#listener?.stop(false);
    await Promise.all(closing);
  }
}

/** A Bun TCP socket as a {@link ByteSocketDriver}. */
class BunSocket implements ByteSocketDriver {
  readonly #raw: BunSocketLike;
  readonly #rt: Runtime;
  readonly #onGone: () => void;
  readonly #done: Promise<void>;
  #markDone!: () => void;
  #events: ByteSocketEvents | undefined;
  /** Bytes the kernel has not taken yet, in order (the head may be partly written). */
  #queue: Uint8Array[] = [];
  #queued = 0;
  /** Reads that arrived before start(). */
  #early: Uint8Array[] | undefined = [];
  #ending = false;
  #destroyed = false;
  #reported = false;
  #error: Error | undefined;
  #grace: TimerHandle | undefined;
  /** TLS: told once when the handshake succeeds, fails, times out, or the socket closes first. */
  #handshaken: ((ok: boolean, error: Error | undefined) => void) | undefined;
  #handshakeTimer: TimerHandle | undefined;

  constructor(raw: BunSocketLike, rt: Runtime, onGone: () => void) {
    this.#raw = raw;
    this.#rt = rt;
    this.#onGone = onGone;
    this.#done = new Promise<void>((resolve) => (this.#markDone = resolve));
  }

  start(events: ByteSocketEvents): void {
    this.#events = events;
    const early = this.#early ?? [];
    this.#early = undefined;
    for (const chunk of early) events.data(chunk);
    // Closed before anyone listened: report it now.
    if (this.#destroyed && !this.#reported) {
      this.#reported = true;
      events.ended(this.#error);
    }
  }

  onData(chunk: Uint8Array): void {
    if (this.#early !== undefined) this.#early.push(chunk);
    else this.#events?.data(chunk);
  }

  onDrain(): void {
    this.#flushQueue();
    this.#events?.drained();
  }

  onError(error: Error): void {
    this.#error ??= error;
  }

  /** Call `then` once: handshake done (`ok`), refused, not done within `ms`, or the socket gone first. */
  awaitHandshake(ms: number, then: (ok: boolean, error: Error | undefined) => void): void {
    this.#handshaken = then;
    this.#handshakeTimer = this.#rt.setTimer(
      () => this.#settleHandshake(false, new Error(`the TLS handshake did not complete within ${ms} ms`)),
      ms,
    );
  }

  onHandshake(success: boolean, error: Error | null): void {
    // `success` already accounts for rejectUnauthorized: false (then an unverified peer is a success).
    this.#settleHandshake(success, success ? undefined : (error ?? new Error('the TLS handshake failed')));
  }

  #settleHandshake(ok: boolean, error: Error | undefined): void {
    const then = this.#handshaken;
    if (then === undefined) return;
    this.#handshaken = undefined;
    if (this.#handshakeTimer !== undefined) this.#rt.clearTimer(this.#handshakeTimer);
    this.#handshakeTimer = undefined;
    then(ok, error);
  }

  onEnd(): void {
    this.#gone(this.#error);
  }

  onClose(error?: Error): void {
    this.#gone(error ?? this.#error);
  }

  write(chunk: Uint8Array): void {
    if (this.#destroyed) return;
    if (this.#queue.length === 0) {
      const n = Math.max(0, this.#raw.write(chunk));
      if (n >= chunk.byteLength) return;
      chunk = chunk.subarray(n);
    }
    this.#queue.push(chunk);
    this.#queued += chunk.byteLength;
  }

  #flushQueue(): void {
    while (this.#queue.length > 0 && !this.#destroyed) {
      const head = this.#queue[0] as Uint8Array;
      const n = Math.max(0, this.#raw.write(head));
      this.#queued -= n;
      if (n < head.byteLength) {
        this.#queue[0] = head.subarray(n);
        return;
      }
      this.#queue.shift();
    }
    if (this.#ending && this.#queue.length === 0 && !this.#destroyed) this.#raw.end();
  }

  buffered(): number {
    return this.#queued;
  }

  pause(): boolean {
    this.#raw.pause();
    return true;
  }

  resume(): void {
    this.#raw.resume();
  }

  end(graceMs: number): void {
    if (this.#destroyed || this.#ending) return;
    this.#ending = true;
    this.#grace = this.#rt.setTimer(() => this.destroy(), graceMs);
    this.#raw.resume();
    // Half-close once every admitted byte is written (a GOAWAY precedes the FIN); else on drain.
    if (this.#queue.length === 0) this.#raw.end();
  }

  /** End gracefully and resolve when the socket is really closed. */
  endAndWait(graceMs: number): Promise<void> {
    this.end(graceMs);
    return this.#done;
  }

  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    if (this.#grace !== undefined) this.#rt.clearTimer(this.#grace);
    this.#settleHandshake(false, this.#error ?? new Error('the connection closed before its TLS handshake completed'));
    this.#queue = [];
    this.#queued = 0;
    try {
      this.#raw.terminate();
    } catch {
      // Already closed.
    }
    this.#onGone();
    this.#markDone();
    this.#gone(undefined);
  }

  #gone(cause: Error | undefined): void {
    this.#error ??= cause;
    if (!this.#reported && this.#events !== undefined) {
      this.#reported = true;
      this.#events.ended(cause);
    }
    this.destroy();
  }
}
