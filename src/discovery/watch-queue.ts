/**
 * The bounded queue behind a watch: the adapter pushes events as the store sends them, the consumer
 * pulls them with `for await`. A consumer more than `max` events behind ends the watch with
 * `ERR_DISCOVERY_WATCH_OVERFLOW` after the events already queued (dropping some would be a gap).
 */
import type { DiscoveryEvent, DiscoveryWatch } from './discovery.ts';
import { DiscoveryError } from './errors.ts';

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/** A watch's queue; `onStop` runs once, when the watch ends for any reason. */
export class WatchQueue implements DiscoveryWatch {
  readonly #max: number;
  #items: DiscoveryEvent[] = [];
  #head = 0;
  #waiter: { resolve(r: IteratorResult<DiscoveryEvent>): void; reject(e: unknown): void } | undefined;
  #stopped = false;
  #error: unknown;
  #onStop: (() => void) | undefined;
  #roomWaiters: Array<() => void> = [];

  constructor(max: number, onStop: () => void) {
    this.#max = max;
    this.#onStop = onStop;
  }

  /** True once the watch has ended (closed, failed or overflowed). */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Hand `event` to the consumer, or queue it; past `max` queued, end the watch with an overflow. */
  push(event: DiscoveryEvent): void {
    if (this.#stopped) return;
    const w = this.#waiter;
    if (w !== undefined) {
      this.#waiter = undefined;
      w.resolve({ done: false, value: event });
      return;
    }
    if (this.#items.length - this.#head >= this.#max) {
      this.fail(
        new DiscoveryError(
          'ERR_DISCOVERY_WATCH_OVERFLOW',
          `the watch's consumer fell ${this.#max} events behind (maxQueue); start a new watch`,
          { retryable: true },
        ),
      );
      return;
    }
    this.#items.push(event);
  }

  /** Resolves once at most half of `max` events are queued, or the watch has ended: a snapshot paces its pages by it. */
  room(): Promise<void> {
    if (this.#stopped || this.#items.length - this.#head <= this.#max >> 1) return Promise.resolve();
    return new Promise((resolve) => this.#roomWaiters.push(resolve));
  }

  /** End the watch with `error`, raised after the events already queued. */
  fail(error: unknown): void {
    if (this.#stopped) return;
    this.#error = error;
    this.#stop();
    const w = this.#waiter;
    if (w !== undefined) {
      this.#waiter = undefined;
      this.#error = undefined;
      w.reject(error);
    }
  }

  /** End the watch without an error, dropping what is queued. */
  close(): void {
    this.#items = [];
    this.#head = 0;
    this.#error = undefined;
    if (!this.#stopped) this.#stop();
    const w = this.#waiter;
    if (w !== undefined) {
      this.#waiter = undefined;
      w.resolve(DONE);
    }
  }

  next(): Promise<IteratorResult<DiscoveryEvent>> {
    if (this.#head < this.#items.length) {
      const value = this.#items[this.#head++]!;
      if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
        this.#items = this.#items.slice(this.#head);
        this.#head = 0;
      }
      if (this.#roomWaiters.length > 0 && this.#items.length - this.#head <= this.#max >> 1) this.#wakeRoom();
      return Promise.resolve({ done: false, value });
    }
    if (this.#stopped) {
      const error = this.#error;
      if (error === undefined) return Promise.resolve(DONE);
      this.#error = undefined;
      return Promise.reject(error);
    }
    if (this.#waiter !== undefined) return Promise.reject(new TypeError('a watch has one reader: await next() first'));
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<DiscoveryEvent>> {
    this.close();
    return Promise.resolve(DONE);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  #wakeRoom(): void {
    const waiters = this.#roomWaiters;
    this.#roomWaiters = [];
    for (const w of waiters) w();
  }

  #stop(): void {
    this.#stopped = true;
    this.#wakeRoom();
    const onStop = this.#onStop;
    this.#onStop = undefined;
    onStop?.();
  }
}
