/**
 * The page's end of one stream: what `client.stream(…)` returns and what `client.anchor()` makes.
 * Records the ingress kept wait here, in arrival order, until the page takes them; taking one is what
 * returns its credit (the ingress is told through {@link StreamHost.taken}), so a page that stops
 * reading stops its producer and nothing grows.
 *
 * Reading: `for await`, `next()`, or `readable` (a WHATWG `ReadableStream`). A producer's
 * `sender.error(message)` rejects one `next()` with `ERR_SENDER_ERROR` and the stream goes on; a
 * call's handler failure ends it with a `CallError`; a producer that went away ends it with
 * `ERR_SENDER_DROPPED` (retryable) unless the stream resumed (docs/protocol.md §8.3).
 */
import type { LanemuxError } from '../errors.ts';
import { decodeFailure } from '../stream/call-envelope.ts';
import { StreamError } from '../stream/errors.ts';
import type { Bind } from './bind.ts';

/** What a stream tells the ingress that feeds it. */
export interface StreamHost {
  /** A record of `bind` (its body `bytes` long) was taken: its credit and window bytes come back. */
  taken(bind: Bind, bytes: number): void;
  /** The page cancelled (`action` 1) or asked the producer to stop (`action` 0). */
  signal(stream: ClientStream<unknown>, action: 0 | 1): void;
  /** The stream's end is queued: nothing more will arrive for it. */
  ended(stream: ClientStream<unknown>): void;
}

/** Kinds of the entries a stream holds. */
export const Entry = { Item: 0, SenderError: 1, End: 2 } as const;

/** A read waiting for the next record. */
interface Waiter<T> {
  resolve(r: IteratorResult<T>): void;
  reject(e: unknown): void;
}

/**
 * One stream as the page reads it: an async iterator of its items.
 *
 * @typeParam T - the item type the page expects (not checked: items are what the producer sent).
 */
export class ClientStream<T = unknown> implements AsyncIterableIterator<T> {
  /** The anchor's handle (`lmx1.…`): give it to a producer that attaches. */
  readonly handle: string;
  /** @internal The anchor's local id. */
  readonly anchorId: bigint;
  /** The method called, for a stream made by `client.stream`; undefined for an anchor. */
  readonly method: string | undefined;
  /** @internal The bind that feeds it now (null before the first attach or ticket). */
  bind: Bind | null = null;
  /** @internal Items (and sender errors) that reached the stream, read or not: the resume offset. */
  received = 0;
  /** @internal True once the end is queued (no record is accepted after it). */
  ended = false;
  /** @internal True once the page cancelled. */
  cancelled = false;
  /** Gap markers a live producer sent: records it dropped rather than wait for this reader (docs/protocol.md §10.9). */
  gaps = 0;

  readonly #host: StreamHost;
  #values: unknown[] = [];
  #kinds: number[] = [];
  #binds: Bind[] = [];
  #sizes: number[] = [];
  #head = 0;
  /** The error the stream ended with, once the end was read (null: ended cleanly). */
  #done: { error: LanemuxError | null } | null = null;
  #waiter: Waiter<T> | null = null;
  #readable: ReadableStream<T> | undefined;

  /** @internal Made by the client. */
  constructor(host: StreamHost, handle: string, anchorId: bigint, method?: string) {
    this.#host = host;
    this.handle = handle;
    this.anchorId = anchorId;
    this.method = method;
  }

  /** Records waiting to be read. */
  get buffered(): number {
    return this.#kinds.length - this.#head;
  }

  /** True once the end was read, or the page cancelled. */
  get finished(): boolean {
    return this.#done !== null;
  }

  /** @internal Queue a record of `bind` (`kind` an {@link Entry}, `bytes` its body length). */
  push(bind: Bind | null, kind: number, value: unknown, bytes: number): void {
    if (this.ended) return;
    if (kind === Entry.SenderError && this.method !== undefined && typeof value === 'string') {
      // A call's handler failure is its last word: the Finalized that follows adds nothing.
      const failure = decodeFailure(value, this.method);
      if (failure !== null) {
        kind = Entry.End;
        value = failure;
      }
    }
    if (kind !== Entry.End) this.received++;
    else {
      this.ended = true;
      this.#host.ended(this as ClientStream<unknown>);
    }
    const w = this.#waiter;
    if (w !== null && this.#head === this.#kinds.length && kind !== Entry.SenderError) {
      // A reader waits on an empty queue: hand the record over without queueing it.
      this.#waiter = null;
      if (bind !== null) this.#host.taken(bind, bytes);
      this.#settle(w, kind, value);
      return;
    }
    this.#kinds.push(kind);
    this.#values.push(value);
    this.#binds.push(bind as Bind);
    this.#sizes.push(bytes);
    if (w !== null) {
      this.#waiter = null;
      this.#take(w);
    }
  }

