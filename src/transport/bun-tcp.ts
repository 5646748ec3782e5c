/**
 * Bun TCP transport adapter (`Bun.listen` / `Bun.connect`): one TCP connection per lane, the same
 * length-prefixed frames as the Node adapter (`node-tcp.ts`), so Node, Deno and Bun peers dial each
 * other freely. The connection logic is shared (`byte-stream-conn.ts`); this file is the Bun socket.
 *
 * - Bun's `socket.write` takes what the kernel accepts now and returns the count; the rest is kept
 *   here, in order, and written from the `drain` handler, which also wakes admission.
 * - `pause()`/`resume()` stop and restart reading, so the peer sees TCP back-pressure.
 * - `setNoDelay(true)`: tokens must not wait for Nagle.
 *
 * Needs Bun. Elsewhere {@link bunTcpTransport} throws `ERR_UNSUPPORTED_RUNTIME`.
 *
 * @example
 * ```ts
 * import { bunTcpTransport } from 'lanemux/transport/bun-tcp';
 * const node = await createNode({ transports: [bunTcpTransport({ port: 0 })] });
 * ```
 *
 * @packageDocumentation
 */
import type { AdmissionLimits } from './admission.ts';
import { ByteStreamConnection, dialByteStream, type ByteSocketDriver, type ByteSocketEvents } from './byte-stream-conn.ts';
import { asTransportError } from './errors.ts';
import { parseOptions } from './options.ts';
import type { DialEvents, DialHandle, DialRequest, ListenHost, TransportAdapter } from './port.ts';
import { runtimeGlobal, unsupportedRuntimeError } from './runtime-guard.ts';
import { setUnrefTimeout, type TimerHandle } from './runtime.ts';
import { failDial } from './fail-dial.ts';
import { formatTcpAddress, parseTcpAddress, tcpDialRefusal, tcpOptionsSchema, type SocketTcpTransportOptions, type TcpOptions } from './socket-options.ts';

/** Options of {@link bunTcpTransport} (the same as Node's `tcpTransport`). */
export type BunTcpTransportOptions = SocketTcpTransportOptions;

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
}
interface BunListener {
  readonly port: number;
  stop(closeActiveConnections?: boolean): void;
}
interface BunNet {
  listen(options: { hostname: string; port: number; socket: SocketHandlers; data: SocketData }): BunListener;
  connect(options: { hostname: string; port: number; socket: SocketHandlers; data: SocketData }): Promise<BunSocketLike>;
}

/** Create a Bun TCP transport adapter. Throws `ERR_UNSUPPORTED_RUNTIME` outside Bun. */
export function bunTcpTransport(options: BunTcpTransportOptions = {}): TransportAdapter {
  const bun = runtimeGlobal<BunNet>('Bun', ['listen', 'connect']);
  if (bun === undefined) throw unsupportedRuntimeError('bunTcpTransport', 'bun-tcp', 'Bun.listen and Bun.connect', 'tcp');
  return new BunTcpAdapter(bun, parseOptions(tcpOptionsSchema, options, 'bunTcpTransport'));
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
  };
}

class BunTcpAdapter implements TransportAdapter {
  readonly name = 'bun-tcp';
  readonly dialSchemes = ['tcp'] as const;
  readonly #bun: BunNet;
  readonly #o: TcpOptions;
  readonly #limits: AdmissionLimits;
  readonly #sockets = new Set<BunSocket>();
  #listener: BunListener | undefined;
  #closed = false;

  constructor(bun: BunNet, o: TcpOptions) {
    this.#bun = bun;
    this.#o = o;
    this.#limits = { highWaterMark: o.highWaterMark, maxPendingBytes: o.maxPendingBytes };
  }

  async listen(host: ListenHost): Promise<string | undefined> {
    if (!this.#o.listen) return undefined;
    const onOpen = (raw: BunSocketLike): void => {
      if (this.#closed) {
        raw.terminate();
        return;
      }
      const socket = this.#track(raw);
      const remote = formatTcpAddress(raw.remoteAddress, raw.remotePort ?? 0);
      host.accept(new ByteStreamConnection(socket, this.name, remote, host.frameLimit, this.#limits, this.#o.closeGraceMs));
    };
    try {
      this.#listener = this.#bun.listen({ hostname: this.#o.host, port: this.#o.port, socket: handlers(onOpen), data: { driver: undefined } });
    } catch (e) {
      throw asTransportError('ERR_CONFIG', `bunTcpTransport cannot listen on ${this.#o.host}:${this.#o.port}`, e);
    }
    return formatTcpAddress(this.#o.host, this.#listener.port);
  }

  #track(raw: BunSocketLike): BunSocket {
    raw.setNoDelay(true);
    const socket = new BunSocket(raw, () => this.#sockets.delete(socket));
    raw.data = { driver: socket };
    this.#sockets.add(socket);
    return socket;
  }

  dial(request: DialRequest, events: DialEvents): DialHandle {
    const target = parseTcpAddress(request.address);
    if (target === undefined || this.#closed) return failDial(events, tcpDialRefusal(request.address, this.#closed, 'bun tcp transport'));
    return dialByteStream({
      request,
      events,
      timeoutMs: this.#o.connectTimeoutMs,
      // Track the socket in `open` (before the promise settles) so no early read is lost.
      connect: () => this.#bun.connect({ hostname: target.host, port: target.port, socket: handlers((raw) => void this.#track(raw)), data: { driver: undefined } }),
      wrap: (raw) => new ByteStreamConnection(raw.data.driver ?? this.#track(raw), this.name, request.address, request.frameLimit, this.#limits, this.#o.closeGraceMs),
      discard: (raw) => (raw.data.driver ?? this.#track(raw)).destroy(),
      unwanted: () => this.#closed,
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

  constructor(raw: BunSocketLike, onGone: () => void) {
    this.#raw = raw;
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
    this.#grace = setUnrefTimeout(() => this.destroy(), graceMs);
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
    if (this.#grace !== undefined) clearTimeout(this.#grace);
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
