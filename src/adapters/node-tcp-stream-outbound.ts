/**
 * The producer side of the `tcp-stream` transport: one dialled connection, its frames out (one
 * `socket.write` each, with a shared drain promise past the high-water mark), and the consumer's
 * stop request read back.
 *
 * @packageDocumentation
 */
import type net from 'node:net';
import type { LanemuxError } from '../errors.ts';
import type { PerStreamConnection } from '../transport/per-stream-port.ts';
import type { ResolvedTcpStreamOptions } from './node-tcp-stream-options.ts';
import { reset } from './node-tcp-stream-socket.ts';
import { ACTION_STOP, TCP_STREAM_PREFIX_BYTES } from './node-tcp-stream-wire.ts';
import { TcpStreamError } from './tcp-stream-errors.ts';

/** What a dialled connection needs from its transport. */
export interface OutboundOwner {
  readonly options: ResolvedTcpStreamOptions;
  countWrite(): void;
  forgetOutbound(conn: Outbound): void;
}

/** A drain promise shared by every write made while the socket is over its high-water mark. */
interface Drain {
  readonly promise: Promise<void>;
  readonly resolve: () => void;
  readonly reject: (error: LanemuxError) => void;
}

/** Producer side of one dialled connection. */
export class Outbound implements PerStreamConnection {
  readonly #socket: net.Socket;
  readonly #owner: OutboundOwner;
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

  constructor(socket: net.Socket, owner: OutboundOwner, endpoint: string) {
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
