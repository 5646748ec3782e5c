/**
 * One lane connection over a byte stream (TCP, TLS), shared by the Node, Deno and Bun TCP adapters:
 * `[u32 length BE][message]` frames decoded by
 * {@link FrameDecoder} (limit checked before any allocation; a split frame held within the node's
 * incomplete-frame pool, a large one with a deadline), a GOAWAY before the FIN when the peer breaks
 * framing or misses a deadline, and admission through {@link AdmissionGate} against what the socket
 * has not yet written.
 *
 * A runtime plugs in a small {@link ByteSocketDriver}: how to write, how much is still buffered, how
 * to pause reading and how to close. Frames sent in one task are coalesced into one write, so a
 * burst of lane batches leaves in one syscall: by the connection (one copied chunk at the end of the
 * task), or by the driver itself when it says so ({@link ByteSocketDriver.coalesces}: Node corks).
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { AdmissionGate, type AdmissionLimits } from '../transport/admission.ts';
import { TransportError, asTransportError } from '../transport/errors.ts';
import { FRAME_PREFIX_BYTES, FrameDecoder, writeFrame } from '../transport/frame.ts';
import type { FramePolicy } from '../transport/frame-pool.ts';
import { encodeGoaway } from '../transport/hello.ts';
import type {
  Admission,
  CloseMode,
  Connection,
  ConnectionReceiver,
  DialEvents,
  DialHandle,
  DialRequest,
} from '../transport/port.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';

/** What a runtime's socket reports to the connection. */
export interface ByteSocketEvents {
  /** Bytes read, in order. The chunk is not reused by the driver (the decoder may keep views of it). */
  data(chunk: Uint8Array): void;
  /** Some buffered bytes reached the OS: admission may continue. */
  drained(): void;
  /** The socket is gone (end of stream, reset, error). At most once. */
  ended(cause?: unknown): void;
}

/** A runtime's TCP socket, as the shared connection needs it. */
export interface ByteSocketDriver {
  /**
   * The driver groups the writes of one task itself (Node: cork, then uncork in a microtask), so the
   * connection hands it every frame at once instead of copying a task's frames into one chunk.
   * Defaults to false.
   */
  readonly coalesces?: boolean;
  /**
   * Fresh bytes for one frame, every one of which the connection overwrites (Node: `Buffer.allocUnsafe`,
   * from its slab pool). Defaults to `new Uint8Array(bytes)`.
   */
  readonly alloc?: ((bytes: number) => Uint8Array) | undefined;
  /** Start reading; events flow from now on. Called once. */
  start(events: ByteSocketEvents): void;
  /**
   * Write all of `chunk` eventually, in order (the driver keeps what the OS does not take yet). Never
   * throws. The chunk is handed over: the connection never touches it again, so the driver may reuse
   * its memory once written (Node: a batch frame's buffer goes back to its write pool).
   */
  write(chunk: Uint8Array): void;
  /** Bytes handed to {@link write} that the OS has not taken yet. */
  buffered(): number;
  /** Stop reading (the peer then sees TCP back-pressure). False if the runtime cannot. */
  pause(): boolean;
  resume(): void;
  /** Write what is buffered, then half-close; close for good after `graceMs` if the peer has not. */
  end(graceMs: number): void;
  /** Close now, dropping what is buffered. Idempotent. */
  destroy(): void;
}

/** A {@link Connection} over a {@link ByteSocketDriver}. */
export class ByteStreamConnection implements Connection {
  readonly remote: string;
  readonly #driver: ByteSocketDriver;
  readonly #decoder: FrameDecoder;
  readonly #gate: AdmissionGate;
  readonly #closeGraceMs: number;
  /** How errors name this connection: `deno-tcp connection`, or just `connection` (Node). */
  readonly #label: string;
  readonly #coalesces: boolean;
  readonly #alloc: ((bytes: number) => Uint8Array) | undefined;
  #receiver: ConnectionReceiver | undefined;
  /** Frames admitted in this task, written together at the end of it. */
  #batch: Uint8Array[] = [];
  #batchBytes = 0;
  #closed = false;

  /**
   * @param name - adapter name for errors (`tcp`, `tls`), or `''` for none (Node's errors say just "connection").
   * @param remote - the peer, e.g. `tcp://127.0.0.1:4000`.
   * @param policy - bounds on incomplete frames (the node's pool and deadline).
   * @param runtime - the node's clock and timers (the split-frame deadline).
   */
  constructor(
    driver: ByteSocketDriver,
    name: string,
    remote: string,
    frameLimit: number,
    limits: AdmissionLimits,
    closeGraceMs: number,
    policy: FramePolicy,
    runtime: Runtime,
  ) {
    this.#driver = driver;
    this.#label = name === '' ? 'connection' : `${name} connection`;
    this.#coalesces = driver.coalesces === true;
    this.#alloc = driver.alloc;
    this.remote = remote;
    this.#closeGraceMs = closeGraceMs;
    this.#decoder = new FrameDecoder(frameLimit, remote, { policy, onDeadline: (e) => this.#refuse(e), runtime });
    this.#gate = new AdmissionGate(
      { buffered: () => driver.buffered() + this.#batchBytes, write: (f) => this.#write(f) },
      limits,
      remote,
    );
  }

