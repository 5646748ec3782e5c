/**
 * `node.stream(peer, method, request)`: the client half of a call (docs/protocol.md §8.6). It makes
 * the anchor and its zero-RTT ticket here and sends both inside the one request, so the server opens
 * the stream from the ticket and its first items need no second round trip. The returned
 * {@link CallStream} reads the anchor; a refusal (the request's error reply) or the handler's failure
 * record ends it with a typed error.
 */
import { LanemuxError, isLanemuxError } from '../errors.ts';
import { RemoteError } from '../messenger/errors.ts';
import type { Messenger, PeerId } from '../messenger/types.ts';
import { encodeOwned } from '../wire/msgpack.ts';
import type { StreamAnchor } from './anchor.ts';
import { CALL_PREFIX, CALL_VERSION, CallError, decodeFailure } from './call-envelope.ts';
import type { ConsumerSide } from './consumer.ts';
import { StreamError } from './errors.ts';

/** Options of `node.stream`. */
export interface CallOptions {
  /** Aborting it cancels the call: the server's handler signal aborts, reads reject `ERR_ABORTED`. */
  readonly signal?: AbortSignal;
  /** How long the server may take to accept the call (open its stream), 1..3,600,000 ms. Defaults to 10,000. */
  readonly timeoutMs?: number;
}

/** What a call needs from its node: the consumer side (`prebindAnchor` is undefined without a mux: the server then attaches). */
export type AnchorMaker = Pick<ConsumerSide, 'createAnchor' | 'prebindAnchor'>;

const DONE: IteratorResult<never> = Object.freeze({ done: true, value: undefined });

/**
 * The answer of a call: an async iterable of its items (one reader), or `.readable` as a WHATWG
 * `ReadableStream`. Reads reject with the stream's errors (`StreamError`: `ERR_SENDER_DROPPED`, …),
 * with a `CallError` when the server refused the call (`ERR_UNKNOWN_METHOD`, `ERR_CALL_LIMIT`,
 * `ERR_REQUEST_TOO_LARGE`, `ERR_INVALID_REQUEST`, or the code of the refusal it sent) or its handler
 * threw, and with the request's own error when it never got through (`ERR_UNKNOWN_PEER`, `ERR_TIMEOUT`, …).
 */
