/**
 * One lane connection over a server-side WebSocket, shared by the Node (`ws`), Deno and Bun WebSocket
 * server adapters, so the three speak one wire: one binary WebSocket message per
 * lanemux message, text messages refused, the frame limit (4 KiB before the HELLO) checked on every
 * message, a GOAWAY then a close code from `transport/ws-codes.ts` when the peer breaks a rule, and admission
 * through {@link AdmissionGate} against the socket's buffered amount.
 *
 * A runtime plugs in a small {@link MessageSocketDriver}. Runtimes with a drain event call
 * {@link MessageSocketConnection.drained}; for the others the connection polls the buffered amount
 * while an admission waits (the WHATWG API has no drain event).
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { AdmissionGate, type AdmissionLimits } from '../transport/admission.ts';
import { TransportError } from '../transport/errors.ts';
import { describeBytes, encodeGoaway } from '../transport/hello.ts';
import type { Admission, CloseMode, Connection, ConnectionReceiver } from '../transport/port.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { closeFrameFor, errorForClose } from '../transport/ws-codes.ts';
import type { UpgradeRequest } from '../transport/auth.ts';

/** A runtime's server-side WebSocket, as the shared connection needs it. */
export interface MessageSocketDriver {
  /**
   * The connection has its receiver: a driver that held reading back until now (Node's `ws`, paused
   * at accept so nothing is lost) wires its message events to `conn` and resumes. Defaults to none:
   * the runtime delivers through {@link MessageSocketConnection.message} from the start, and what
   * comes before `start` is buffered.
   */
  start?(conn: MessageSocketConnection): void;
  /** The frame limit changed (Node: `ws` then refuses an oversized message while it arrives). */
  setFrameLimit?(bytes: number): void;
  /**
   * Fresh bytes for one message, every one of which the connection overwrites (Node:
   * `Buffer.allocUnsafe`, from its slab pool). Defaults to `new Uint8Array(bytes)`.
   */
  readonly alloc?: ((bytes: number) => Uint8Array) | undefined;
  /** Send one binary message (the connection owns `frame`). False if the socket refused it (not open). */
  send(frame: Uint8Array): boolean;
  /** Bytes sent but not yet written to the network. */
  buffered(): number;
  /** True if the runtime reports drains (then the connection does not poll). */
  readonly drainEvents: boolean;
  /** Stop reading; false if the runtime cannot. */
  pause(): boolean;
  resume(): void;
  /** Start the close handshake (reading on, so the peer's answer is read even after a pause). */
  close(code: number, reason: string): void;
  /**
   * True when `close` ends the socket for good at once, with no close event to wait for (the client's
   * partysocket, whose dial drops the socket and opens the next one itself). Defaults to false.
   */
  readonly closeIsFinal?: boolean;
  /** Drop the socket now (no handshake), or as near as the runtime allows. */
  terminate(): void;
}

/** A {@link Connection} over a {@link MessageSocketDriver}. */
export class MessageSocketConnection implements Connection {
  readonly remote: string;
  /** Server side: the upgrade request that opened the socket (for `authenticate`). */
  request: UpgradeRequest | undefined;
  readonly #driver: MessageSocketDriver;
  readonly #rt: Runtime;
  readonly #gate: AdmissionGate;
  readonly #closeGraceMs: number;
  readonly #pollMs: number;
  readonly #alloc: ((bytes: number) => Uint8Array) | undefined;
  readonly #done: Promise<void>;
  #markDone!: () => void;
  #frameLimit: number;
  #receiver: ConnectionReceiver | undefined;
  /** Messages that arrived before start(). */
  #early: Uint8Array[] | undefined = [];
  #closed = false;
  #socketClosed = false;
  #poll: TimerHandle | undefined;
  #grace: TimerHandle | undefined;

