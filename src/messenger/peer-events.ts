/**
 * `peerEvents()`: the peer lifecycle as an async iterator with a bounded queue. A reader that falls
 * behind loses the oldest events, and its next read says how many (`overflow`), so memory stays
 * bounded whatever the reader does.
 *
 * @packageDocumentation
 */
import type { PeerEvent, PeerEventsOverflow, PeerStateEvent } from './types.ts';

/** Default bound on the events kept for one reader. */
export const DEFAULT_MAX_QUEUED_EVENTS = 1_024;

/** One reader's queue of peer events. */
export class PeerEventQueue implements AsyncIterableIterator<PeerEvent> {
  readonly #max: number;
  readonly #queue: PeerStateEvent[] = [];
  #dropped = 0;
  readonly #readers: Array<(result: IteratorResult<PeerEvent>) => void> = [];
  /** No more events will come: what is queued is still read, then the iteration ends. */
  #ending = false;
  #unsubscribe: (() => void) | undefined;
  readonly #signal: AbortSignal | undefined;

  /**
   * `subscribe` starts the feed: `push` each event, `end` when no more will come; its result stops
   * it. `signal` ends the iteration.
   */
  constructor(
    subscribe: (push: (event: PeerStateEvent) => void, end: () => void) => () => void,
    max: number,
    signal: AbortSignal | undefined,
  ) {
    this.#max = max;
    this.#signal = signal;
    if (signal?.aborted === true) {
      this.#ending = true;
      return;
    }
    const unsubscribe = subscribe(
      (event) => this.#push(event),
      () => this.end(),
    );
    // The source may have ended while subscribing (a closed messenger).
    if (this.#ending) unsubscribe();
    else {
      this.#unsubscribe = unsubscribe;
      signal?.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  readonly #onAbort = (): void => {
    void this.return();
  };

  #push(event: PeerStateEvent): void {
    if (this.#ending) return;
    const reader = this.#readers.shift();
    if (reader !== undefined) {
      reader({ value: event, done: false });
      return;
    }
    if (this.#queue.length >= this.#max) {
      this.#queue.shift();
      this.#dropped++;
    }
    this.#queue.push(event);
  }

  /** The source is done (the messenger closed): queued events are still read. */
  end(): void {
    this.#stop();
    for (const r of this.#readers.splice(0)) r({ value: undefined, done: true });
  }

  #stop(): void {
    this.#ending = true;
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#signal?.removeEventListener('abort', this.#onAbort);
  }

  next(): Promise<IteratorResult<PeerEvent>> {
    if (this.#dropped > 0) {
      // The dropped events were the oldest: the gap is before everything still queued.
      const value: PeerEventsOverflow = { type: 'overflow', dropped: this.#dropped };
      this.#dropped = 0;
      return Promise.resolve({ value, done: false });
    }
    const event = this.#queue.shift();
    if (event !== undefined) return Promise.resolve({ value: event, done: false });
    if (this.#ending) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.#readers.push(resolve));
  }

  /** Stop reading: the queue is dropped and the iteration ends (also what `break` in `for await` calls). */
  return(): Promise<IteratorResult<PeerEvent>> {
    this.#queue.length = 0;
    this.#dropped = 0;
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<PeerEvent> {
    return this;
  }
}
