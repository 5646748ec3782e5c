/**
 * The pull side both anchor kinds share (`StreamAnchor`, `MpscAnchor`): `next()`, `takeAvailable()`,
 * one `for await` loop at a time, `readable`, and the one-reader rule between them. A subclass says
 * how to advance ({@link AnchorReader.step}), what it advanced to ({@link AnchorReader.take}) and
 * when to look again ({@link AnchorReader.waitAvailable}); the fast path of a read is one `step()`
 * and at most one settled promise, never an async function per value.
 */
import { defineAsyncDispose } from '../runtime/dispose.ts';
import { StreamError } from './errors.ts';

/** `step()` found a value (left for `take()`). */
export const STEP_VALUE = 0;
/** `step()` found nothing now: wait with `waitAvailable()`. */
export const STEP_NONE = 1;
/** `step()` found the end. */
export const STEP_DONE = 2;

export const DONE: IteratorResult<never> = Object.freeze({ done: true, value: undefined });

/** A read while a push-mode reader (`consume()`) holds the anchor. */
export const readerActive = (): StreamError =>
  new StreamError('ERR_READER_ACTIVE', 'the anchor is read in push mode (consume()); an anchor has one reader');

export abstract class AnchorReader<E> implements AsyncIterableIterator<E> {
  static {
    // `await using anchor = …` where the runtime has explicit resource management.
    defineAsyncDispose(AnchorReader.prototype);
  }