  start(receiver: ConnectionReceiver): void {
    this.#receiver = receiver;
    this.#driver.start({
      data: (chunk) => {
        const error = this.#decoder.push(chunk, this.#onFrame);
        if (error !== undefined) this.#refuse(error);
      },
      drained: () => this.#gate.drain(),
      ended: (cause) => this.#lost(cause),
    });
  }

  readonly #onFrame = (message: Uint8Array): void => {
    if (!this.#closed) this.#receiver?.message(message);
  };

  setFrameLimit(bytes: number): void {
    this.#decoder.limit = bytes;
  }

  send(head: Uint8Array, body?: Uint8Array): Admission {
    if (this.#closed)
      return Promise.reject(
        new TransportError('ERR_PEER_GONE', `${this.#label} to ${this.remote} is closed`, { retryable: true }),
      );
    const bytes = FRAME_PREFIX_BYTES + head.byteLength + (body?.byteLength ?? 0);
    const frame = this.#alloc === undefined ? new Uint8Array(bytes) : this.#alloc(bytes);
    writeFrame(frame, head, body);
    return this.#gate.offer(frame);
  }

  #write(frame: Uint8Array): void {
    if (this.#coalesces) {
      this.#driver.write(frame);
      return;
    }
    if (this.#batch.length === 0) queueMicrotask(this.#flush);
    this.#batch.push(frame);
    this.#batchBytes += frame.byteLength;
  }

  readonly #flush = (): void => {
    const batch = this.#batch;
    if (batch.length === 0) return;
    this.#batch = [];
    const total = this.#batchBytes;
    this.#batchBytes = 0;
    if (batch.length === 1) {
      this.#driver.write(batch[0] as Uint8Array);
    } else {
      const out = new Uint8Array(total);
      let off = 0;
      for (const f of batch) {
        out.set(f, off);
        off += f.byteLength;
      }
      this.#driver.write(out);
    }
    // The batch counted as buffered; if the socket took it at once no drain event follows.
    if (this.#gate.waiting > 0 && !this.#closed) this.#gate.drain();
  };

  bufferedAmount(): number {
    return this.#driver.buffered() + this.#batchBytes + this.#gate.pendingBytes;
  }

  pause(): boolean {
    const paused = this.#driver.pause();
    // We stopped reading: the peer's large frame must not run out of time meanwhile.
    if (paused) this.#decoder.suspendDeadline();
    return paused;
  }

  resume(): void {
    this.#decoder.resumeDeadline();
    this.#driver.resume();
  }

  close(reason: LanemuxError, mode: CloseMode = 'graceful'): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#decoder.stop();
    this.#gate.fail(reason);
    if (mode === 'graceful') {
      this.#flush();
      this.#driver.end(this.#closeGraceMs);
    } else {
      this.#batch = [];
      this.#batchBytes = 0;
      this.#driver.destroy();
    }
    this.#receiver?.closed(reason);
  }

  /** The peer broke framing: tell it why (the GOAWAY goes out before the FIN), then close. */
  #refuse(error: LanemuxError): void {
    if (this.#closed) return;
    this.#flush();
    const goaway = encodeGoaway(error);
    const bytes = FRAME_PREFIX_BYTES + goaway.byteLength;
    const frame = this.#alloc === undefined ? new Uint8Array(bytes) : this.#alloc(bytes);
    writeFrame(frame, goaway, undefined);
    this.#driver.write(frame);
    this.close(error, 'graceful');
  }

  #lost(cause: unknown): void {
    if (this.#closed) return;
    const detail =
      cause === undefined ? 'closed by peer' : `failed: ${cause instanceof Error ? cause.message : String(cause)}`;
    this.close(
      new TransportError('ERR_PEER_GONE', `${this.#label} to ${this.remote} ${detail}`, { retryable: true, cause }),
      'abort',
    );
  }
}

/**
 * One dial over a runtime's TCP connect (Deno, Bun): settle once — the socket opens (wrapped in a
 * {@link ByteStreamConnection}), the connect fails, or `timeoutMs` passes — and return a handle that
 * aborts the attempt or closes the connection. A socket that arrives after the dial settled (timed
 * out, cancelled) or after `unwanted()` turns true is handed to `discard`.
 */
export function dialByteStream<S>(options: {
  readonly request: DialRequest;
  readonly events: DialEvents;
  readonly timeoutMs: number;
  readonly connect: () => Promise<S>;
  readonly wrap: (raw: S) => ByteStreamConnection;
  readonly discard: (raw: S) => void;
  readonly unwanted: () => boolean;
  /** The error a failed `connect` is reported as. Defaults to a retryable `ERR_CONNECT`. */
  readonly failure?: (cause: unknown) => LanemuxError;
}): DialHandle {
  const { request, events } = options;
  const rt = request.runtime;
  let settled = false;
  let conn: ByteStreamConnection | undefined;
  const timer: TimerHandle = rt.setTimer(() => {
    if (settled) return;
    settled = true;
    events.fail(
      new TransportError('ERR_CONNECT', `connect to ${request.address} timed out after ${options.timeoutMs} ms`, {
        retryable: true,
      }),
    );
  }, options.timeoutMs);
  let connecting: Promise<S>;
  try {
    connecting = options.connect();
  } catch (e) {
    connecting = Promise.reject(e);
  }
  connecting.then(
    (raw) => {
      if (settled || options.unwanted()) {
        // Timed out, cancelled or closed meanwhile: nobody wants this socket.
        options.discard(raw);
        return;
      }
      settled = true;
      rt.clearTimer(timer);
      conn = options.wrap(raw);
      events.open(conn);
    },
    (e: unknown) => {
      if (settled) return;
      settled = true;
      rt.clearTimer(timer);
      events.fail(
        options.failure !== undefined
          ? options.failure(e)
          : asTransportError('ERR_CONNECT', `tcp connect to ${request.address}`, e),
      );
    },
  );
  return {
    close: () => {
      if (!settled) {
        settled = true;
        rt.clearTimer(timer);
      } else {
        conn?.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort');
      }
    },
  };
}
