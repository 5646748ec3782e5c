/**
 * Deno TCP transport adapter (`Deno.listen` / `Deno.connect`): one TCP connection per lane, the same
 * length-prefixed frames as the Node adapter (`node-tcp.ts`), so Node, Deno and Bun peers dial each
 * other freely. The connection logic is shared (`byte-stream-conn.ts`); this file is the Deno socket.
 *
 * - Reads pull from `conn.readable`; `pause()` stops pulling, so the peer sees TCP back-pressure.
 * - Writes go through `conn.writable`'s writer; bytes whose write promise has not settled count as
 *   buffered, and each settled write wakes admission (the TCP writer promises are the drain signal).
 * - `setNoDelay(true)`: tokens must not wait for Nagle.
 *
 * Needs Deno (`--allow-net`). Elsewhere {@link denoTcpTransport} throws `ERR_UNSUPPORTED_RUNTIME`.
 *
 * @example
 * ```ts
 * import { denoTcpTransport } from 'lanemux/transport/deno-tcp';
 * const node = await createNode({ transports: [denoTcpTransport({ port: 0 })] });
 * ```
 *
 * @packageDocumentation
 */
import { acceptLoop, type AcceptLoop } from './accept-loop.ts';
import type { AdmissionLimits } from './admission.ts';
import { ByteStreamConnection, dialByteStream, type ByteSocketDriver, type ByteSocketEvents } from './byte-stream-conn.ts';
import { asTransportError } from './errors.ts';
import { parseOptions } from './options.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from './port.ts';
import { runtimeGlobal, unsupportedRuntimeError } from './runtime-guard.ts';
import { setUnrefTimeout, type TimerHandle } from './runtime.ts';
import { failDial } from './fail-dial.ts';
import { formatTcpAddress, parseTcpAddress, tcpDialRefusal, tcpOptionsSchema, type SocketTcpTransportOptions, type TcpOptions } from './socket-options.ts';

/** Options of {@link denoTcpTransport} (the same as Node's `tcpTransport`). */
export type DenoTcpTransportOptions = SocketTcpTransportOptions;

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
}
interface DenoListener {
  readonly addr: DenoNetAddr;
  accept(): Promise<DenoConn>;
  close(): void;
}
interface DenoNet {
  listen(options: { hostname: string; port: number; transport: 'tcp' }): DenoListener;
  connect(options: { hostname: string; port: number; transport: 'tcp' }): Promise<DenoConn>;
}

/** Create a Deno TCP transport adapter. Throws `ERR_UNSUPPORTED_RUNTIME` outside Deno. */
export function denoTcpTransport(options: DenoTcpTransportOptions = {}): TransportAdapter {
  const deno = runtimeGlobal<DenoNet>('Deno', ['listen', 'connect']);
  if (deno === undefined) throw unsupportedRuntimeError('denoTcpTransport', 'deno-tcp', 'Deno.listen and Deno.connect', 'tcp');
  return new DenoTcpAdapter(deno, parseOptions(tcpOptionsSchema, options, 'denoTcpTransport'));
}

class DenoTcpAdapter implements TransportAdapter {
  readonly name = 'deno-tcp';
  readonly dialSchemes = ['tcp'] as const;
  readonly #deno: DenoNet;
  readonly #o: TcpOptions;
  readonly #limits: AdmissionLimits;
  readonly #sockets = new Set<DenoSocket>();
  #listener: DenoListener | undefined;
  #accepting: AcceptLoop | undefined;
  #closed = false;

  constructor(deno: DenoNet, o: TcpOptions) {
    this.#deno = deno;
    this.#o = o;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    if (!this.#o.listen) return undefined;
    let listener: DenoListener;
    try {
      listener = this.#deno.listen({ hostname: this.#o.host, port: this.#o.port, transport: 'tcp' });
    } catch (e) {
      throw asTransportError('ERR_CONFIG', `denoTcpTransport cannot listen on ${this.#o.host}:${this.#o.port}`, e);
    }
    this.#listener = listener;
    this.#accepting = acceptLoop({
      accept: () => listener.accept(),
      stopped: () => this.#closed,
      onAccepted: (conn) => {
        if (this.#closed) {
          closeQuietly(conn);
          return;
        }
        // One connection that fails while it is set up must not end the accept loop for everyone.
        try {
          const socket = this.#track(conn);
          const remote = formatTcpAddress(conn.remoteAddr.hostname, conn.remoteAddr.port);
          host.accept(new ByteStreamConnection(socket, this.name, remote, host.frameLimit, this.#limits, this.#o.closeGraceMs));
        } catch {
          closeQuietly(conn);
        }
      },
    });
    return formatTcpAddress(this.#o.host, listener.addr.port);
  }

  #track(conn: DenoConn): DenoSocket {
    try {
      conn.setNoDelay(true);
    } catch {
      // Already closed: the first read reports it.
    }
    const socket = new DenoSocket(conn, () => this.#sockets.delete(socket));
    this.#sockets.add(socket);
    return socket;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    const target = parseTcpAddress(request.address);
    if (target === undefined || this.#closed) return failDial(events, tcpDialRefusal(request.address, this.#closed, 'deno tcp transport'));
    return dialByteStream({
      request,
      events,
      timeoutMs: this.#o.connectTimeoutMs,
      connect: () => this.#deno.connect({ hostname: target.host, port: target.port, transport: 'tcp' }),
      wrap: (raw) => new ByteStreamConnection(this.#track(raw), this.name, request.address, request.frameLimit, this.#limits, this.#o.closeGraceMs),
      discard: closeQuietly,
      unwanted: () => this.#closed,
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#listener?.close();
    } catch {
      // Already closed.
    }
    const closing = [...this.#sockets].map((s) => s.endAndWait(this.#o.closeGraceMs));
    // A loop pausing after a failed accept ends now, not after its back-off.
    this.#accepting?.wake();
    await Promise.all([...closing, this.#accepting?.done]);
  }
}

/** A Deno TCP connection as a {@link ByteSocketDriver}. */
class DenoSocket implements ByteSocketDriver {
  readonly #conn: DenoConn;
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
  /** A chunk read while paused, delivered on resume. */
  #held: Uint8Array | undefined;
  #wake: (() => void) | undefined;
  #ended = false;
  #destroyed = false;
  #grace: TimerHandle | undefined;

  constructor(conn: DenoConn, onGone: () => void) {
    this.#conn = conn;
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
    this.#grace = setUnrefTimeout(() => this.destroy(), graceMs);
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
    if (this.#grace !== undefined) clearTimeout(this.#grace);
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