  /** The iterator of the `for await` loop reading the anchor, until that loop ends. */
  #loop: AsyncIterableIterator<E> | null = null;
  /**
   * The value the last `step()` found follows a gap (a live stream dropped records before it):
   * `takeAvailable` returns with it last, so what the subclass says of the gap is about `out`'s last value.
   */
  protected stamped = false;
  #readable: ReadableStream<E> | null = null;
  /**
   * A read parked on an empty feed (see {@link armParked}): the subclass hands it the next value or
   * settles it when something else changes. One promise per value read, with no async function and
   * no second promise behind it (a `for await` loop over a stream that gets one token per pass waits
   * on every value).
   */
  // Typed loosely so that an anchor of T stays assignable to an anchor of unknown.
  #parkedResolve: ((r: unknown) => void) | null = null;
  #parkedReject: ((e: unknown) => void) | null = null;
  #parkedLoop: AsyncIterableIterator<E> | null = null;
  readonly #park = (resolve: (r: IteratorResult<E>) => void, reject: (e: unknown) => void): void => {
    this.#parkedResolve = resolve as (r: unknown) => void;
    this.#parkedReject = reject;
  };

  /**
   * Advance to the next value (left for {@link take}), the end, or "nothing now": one of
   * {@link STEP_VALUE}, {@link STEP_NONE}, {@link STEP_DONE}. Throws what ends (or interrupts) the read.
   */
  protected abstract step(): number;
  /** The value the last `step()` found. */
  protected abstract take(): E;
  /** Resolves when `takeAvailable` has something to return, or the anchor ended. */
  abstract waitAvailable(): Promise<void>;
  /** End the anchor from the consumer's side (idempotent). */
  abstract cancel(): void;
  /** What the one-reader error calls this anchor ("the anchor", "the MPSC anchor"). */
  protected abstract readonly readerNoun: string;

  /**
   * Arrange for {@link handParked} or {@link settleParked} to follow the next change of what
   * `step()` would find; false when the subclass cannot, and the read waits with `waitAvailable()`.
   * Called after `step()` found nothing.
   */
  protected armParked(): boolean {
    return false;
  }

  /** True while a read is parked (see {@link armParked}). */
  protected get readParked(): boolean {
    return this.#parkedResolve !== null;
  }

  /** Give the parked read `value`, the next value in order (the subclass counted it as read). */
  protected handParked(value: E): void {
    const resolve = this.#parkedResolve!;
    this.#unpark();
    resolve({ done: false, value });
  }

  /** Something changed under the parked read: settle it with what `step()` finds, or park it again. */
  protected settleParked(): void {
    const resolve = this.#parkedResolve;
    if (resolve === null) return;
    const reject = this.#parkedReject!;
    const loop = this.#parkedLoop;
    let r: number;
    try {
      r = this.step();
    } catch (e) {
      this.#unpark();
      this.#release(loop);
      reject(e);
      return;
    }
    if (r === STEP_NONE && this.armParked()) return;
    this.#unpark();
    if (r === STEP_VALUE) resolve({ done: false, value: this.take() });
    else if (r === STEP_DONE) {
      this.#release(loop);
      resolve(DONE);
    } else resolve(this.#nextSlow(loop));
  }

  /**
   * Another reader took the anchor (push mode): the parked read is refused with `error()`, made only
   * then (an error's stack trace costs microseconds, and most anchors have no read parked).
   */
  protected refuseParked(error: () => StreamError): void {
    const reject = this.#parkedReject;
    if (reject === null) return;
    const loop = this.#parkedLoop;
    this.#unpark();
    this.#release(loop);
    reject(error());
  }

  #parkHere(loop: AsyncIterableIterator<E> | null): Promise<IteratorResult<E>> {
    const p = new Promise<IteratorResult<E>>(this.#park);
    this.#parkedLoop = loop;
    return p;
  }

  #unpark(): void {
    this.#parkedResolve = null;
    this.#parkedReject = null;
    this.#parkedLoop = null;
  }

  /** True while a push-mode reader holds the anchor (only `StreamAnchor` has one). */
  protected pushReader(): boolean {
    return false;
  }

  /** True while a `for await` loop reads the anchor. */
  protected get looping(): boolean {
    return this.#loop !== null;
  }

  /** A second reader while a `for await` loop (or an iterator from `[Symbol.asyncIterator]()`) reads the anchor. */
  protected loopActive(): StreamError {
    return new StreamError(
      'ERR_READER_ACTIVE',
      `${this.readerNoun} is already read by a for-await loop; an anchor has one reader: read it in that loop, or let it finish or break out of it first`,
    );
  }

  /** The next value; rejects `ERR_READER_ACTIVE` while another reader holds the anchor. */
  next(): Promise<IteratorResult<E>> {
    if (this.pushReader()) return Promise.reject(readerActive());
    if (this.#loop !== null) return Promise.reject(this.loopActive());
    return this.#read(null);
  }

  /** One read, for `next()` (`loop` null) or a loop's iterator; a read that ends the loop (done, or it threw) frees the anchor. */
  #read(loop: AsyncIterableIterator<E> | null): Promise<IteratorResult<E>> {
    // Fast path: a value already buffered costs one settled promise, not an async function.
    let r: number;
    try {
      r = this.step();
    } catch (e) {
      this.#release(loop);
      return Promise.reject(e);
    }
    if (r === STEP_VALUE) return Promise.resolve({ done: false, value: this.take() });
    if (r === STEP_DONE) {
      this.#release(loop);
      return Promise.resolve(DONE);
    }
    // A second read while one is parked (two next() calls at once) waits the general way.
    if (this.#parkedResolve === null && this.armParked()) return this.#parkHere(loop);
    return this.#nextSlow(loop);
  }

  async #nextSlow(loop: AsyncIterableIterator<E> | null): Promise<IteratorResult<E>> {
    try {
      for (;;) {
        await this.waitAvailable();
        // consume() started while this read was parked: the anchor has one reader.
        if (this.pushReader()) throw readerActive();
        const r = this.step();
        if (r === STEP_VALUE) return { done: false, value: this.take() };
        if (r === STEP_DONE) {
          this.#release(loop);
          return DONE;
        }
        // A feed arrived (the read began before any sender attached): park on it from now on.
        if (this.#parkedResolve === null && this.armParked()) return this.#parkHere(loop);
      }
    } catch (e) {
      this.#release(loop);
      throw e;
    }
  }

  /**
   * A loop's read ended it: `for await` stops on done and on a rejection (it does not call
   * `return()` then), so the anchor is free for the next reader. The same iterator may read on
   * (past a `SenderError`) while nobody else has taken the anchor.
   */
  #release(loop: AsyncIterableIterator<E> | null): void {
    if (loop !== null && this.#loop === loop) this.#loop = null;
  }

  /**
   * Synchronous read for hot consumers: move up to `max` values that are already buffered into
   * `out`, creating no promise, and return how many. 0 means nothing is here now (see
   * {@link waitAvailable}) or the anchor ended (see `finished`). Throws as `next()` does; the
   * values taken before the error stay in `out`.
   */
  takeAvailable(out: E[], max = Number.POSITIVE_INFINITY): number {
    if (this.pushReader()) throw readerActive();
    if (this.#loop !== null) throw this.loopActive();
    let n = 0;
    while (n < max && this.step() === STEP_VALUE) {
      out.push(this.take());
      n++;
      if (this.stamped) break;
    }
    return n;
  }

  /** Ends iteration early: the same as {@link cancel}. */
  async return(): Promise<IteratorResult<E>> {
    this.cancel();
    return DONE;
  }

  /**
   * The iterator of one `for await` loop. An anchor has one reader: while a loop reads it, a second
   * loop (this call), `next()`, `takeAvailable()` and `consume()` fail with `ERR_READER_ACTIVE`
   * instead of splitting the values between them. A loop that finished (done, or a read threw)
   * frees the anchor for the next one; breaking out of a loop cancels the anchor (`return()`),
   * which also frees it.
   */
  [Symbol.asyncIterator](): AsyncIterableIterator<E> {
    if (this.pushReader()) throw readerActive();
    if (this.#loop !== null) throw this.loopActive();
    const loop: AsyncIterableIterator<E> = {
      next: () => {
        if (this.#loop !== loop) {
          // This loop ended earlier: it may read on only if nobody else reads the anchor now.
          if (this.#loop !== null) return Promise.reject(this.loopActive());
          if (this.pushReader()) return Promise.reject(readerActive());
          this.#loop = loop;
        }
        return this.#read(loop);
      },
      return: async () => {
        // A loop that already ended does not cancel the anchor another reader now owns.
        if (this.#loop !== loop && (this.#loop !== null || this.pushReader())) return DONE;
        this.#release(loop);
        this.cancel();
        return DONE;
      },
      [Symbol.asyncIterator]: () => loop,
    };
    this.#loop = loop;
    return loop;
  }

  /** Close the anchor (alias of {@link cancel}). `[Symbol.asyncDispose]` calls it where the runtime has it. */
  async close(): Promise<void> {
    this.cancel();
  }

  /**
   * The values as a WHATWG `ReadableStream`. Its high-water mark is 0, so nothing is read ahead of
   * the consumer (back-pressure is the senders' credit). Errors as `next()` does. Cancelling it
   * cancels the anchor.
   */
  get readable(): ReadableStream<E> {
    this.#readable ??= new ReadableStream<E>(
      {
        pull: async (controller) => {
          const r = await this.next();
          if (r.done) controller.close();
          else controller.enqueue(r.value);
        },
        cancel: () => this.cancel(),
      },
      { highWaterMark: 0 },
    );
    return this.#readable;
  }
}
