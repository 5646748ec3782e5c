/**
 * Admission: the back-pressure contract every adapter shares.
 *
 * A frame is admitted synchronously (`true`) while the socket buffers fewer than `highWaterMark`
 * bytes and nobody is already waiting. Otherwise it waits, in FIFO order, in a queue bounded by
 * `maxPendingBytes`; beyond that bound a send is refused with `ERR_SEND_REFUSED`. A peer that stops
 * reading therefore makes admission wait and never grows an unbounded queue: the socket holds at
 * most about `highWaterMark` plus one message, the gate at most `maxPendingBytes`.
 *
 * The gate owns copies only (adapters copy the caller's bytes into the frame before offering it), so
 * callers may reuse their buffers as soon as `send` returns.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import type { Admission } from './port.ts';
import { TransportError } from './errors.ts';

/** Where admitted frames go. */
export interface AdmissionSink {
  /** Bytes the socket holds that are not yet on the wire. */
  buffered(): number;
  /** Write one frame now (the gate decided it is admitted). */
  write(frame: Uint8Array): void;
  /** Called when the first frame starts waiting (adapters without a drain event start polling). */
  blocked?(): void;
}

/** Limits of one gate. */
export interface AdmissionLimits {
  readonly highWaterMark: number;
  readonly maxPendingBytes: number;
}

interface Waiter {
  readonly frame: Uint8Array;
  resolve(): void;
  reject(error: LanemuxError): void;
}

/** One connection's admission gate. */
export class AdmissionGate {
  readonly #sink: AdmissionSink;
  readonly #limits: AdmissionLimits;
  readonly #label: string;
  // A FIFO with a moving head: shift() on a large array is O(n).
  #queue: Waiter[] = [];
  #head = 0;
  #pendingBytes = 0;
  #error: LanemuxError | undefined;

  constructor(sink: AdmissionSink, limits: AdmissionLimits, label: string) {
    this.#sink = sink;
    this.#limits = limits;
    this.#label = label;
  }

  /** Bytes waiting for admission. */
  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  /** Number of frames waiting for admission. */
  get waiting(): number {
    return this.#queue.length - this.#head;
  }

  /** Offer a frame (already a private copy). */
  offer(frame: Uint8Array): Admission {
    if (this.#error !== undefined) return Promise.reject(this.#error);
    if (this.#head === this.#queue.length && this.#sink.buffered() < this.#limits.highWaterMark) {
      this.#sink.write(frame);
      return true;
    }
    if (this.#pendingBytes + frame.byteLength > this.#limits.maxPendingBytes) {
      return Promise.reject(
        new TransportError(
          'ERR_SEND_REFUSED',
          `send refused on ${this.#label}: ${this.#pendingBytes} bytes already wait for admission and ` +
            `${frame.byteLength} more would exceed maxPendingBytes (${this.#limits.maxPendingBytes}); ` +
            'await each admission before sending more',
          { retryable: true },
        ),
      );
    }
    const first = this.#head === this.#queue.length;
    const promise = new Promise<void>((resolve, reject) => {
      this.#queue.push({ frame, resolve, reject });
    });
    this.#pendingBytes += frame.byteLength;
    if (first) this.#sink.blocked?.();
    return promise;
  }

  /** The socket drained some: admit waiting frames while below the high-water mark. */
  drain(): void {
    while (this.#head < this.#queue.length && this.#error === undefined) {
      if (this.#sink.buffered() >= this.#limits.highWaterMark) return;
      const w = this.#queue[this.#head] as Waiter;
      this.#queue[this.#head] = undefined as never;
      this.#head++;
      this.#pendingBytes -= w.frame.byteLength;
      this.#sink.write(w.frame);
      w.resolve();
    }
    if (this.#head === this.#queue.length) {
      this.#queue = [];
      this.#head = 0;
    }
  }

  /** The connection is gone: reject every waiter and every later offer with `error`. */
  fail(error: LanemuxError): void {
    if (this.#error !== undefined) return;
    this.#error = error;
    const queue = this.#queue;
    const head = this.#head;
    this.#queue = [];
    this.#head = 0;
    this.#pendingBytes = 0;
    for (let i = head; i < queue.length; i++) (queue[i] as Waiter).reject(error);
  }
}
