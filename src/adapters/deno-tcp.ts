/**
 * Deno TCP transport adapter (`Deno.listen` / `Deno.connect`, or `Deno.listenTls` / `Deno.connectTls`
 * with the `tls` option): one TCP connection per lane, the same length-prefixed frames as the Node
 * adapter (`node-tcp.ts`), so Node, Deno and Bun peers dial each other freely. The connection logic
 * is shared (`byte-stream-conn.ts`); this file is the Deno socket.
 *
 * - Reads pull from `conn.readable`; `pause()` stops pulling, so the peer sees TCP back-pressure.
 * - Writes go through `conn.writable`'s writer; bytes whose write promise has not settled count as
 *   buffered, and each settled write wakes admission (the TCP writer promises are the drain signal).
 * - `setNoDelay(true)`: tokens must not wait for Nagle.
 *
 * Needs Deno (`--allow-net`). Elsewhere {@link denoTcpTransport} throws `ERR_UNSUPPORTED_RUNTIME`.
 *
 * TLS (`tls://host:port`) has the option shape of Node's, within what Deno offers: no client
 * certificates asked for when listening (`requestCert`), no `servername` other than the address's
 * host and no `rejectUnauthorized: false`; each is refused with a `ConfigError` (`ERR_INVALID_CONFIG`). `ca` adds to Deno's
 * root store rather than replacing it. A connection is handed over once its handshake is done.
 * Deno cannot disable Nagle on a connection `Deno.listenTls` accepts (a `TlsConn` has no
 * `setNoDelay`): what a Deno TLS listener sends may wait for a delayed ACK (~40 ms on Linux) when it
 * sends little; dials avoid it, see `#connectTls`. Nor can it close an accepted connection that never
 * sends its ClientHello (`TlsConn.close()` waits for the handshake, denoland/deno#14547): past
 * `tls.handshakeTimeoutMs` it is never handed over, but its socket stays until the peer goes.
 *
 * @example
 * ```ts
 * import { denoTcpTransport } from 'lanemux/transport/deno-tcp';
 * const node = await createNode({ transports: [denoTcpTransport({ port: 0 })] });
 * ```
 *
 * @packageDocumentation
 */
import { acceptLoop, type AcceptLoop } from '../transport/accept-loop.ts';
import type { AdmissionLimits } from '../transport/admission.ts';
import type { Authenticate, CredentialSource } from '../transport/auth.ts';
import {
  ByteStreamConnection,
  dialByteStream,
  type ByteSocketDriver,
  type ByteSocketEvents,
} from './byte-stream-conn.ts';
import { listenFailure } from '../transport/errors.ts';
import { ConfigError } from '../errors.ts';
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

/** Options of {@link denoTcpTransport} (the same as Node's `tcpTransport`; see there for TLS limits). */
export type DenoTcpTransportOptions = SocketTcpTransportOptions;
export type { PemInput, SocketTlsOptions as DenoTcpTlsOptions } from './socket-options.ts';

// The few Deno APIs used, declared here because the TypeScript libs of this package have no Deno.
interface DenoNetAddr {
  readonly hostname: string;
  readonly port: number;
}
interface DenoConn {
  readonly remoteAddr: DenoNetAddr;
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
  setNoDelay(noDelay?: boolean): void;
  closeWrite(): Promise<void>;
  close(): void;
  /** TLS connections only: run the handshake now (else it runs on the first read or write). */
  handshake?(): Promise<unknown>;
}
interface DenoListener {
  readonly addr: DenoNetAddr;
  accept(): Promise<DenoConn>;
  close(): void;
}
interface DenoNet {
  listen(options: { hostname: string; port: number; transport: 'tcp' }): DenoListener;
  connect(options: { hostname: string; port: number; transport: 'tcp' }): Promise<DenoConn>;
  listenTls?(options: { hostname: string; port: number; transport: 'tcp'; cert: string; key: string }): DenoListener;
  connectTls?(options: {
    hostname: string;
    port: number;
    caCerts?: string[];
    cert?: string;
    key?: string;
  }): Promise<DenoConn>;
  startTls?(conn: DenoConn, options: { hostname: string; caCerts?: string[] }): Promise<DenoConn>;
}