  /** @internal End the stream after what it holds (`error` null: cleanly). */
  end(error: LanemuxError | null): void {
    this.push(null, Entry.End, error, 0);
  }

  /** Read the next item. Resolves `{ done: true }` after a clean end; rejects with the stream's error. */
  next(): Promise<IteratorResult<T>> {
    if (this.#waiter !== null) return Promise.reject(new StreamError('ERR_READER_ACTIVE', 'a read is already waiting'));
    return new Promise((resolve, reject) => {
      const w = { resolve, reject };
      if (this.#done !== null) this.#finish(w);
      else if (this.#head < this.#kinds.length) this.#take(w);
      else this.#waiter = w;
    });
  }

  /** Leaving a `for await` early cancels the stream. */
  return(): Promise<IteratorResult<T>> {
    this.cancel();
    return Promise.resolve({ done: true, value: undefined });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** The items as a `ReadableStream` (high-water mark 0: back-pressure is the stream's credit); cancelling it cancels the stream. */
  get readable(): ReadableStream<T> {
    this.#readable ??= new ReadableStream<T>(
      {
        pull: async (c) => {
          const r = await this.next();
          if (r.done === true) c.close();
          else c.enqueue(r.value);
        },
        cancel: () => this.cancel(),
      },
      { highWaterMark: 0 },
    );
    return this.#readable;
  }

  /**
   * Cancel: the producer is told (its sends fail `ERR_STREAM_CANCELLED`), what was not read is
   * dropped and a waiting read resolves `done` (or rejects with `error`, when given). Idempotent.
   */
  cancel(error?: LanemuxError): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.ended = true;
    this.#drop();
    this.#done ??= { error: error ?? null };
    const w = this.#waiter;
    this.#waiter = null;
    if (w !== null) this.#finish(w);
    this.#host.signal(this as ClientStream<unknown>, 1);
  }

  /** Ask the producer to finish (its `stopSignal` fires); the stream goes on until it does. */
  stop(): void {
    if (!this.ended) this.#host.signal(this as ClientStream<unknown>, 0);
  }

  /** @internal Drop what is queued from `bind` (its link is gone and will not resume), giving its window back. */
  #drop(): void {
    for (let i = this.#head; i < this.#kinds.length; i++) {
      const b = this.#binds[i];
      if (b !== undefined && b !== null) this.#host.taken(b, this.#sizes[i]!);
    }
    this.#values = [];
    this.#kinds = [];
    this.#binds = [];
    this.#sizes = [];
    this.#head = 0;
  }

  #take(w: Waiter<T>): void {
    const i = this.#head++;
    const kind = this.#kinds[i]!;
    const value = this.#values[i];
    const bind = this.#binds[i];
    this.#values[i] = undefined;
    if (this.#head === this.#kinds.length) {
      this.#values.length = this.#kinds.length = this.#binds.length = this.#sizes.length = 0;
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#kinds.length) {
      this.#values = this.#values.slice(this.#head);
      this.#kinds = this.#kinds.slice(this.#head);
      this.#binds = this.#binds.slice(this.#head);
      this.#sizes = this.#sizes.slice(this.#head);
      this.#head = 0;
    }
    if (bind !== undefined && bind !== null) this.#host.taken(bind, this.#sizes[i] ?? 0);
    this.#settle(w, kind, value);
  }

  #settle(w: Waiter<T>, kind: number, value: unknown): void {
    if (kind === Entry.Item) w.resolve({ done: false, value: value as T });
    else if (kind === Entry.SenderError) w.reject(new StreamError('ERR_SENDER_ERROR', String(value)));
    else {
      this.#done = { error: value as LanemuxError | null };
      this.#finish(w);
    }
  }

  #finish(w: Waiter<T>): void {
    const error = this.#done!.error;
    if (error === null) w.resolve({ done: true, value: undefined });
    else w.reject(error);
  }
}