  constructor(
    driver: MessageSocketDriver,
    remote: string,
    frameLimit: number,
    limits: AdmissionLimits,
    closeGraceMs: number,
    pollMs: number,
    runtime: Runtime,
  ) {
    this.#driver = driver;
    this.#rt = runtime;
    this.remote = remote;
    this.#frameLimit = frameLimit;
    this.#closeGraceMs = closeGraceMs;
    this.#pollMs = pollMs;
    this.#alloc = driver.alloc;
    this.#done = new Promise<void>((resolve) => (this.#markDone = resolve));
    this.#gate = new AdmissionGate(
      {
        buffered: () => driver.buffered(),
        write: (frame) => {
          if (!driver.send(frame)) queueMicrotask(() => this.socketClosed(1006, 'send on a socket that is not open'));
        },
        blocked: () => {
          if (!driver.drainEvents) this.#schedulePoll();
        },
      },
      limits,
      remote,
    );
  }

  start(receiver: ConnectionReceiver): void {
    this.#receiver = receiver;
    const early = this.#early ?? [];
    this.#early = undefined;
    for (const m of early) {
      if (this.#closed) return;
      this.#deliver(m);
    }
    this.#driver.start?.(this);
  }

  /** The runtime received a message (binary as ArrayBuffer or a view; text as string). */
  message(data: unknown): void {
    if (this.#closed) return;
    let bytes: Uint8Array;
    if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else {
      this.text(undefined);
      return;
    }
    this.binary(bytes);
  }

  /** A binary message, as bytes the connection may keep (Node's `ws` hands a Buffer: used as it is). */
  binary(bytes: Uint8Array): void {
    if (this.#closed) return;
    if (this.#early !== undefined) this.#early.push(bytes);
    else this.#deliver(bytes);
  }

  /** A text message: refused. `bytes`, when the runtime hands them (Node), are described in the error. */
  text(bytes: Uint8Array | undefined): void {
    if (this.#closed) return;
    const what = bytes === undefined ? '' : ` (${describeBytes(bytes)})`;
    this.#refuse(
      new TransportError(
        'ERR_MALFORMED_ENVELOPE',
        `text WebSocket message from ${this.remote}${what}; lanemux speaks binary only`,
      ),
    );
  }

  #deliver(bytes: Uint8Array): void {
    if (bytes.byteLength > this.#frameLimit) {
      this.#refuse(
        new TransportError(
          'ERR_FRAME_TOO_LARGE',
          `message of ${bytes.byteLength} bytes from ${this.remote} exceeds the limit of ${this.#frameLimit} bytes (${describeBytes(bytes)})`,
        ),
      );
      return;
    }
    this.#receiver?.message(bytes);
  }

  /** The runtime reports that buffered bytes were written. */
  drained(): void {
    this.#gate.drain();
  }

  /** The socket closed (by the peer, the network or our own close). */
  socketClosed(code: number, reason: string): void {
    if (this.#socketClosed) return;
    this.lost(errorForClose(code, reason, this.remote));
  }

  /** The socket is gone, for the reason `error` (a driver that knows better than the close code says it). */
  lost(error: LanemuxError): void {
    if (this.#socketClosed) return;
    this.#socketClosed = true;
    if (this.#grace !== undefined) this.#rt.clearTimer(this.#grace);
    this.#markDone();
    if (!this.#closed) this.close(error, 'abort');
  }

  setFrameLimit(bytes: number): void {
    this.#frameLimit = bytes;
    this.#driver.setFrameLimit?.(bytes);
  }

  send(head: Uint8Array, body?: Uint8Array): Admission {
    if (this.#closed)
      return Promise.reject(
        new TransportError('ERR_PEER_GONE', `websocket to ${this.remote} is closed`, { retryable: true }),
      );
    const bytes = head.byteLength + (body?.byteLength ?? 0);
    const frame = this.#alloc === undefined ? new Uint8Array(bytes) : this.#alloc(bytes);
    frame.set(head, 0);
    if (body !== undefined) frame.set(body, head.byteLength);
    return this.#gate.offer(frame);
  }

  #schedulePoll(): void {
    if (this.#poll !== undefined || this.#closed) return;
    this.#poll = this.#rt.setTimer(() => {
      this.#poll = undefined;
      this.#gate.drain();
      if (this.#gate.waiting > 0) this.#schedulePoll();
    }, this.#pollMs);
  }

  bufferedAmount(): number {
    return this.#driver.buffered() + this.#gate.pendingBytes;
  }

  pause(): boolean {
    return this.#driver.pause();
  }

  resume(): void {
    this.#driver.resume();
  }

  close(reason: LanemuxError, mode: CloseMode = 'graceful'): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#early = undefined;
    if (this.#poll !== undefined) this.#rt.clearTimer(this.#poll);
    this.#gate.fail(reason);
    if (!this.#socketClosed) {
      const final = this.#driver.closeIsFinal === true;
      if (mode === 'graceful' || final) {
        const { code, reason: text } = closeFrameFor(reason);
        this.#driver.close(code, text);
        if (final) {
          this.#socketClosed = true;
          this.#markDone();
        } else {
          this.#grace = this.#rt.setTimer(() => {
            this.#driver.terminate();
            this.socketClosed(1006, 'close handshake timed out');
          }, this.#closeGraceMs);
        }
      } else {
        this.#driver.terminate();
        // Nothing more to wait for: the socket is dropped (its close event may still come).
        this.#markDone();
      }
    }
    this.#receiver?.closed(reason);
  }

  /** Close gracefully and resolve when the socket is really closed (or the grace period ended). */
  closeAndWait(reason: LanemuxError): Promise<void> {
    this.close(reason, 'graceful');
    return this.#done;
  }

  #refuse(error: LanemuxError): void {
    if (this.#closed) return;
    this.#driver.send(encodeGoaway(error));
    this.close(error, 'graceful');
  }
}