export class CallStream<T = unknown> implements AsyncIterableIterator<T> {
  /** The method called. */
  readonly method: string;
  readonly #anchor: StreamAnchor<T> | null;
  #error: LanemuxError | null;
  #readable: ReadableStream<T> | null = null;
  /** The fast path's one-item buffer for `takeAvailable`, reused so a read allocates no array. */
  readonly #one: T[] = [];
  #signal: AbortSignal | undefined;
  readonly #onAbort = (): void =>
    this._fail(new StreamError('ERR_ABORTED', `call "${this.method}" aborted`, { cause: this.#signal?.reason }));
  readonly #value = (r: IteratorResult<T>): IteratorResult<T> => {
    if (r.done) {
      this.#unlisten();
      if (this.#error !== null) throw this.#error;
    }
    return r;
  };
  readonly #thrown = (e: unknown): never => {
    throw this.#map(e);
  };

  /** @internal Use `node.stream`. */
  constructor(anchor: StreamAnchor<T> | null, method: string, error: LanemuxError | null) {
    this.#anchor = anchor;
    this.method = method;
    this.#error = error;
  }

  /** The next item; rejects as described on the class. */
  next(): Promise<IteratorResult<T>> {
    if (this.#error !== null) return Promise.reject(this.#error);
    const anchor = this.#anchor!;
    // Fast path: a buffered item is one settled promise, as on the anchor itself, with no `.then`
    // per item. The call is the anchor's only reader, so the synchronous take cannot meet another.
    const one = this.#one;
    let n: number;
    try {
      n = anchor.takeAvailable(one, 1);
    } catch (e) {
      one.length = 0;
      return Promise.reject(this.#map(e));
    }
    if (n === 1) {
      const value = one[0] as T;
      one.length = 0;
      return Promise.resolve({ done: false, value });
    }
    // Nothing here now, or the end: the end may carry the call's error, so it goes through `#value`.
    return anchor.next().then(this.#value, this.#thrown);
  }

  /** Ends iteration early: the same as {@link cancel}. */
  async return(): Promise<IteratorResult<T>> {
    this.cancel();
    return DONE;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  /** Cancel the call: the server's handler signal aborts, unread items are dropped, iteration ends. Idempotent. */
  cancel(): void {
    this.#anchor?.cancel();
    this.#unlisten();
  }

  /** The items as a WHATWG `ReadableStream` (high-water mark 0: back-pressure is the stream's credit). Cancelling it cancels the call. */
  get readable(): ReadableStream<T> {
    this.#readable ??= new ReadableStream<T>(
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

  /** @internal End the call with `error` unless it already ended. */
  _fail(error: LanemuxError): void {
    if (this.#error !== null || this.#anchor === null || this.#anchor.finished) return;
    this.#error = error;
    this.#anchor.cancel();
    this.#unlisten();
  }

  /** @internal The request's reply was an error: refused, or it never got through. */
  _refused(e: unknown, peer: PeerId): void {
    const m = this.method;
    let error: LanemuxError;
    if (e instanceof RemoteError) {
      const unknown = e.code === 'ERR_UNKNOWN_HANDLER';
      error = new CallError(
        unknown ? 'ERR_UNKNOWN_METHOD' : e.code,
        m,
        unknown ? `peer ${peer} serves no method "${m}"` : e.message,
        { retryable: e.retryable, cause: e },
      );
    } else if (isLanemuxError(e, 'ERR_FRAME_TOO_LARGE')) {
      error = new CallError('ERR_REQUEST_TOO_LARGE', m, `the request to "${m}" is too large: ${e.message}`, {
        cause: e,
      });
    } else {
      // A lost reply does not end a stream that opened (it may resume); one that never did ends here.
      if (this.#anchor?.feedKind !== 'none') return;
      error = e instanceof LanemuxError ? e : new CallError('ERR_INVALID_REQUEST', m, String(e), { cause: e });
    }
    this._fail(error);
  }

  /** @internal */
  _listen(signal: AbortSignal): void {
    this.#signal = signal;
    if (signal.aborted) this.#onAbort();
    else signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  #unlisten(): void {
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#signal = undefined;
  }

  /** A read's error: the handler's failure record becomes the call's error. */
  #map(e: unknown): unknown {
    if (this.#error !== null) return this.#error;
    if (isLanemuxError(e, 'ERR_SENDER_ERROR')) {
      const failure = decodeFailure(e.message, this.method);
      if (failure === null) return e;
      this._fail(failure);
      return failure;
    }
    this.#unlisten();
    return e;
  }
}

/** Start a call (see `LanemuxNode.stream`). Never throws: every failure ends the returned stream. */
export function startCall<T>(
  messenger: Messenger,
  host: AnchorMaker,
  peer: PeerId,
  method: string,
  request: unknown,
  options: CallOptions = {},
): CallStream<T> {
  let anchor: StreamAnchor<T>;
  try {
    anchor = host.createAnchor<T>();
  } catch (e) {
    return new CallStream<T>(null, method, e instanceof LanemuxError ? e : new StreamError('ERR_CLOSED', String(e)));
  }
  const call = new CallStream<T>(anchor, method, null);
  let r: Uint8Array;
  try {
    r = encodeOwned(request);
  } catch (cause) {
    call._fail(new CallError('ERR_INVALID_REQUEST', method, `the request cannot be encoded as MessagePack`, { cause }));
    return call;
  }
  if (options.signal !== undefined) call._listen(options.signal);
  const t = host.prebindAnchor(anchor as StreamAnchor<unknown>);
  const body = t === undefined ? { v: CALL_VERSION, h: anchor.handle, r } : { v: CALL_VERSION, h: anchor.handle, t, r };
  messenger
    .request(peer, CALL_PREFIX + method, body, options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs })
    .then(undefined, (e: unknown) => call._refused(e, peer));
  return call;
}