/**
 * Create a Deno TCP transport adapter (name `deno-tcp`, or `deno-tls` with the `tls` option).
 * Throws `ERR_UNSUPPORTED_RUNTIME` outside Deno, a `ConfigError` (`ERR_INVALID_CONFIG`) for a bad option (the defaults are
 * Node's `tcpTransport`'s).
 */
export function denoTcpTransport(options: DenoTcpTransportOptions = {}): TransportAdapter {
  const deno = runtimeGlobal<DenoNet>('Deno', ['listen', 'connect']);
  if (deno === undefined)
    throw unsupportedRuntimeError('denoTcpTransport', 'deno-tcp', 'Deno.listen and Deno.connect', 'tcp');
  const o = parseTcpOptions(options, 'denoTcpTransport');
  if (o.tls !== undefined) checkDenoTls(o.tls);
  return new DenoTcpAdapter(deno, o);
}

/** Refuse the TLS options Deno's API cannot honour, rather than silently ignore them. */
function checkDenoTls(t: TlsSettings): void {
  const refuse = (field: string, what: string): never => {
    throw new ConfigError(field, what, { where: 'denoTcpTransport' });
  };
  if (t.requestCert)
    refuse(
      'tls.requestCert',
      'tls.requestCert is not available on Deno (Deno.listenTls cannot ask for client certificates)',
    );
  if (!t.rejectUnauthorized)
    refuse(
      'tls.rejectUnauthorized',
      'tls.rejectUnauthorized: false is not available on Deno (Deno.connectTls always verifies; trust the server with tls.ca)',
    );
  if (t.servername !== undefined)
    refuse(
      'tls.servername',
      "tls.servername is not available on Deno (Deno.connectTls checks the address's host; dial the name the certificate carries)",
    );
}

class DenoTcpAdapter implements TransportAdapter {
  readonly name: string;
  readonly dialSchemes: readonly string[];
  readonly credential: CredentialSource | undefined;
  readonly authenticate: Authenticate | undefined;
  readonly #deno: DenoNet;
  readonly #o: TcpOptions;
  readonly #limits: AdmissionLimits;
  readonly #sockets = new Set<DenoSocket>();
  /** Accepted TLS connections still in their handshake (not yet sockets of ours). */
  readonly #handshaking = new Set<DenoConn>();
  #listener: DenoListener | undefined;
  #accepting: AcceptLoop | undefined;
  /** For a host or request without a node's policy (the adapter used on its own). */
  #ownPolicy: FramePolicy | undefined;
  #closed = false;

  constructor(deno: DenoNet, o: TcpOptions) {
    this.#deno = deno;
    this.#o = o;
    this.name = o.tls === undefined ? 'deno-tcp' : 'deno-tls';
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
    let listener: DenoListener;
    try {
      if (t === undefined) {
        listener = this.#deno.listen({ hostname: o.host, port: o.port, transport: 'tcp' });
      } else {
        if (this.#deno.listenTls === undefined) throw new Error('this Deno has no Deno.listenTls');
        listener = this.#deno.listenTls({
          hostname: o.host,
          port: o.port,
          transport: 'tcp',
          cert: t.cert as string,
          key: t.key as string,
        });
      }
    } catch (e) {
      throw listenFailure('denoTcpTransport', o.host, o.port, e);
    }
    this.#listener = listener;
    const policy = this.#policy(host.framePolicy);
    const handOver = (conn: DenoConn): void => {
      if (this.#closed) {
        closeQuietly(conn);
        return;
      }
      // One connection that fails while it is set up must not end the accept loop for everyone.
      try {
        const socket = this.#track(conn, host.runtime);
        const remote = formatTcpAddress(conn.remoteAddr.hostname, conn.remoteAddr.port, o.scheme);
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
      } catch {
        closeQuietly(conn);
      }
    };
    this.#accepting = acceptLoop({
      accept: () => listener.accept(),
      stopped: () => this.#closed,
      onAccepted: (conn) => {
        if (t === undefined || conn.handshake === undefined) handOver(conn);
        else this.#handshake(conn, t.handshakeTimeoutMs, host.runtime, handOver);
      },
      runtime: host.runtime,
    });
    return formatTcpAddress(o.host, listener.addr.port, o.scheme);
  }

  /**
   * Finish an accepted TLS connection's handshake within `ms`, then hand it over; a failed or slow
   * handshake (wrong CA, plain TCP, a scanner) is dropped before it becomes a connection.
   */
  #handshake(conn: DenoConn, ms: number, rt: Runtime, handOver: (conn: DenoConn) => void): void {
    this.#handshaking.add(conn);
    const timer = rt.setTimer(() => closeQuietly(conn), ms);
    const done = (ok: boolean): void => {
      rt.clearTimer(timer);
      if (!this.#handshaking.delete(conn)) return; // closed meanwhile by close()
      if (ok) handOver(conn);
      else closeQuietly(conn);
    };
    (conn.handshake as () => Promise<unknown>).call(conn).then(
      () => done(true),
      () => done(false),
    );
  }

  #track(conn: DenoConn, rt: Runtime): DenoSocket {
    try {
      conn.setNoDelay(true);
    } catch {
      // Already closed: the first read reports it.
    }
    const socket = new DenoSocket(conn, rt, () => this.#sockets.delete(socket));
    this.#sockets.add(socket);
    return socket;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    const o = this.#o;
    const target = parseTcpAddress(request.address, o.scheme);
    if (target === undefined || this.#closed)
      return failDial(events, tcpDialRefusal(request.address, this.#closed, `deno ${o.scheme} transport`, o.scheme));
    const t = o.tls;
    const policy = this.#policy(request.framePolicy);
    return dialByteStream({
      request,
      events,
      timeoutMs: o.connectTimeoutMs,
      connect: () =>
        t === undefined
          ? this.#deno.connect({ hostname: target.host, port: target.port, transport: 'tcp' })
          : this.#connectTls(target, t, request.runtime),
      wrap: (raw) =>
        new ByteStreamConnection(
          this.#track(raw, request.runtime),
          this.name,
          request.address,
          request.frameLimit,
          this.#limits,
          o.closeGraceMs,
          policy,
          request.runtime,
        ),
      discard: closeQuietly,
      unwanted: () => this.#closed,
      ...(t !== undefined ? { failure: (e: unknown) => tlsDialError(request.address, e) } : {}),
    });
  }

  /**
   * Connect and finish the handshake before the dial counts as open, so an untrusted certificate is
   * a dial failure saying so, not a connection that dies at its first read. The handshake gets the
   * connect timeout; a connection still in it then is closed (the dial has failed by then).
   *
   * A Deno `TlsConn` has no `setNoDelay`, and Nagle with delayed ACKs stalls a token stream ~40 ms
   * per credit window (measured: 300 tokens in 450 ms instead of 90). So without a client certificate
   * the dial is a plain `Deno.connect` with `TCP_NODELAY`, upgraded by `Deno.startTls`; with one,
   * `Deno.connectTls` (the only API that presents it), Nagle included.
   */
  async #connectTls(target: { host: string; port: number }, t: TlsSettings, rt: Runtime): Promise<DenoConn> {
    const deno = this.#deno;
    const caCerts = t.ca !== undefined ? { caCerts: [...t.ca] } : {};
    let conn: DenoConn;
    if (t.key === undefined && deno.startTls !== undefined) {
      const tcp = await deno.connect({ hostname: target.host, port: target.port, transport: 'tcp' });
      try {
        tcp.setNoDelay(true);
        conn = await deno.startTls.call(deno, tcp, { hostname: target.host, ...caCerts });
      } catch (e) {
        closeQuietly(tcp);
        throw e;
      }
    } else {
      if (deno.connectTls === undefined) throw new Error('this Deno has no Deno.connectTls');
      conn = await deno.connectTls.call(deno, {
        hostname: target.host,
        port: target.port,
        ...caCerts,
        ...(t.key !== undefined ? { key: t.key, cert: t.cert as string } : {}),
      });
    }
    const timer = rt.setTimer(() => closeQuietly(conn), this.#o.connectTimeoutMs);
    try {
      await conn.handshake?.();
    } catch (e) {
      closeQuietly(conn);
      throw e;
    } finally {
      rt.clearTimer(timer);
    }
    return conn;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#listener?.close();
    } catch {
      // Already closed.
    }
    for (const conn of this.#handshaking) closeQuietly(conn);
    this.#handshaking.clear();
    const closing = [...this.#sockets].map((s) => s.endAndWait(this.#o.closeGraceMs));
    // A loop pausing after a failed accept ends now, not after its back-off.
    this.#accepting?.wake();
    await Promise.all([...closing, this.#accepting?.done]);
  }
}

/** A Deno TCP connection as a {@link ByteSocketDriver}. */
class DenoSocket implements ByteSocketDriver {
  readonly #conn: DenoConn;
  readonly #rt: Runtime;
  readonly #onGone: () => void;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #done: Promise<void>;
  #markDone!: () => void;
  #events: ByteSocketEvents | undefined;
  /** Bytes given to the writer whose write has not settled. */
  #inflight = 0;
  /** Settles when every write so far has. */
  #lastWrite: Promise<unknown> = Promise.resolve();
  #paused = false;
  /**
   * A chunk read while paused, delivered on resume: at most one read (the loop reads no further until
   * resumed), so it is bounded by the read size and not counted in the incomplete-frame pool.
   */
  #held: Uint8Array | undefined;
  #wake: (() => void) | undefined;
  #ended = false;
  #destroyed = false;
  #grace: TimerHandle | undefined;

  constructor(conn: DenoConn, rt: Runtime, onGone: () => void) {
    this.#conn = conn;
    this.#rt = rt;
    this.#onGone = onGone;
    this.#writer = conn.writable.getWriter();
    this.#done = new Promise<void>((resolve) => (this.#markDone = resolve));
  }

  start(events: ByteSocketEvents): void {
    this.#events = events;
    // Closed before anyone listened: report it now.
    if (this.#destroyed) this.#gone(undefined);
    else void this.#readLoop();
  }

  async #readLoop(): Promise<void> {
    const reader = this.#conn.readable.getReader();
    let cause: unknown;
    try {
      for (;;) {
        if (this.#paused) await new Promise<void>((resolve) => (this.#wake = resolve));
        if (this.#destroyed) break;
        const r = await reader.read();
        if (r.done || this.#destroyed) break;
        if (this.#paused) {
          this.#held = r.value;
          continue;
        }
        this.#events?.data(r.value);
      }
    } catch (e) {
      cause = e;
    }
    try {
      reader.releaseLock();
    } catch {
      // A read may still be pending on a destroyed socket.
    }
    this.#gone(cause);
  }

  write(chunk: Uint8Array): void {
    if (this.#destroyed) return;
    const n = chunk.byteLength;
    this.#inflight += n;
    this.#lastWrite = this.#writer.write(chunk).then(
      () => {
        this.#inflight -= n;
        this.#events?.drained();
      },
      (e: unknown) => {
        this.#inflight -= n;
        this.#gone(e);
      },
    );
  }

  buffered(): number {
    return this.#inflight;
  }

  pause(): boolean {
    this.#paused = true;
    return true;
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    // Deliver the held chunk from a microtask, like Node's `socket.resume()`: never re-enter the
    // caller. It runs before the read loop can read again (the loop waits for the wake below).
    queueMicrotask(() => {
      if (this.#paused) return;
      const held = this.#held;
      this.#held = undefined;
      if (held !== undefined && !this.#destroyed) this.#events?.data(held);
      const wake = this.#wake;
      this.#wake = undefined;
      wake?.();
    });
  }

  end(graceMs: number): void {
    if (this.#destroyed || this.#grace !== undefined) return;
    this.#grace = this.#rt.setTimer(() => this.destroy(), graceMs);
    // Half-close once every admitted byte is written, so a GOAWAY precedes the FIN.
    void this.#lastWrite.then(() => {
      if (this.#destroyed) return;
      this.#conn.closeWrite().catch(() => this.destroy());
    });
    // The read loop ends when the peer closes too, which destroys the socket.
    this.resume();
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
    closeQuietly(this.#conn);
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
    this.#onGone();
    this.#markDone();
    this.#gone(undefined);
  }

  #gone(cause: unknown): void {
    if (!this.#ended && this.#events !== undefined) {
      this.#ended = true;
      this.#events.ended(cause);
    }
    this.destroy();
  }
}

function closeQuietly(conn: DenoConn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}
