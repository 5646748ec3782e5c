/**
 * `StreamSender<T>`: the producer's end of a stream (docs/protocol.md §8, §10.8).
 * `send` resolves at once (a shared, already-resolved promise) while the stream has room; it
 * returns a real promise only when it must wait for credit or for the slot to drain.
 */
import type { LanemuxError } from '../errors.ts';
import type { Retirement } from '../mux/egress-slot.ts';
import { FrameKind } from '../wire/frame.ts';
import { itemRefusal } from '../wire/item.ts';
import { dropStagedItem, stageItem } from '../wire/plain-item.ts';
import { StreamError } from './errors.ts';
import { FEED_OVERRUN_PREFIX, LiveFeed, OVERRUN, type LiveFeedHost, type LiveFeedOptions } from './live-feed.ts';
import { Offer } from './port.ts';
import type { SenderPort } from './port.ts';

const RESOLVED: Promise<void> = Promise.resolve();

/** Options of {@link StreamSender} construction (internal). */
export interface SenderInit {
  /** The settled transport key, or null for a same-worker attach. */
  readonly transport: string | null;
  /** Aborting this signal departs the stream (PeerGone/Dropped to the consumer). */
  readonly signal?: AbortSignal | undefined;
  /** Called once the sender is done (terminal handed over, closed or aborted). */
  readonly onDone?: (() => void) | undefined;
  /**
   * Called once `detach()` handed its Detached over: tells the consumer, and `detach()` resolves
   * with what it returns (a remote consumer's acknowledgement; nothing to wait for on the same worker).
   */
  readonly onDetach?: (() => Promise<void> | void) | undefined;
}

/**
 * @internal Told of a consumer stop and of a cancel (or the stream's loss) as the two signals
 * would be, without making them (a relay watches its target this way).
 */
export interface SenderWatcher {
  senderStopped(reason: unknown): void;
  senderCancelled(reason: unknown): void;
}

/** Marks a signal not aborted yet (a reason may be any value, `undefined` included). */
const NOT_ABORTED: unique symbol = Symbol('not aborted');

/** The producer's end of a stream. */
export class StreamSender<T = unknown> {
  #port: SenderPort | null = null;
  #error: LanemuxError | null = null;
  #terminal = false;
  /** A live stream's queue (`overrun: 'drop-oldest' | 'fail'`); null for the default `'block'`. */
  #feed: LiveFeed | null = null;
  #retirement: Retirement | null = null;
  /** Made on the first `retired()` call (most producers never ask). */
  #retiredWaiters: Array<(r: Retirement) => void> | null = null;
  // The two signals are made on first use: most producers never look at them, and two
  // AbortControllers per stream were a measurable share of a stream's open/close cost.
  #stop: AbortController | null = null;
  #cancel: AbortController | null = null;
  #stopReason: unknown = NOT_ABORTED;
  #cancelReason: unknown = NOT_ABORTED;
  readonly #transport: string | null;
  readonly #onDone: (() => void) | undefined;
  readonly #onDetach: (() => Promise<void> | void) | undefined;
  #abortListener: (() => void) | null = null;
  #signal: AbortSignal | undefined;
  #finished = false;
  #watcher: SenderWatcher | null = null;
  /** A live stream's terminal queued behind its waiting records: settles when handed on. */
  #queuedEnd: Promise<void> | null = null;

  /** @internal */
  constructor(init: SenderInit) {
    this.#transport = init.transport;
    this.#onDone = init.onDone;
    this.#onDetach = init.onDetach;
    this.#signal = init.signal;
  }

  /** @internal Bind the sender to where its frames go. */
  _bind(port: SenderPort): void {
    this.#port = port;
    const signal = this.#signal;
    if (signal) {
      if (signal.aborted) this.#abort();
      else {
        this.#abortListener = () => this.#abort();
        signal.addEventListener('abort', this.#abortListener, { once: true });
      }
    }
  }

  /**
   * The stream's resume token, when this node keeps history (`createNode({ resume: { history } })`)
   * and the stream resumes (a mux stream between two nodes with resume on); null otherwise. Give it to
   * the consumer (for example in the answer to its request): a new node — a reloaded page — passes it
   * to `node.reattach` with how many items it has, and the stream goes on there (docs/protocol.md §8.5).
   * Unguessable (128 random bits); it names this stream only, until the stream's history is gone.
   */
  get resumeToken(): string | null {
    return this._resumeToken;
  }

  /** @internal */
  _resumeToken: string | null = null;
  /** @internal Make this a live stream (before the application gets the sender): see `AttachOptions.overrun`. */
  _live(options: LiveFeedOptions, host: LiveFeedHost): void {
    if (this.#port !== null) this.#feed = new LiveFeed(options, this.#port, host);
  }

  /**
   * Records this stream dropped (`overrun: 'drop-oldest'`) or refused (`'fail'`) because its
   * consumer's credit lagged the source. Always 0 with the default `'block'`.
   */
  get overruns(): number {
    return this.#feed?.overruns ?? 0;
  }

  /** The transport key the attach settled on (`messenger-mux-v2`, `tcp-stream`), or null for a same-worker attach. */
  get negotiatedTransport(): string | null {
    return this.#transport;
  }

  /** Fires when the consumer asks the producer to stop (it may still send final output and finalize). */
  get stopSignal(): AbortSignal {
    if (this.#stop === null) {
      this.#stop = new AbortController();
      if (this.#stopReason !== NOT_ABORTED) this.#stop.abort(this.#stopReason);
    }
    return this.#stop.signal;
  }

  /** Fires when the consumer cancels or the stream is lost: further sends fail. */
  get cancelSignal(): AbortSignal {
    if (this.#cancel === null) {
      this.#cancel = new AbortController();
      if (this.#cancelReason !== NOT_ABORTED) this.#cancel.abort(this.#cancelReason);
    }
    return this.#cancel.signal;
  }

  #abortStop(reason: unknown): void {
    if (this.#stopReason !== NOT_ABORTED) return;
    this.#stopReason = reason;
    this.#stop?.abort(reason);
    this.#watcher?.senderStopped(reason);
  }

  #abortCancel(reason: unknown): void {
    if (this.#cancelReason !== NOT_ABORTED) return;
    this.#cancelReason = reason;
    this.#cancel?.abort(reason);
    this.#watcher?.senderCancelled(reason);
  }

  /**
   * @internal Watch for a stop and a cancel; one that already happened is reported at once (stop
   * first). `null` stops watching.
   */
  _watch(watcher: SenderWatcher | null): void {
    this.#watcher = watcher;
    if (watcher === null) return;
    if (this.#stopReason !== NOT_ABORTED) watcher.senderStopped(this.#stopReason);
    if (this.#cancelReason !== NOT_ABORTED && this.#watcher === watcher) watcher.senderCancelled(this.#cancelReason);
  }

  /**
   * @internal Data records the stream passes on now without withholding any (credit, room, a live
   * link); 0 while it must wait or is closed.
   */
  get _room(): number {
    const port = this.#port;
    return port === null || this.closed ? 0 : port.room;
  }

  /** @internal Call `fn` once `_room` may have grown or the stream closed (one callback; a later call replaces it). */
  _notifyRoom(fn: () => void): void {
    this.#port?.notifyRoom(fn);
  }

  /** @internal Records handed over and still waiting on this node (for credit, room or the link). */
  get _withheld(): number {
    return this.#port?.withheld ?? 0;
  }

  /** True once the stream can take no more frames. */
  get closed(): boolean {
    return this.#terminal || this.#error !== null || this.#port?.closeError != null;
  }

  #closedError(): LanemuxError {
    if (this.#error !== null) return this.#error;
    const e = this.#port?.closeError;
    // A slot that sent its terminal closes with the mux's own marker: the producer is told the one
    // documented code, whichever path (mux, per-stream, same worker) carried the stream.
    if (e != null && e.code !== 'ERR_STREAM_ENDED') return e;
    return new StreamError('ERR_STREAM_CLOSED', 'the stream already sent its terminal');
  }

  #offer(kind: number, value: unknown): Promise<void> {
    const port = this.#port;
    if (port === null || this.closed) return Promise.reject(this.#closedError());
    if (this.#feed !== null) return this.#liveOffer(this.#feed, kind, value);
    const r = port.offer(kind, value);
    if (r === Offer.Ok) return RESOLVED;
    if (r === Offer.Wait) return port.waitWritable();
    if (r === Offer.Refused) {
      return Promise.reject(
        new StreamError(
          'ERR_BACKPRESSURE',
          'the stream is at its byte budget and send() was called again without waiting: await send()',
          { retryable: true },
        ),
      );
    }
    return Promise.reject(this.#closedError());
  }

  /** A live stream's record: taken (resolved at once), or the stream is closed or just overran. */
  #liveOffer(feed: LiveFeed, kind: number, value: unknown): Promise<void> {
    const r = feed.offer(kind, value);
    if (r === Offer.Ok) return RESOLVED;
    return Promise.reject(r === OVERRUN ? this.#overran(feed) : this.#closedError());
  }

  /** A `'fail'` live stream overran: it ends with ERR_FEED_OVERRUN, and its consumer is told so. */
  #overran(feed: LiveFeed): StreamError {
    const e = new StreamError(
      'ERR_FEED_OVERRUN',
      `the live stream overran: ${feed.limit} records (overrunLimit) waited for the consumer's credit and another was sent (overrun: 'fail')`,
    );
    this.#error = e;
    feed.close(e);
    this.#port?.offer(FrameKind.TransportError, `${FEED_OVERRUN_PREFIX}${e.message}`);
    this.#abortCancel(e);
    this.#done();
    return e;
  }

  /**
   * Send one item. Resolves when the stream can take the next one: at once while there is room,
   * later when the slot is at its byte budget. Rejects if the stream closed (consumer cancelled,
   * peer gone, terminal already sent) or the attach signal aborted, and with `ERR_INVALID_ITEM`
   * (nothing sent, the stream goes on) for a value that would not arrive as sent: a `Map`, a `Set`, a
   * class instance, a function, a symbol, a `bigint` beyond 64 bits… (docs/items.md lists what does).
   * A `Uint8Array` must not be modified after `send()` (as with Node's `stream.write`): it is sent
   * as is, later, and kept for a resume (docs/protocol.md §8.3).
   */
  send(item: T): Promise<void> {
    // Strings and bytes (the token path) need no check.
    if (typeof item === 'string' || item instanceof Uint8Array) return this.#offer(FrameKind.Item, item);
    return this.#sendValue(item);
  }

  /** `send` of any other value: a plain value's body is written here, which is its check too (the port takes it). */
  #sendValue(item: T): Promise<void> {
    if (!stageItem(item)) {
      const refused = itemRefusal(item);
      if (refused !== undefined) return Promise.reject(refused);
    }
    try {
      return this.#offer(FrameKind.Item, item);
    } finally {
      dropStagedItem();
    }
  }

  /**
   * Send one item without waiting: false (and nothing sent) when the stream must wait or is
   * closed. No promise is created. Throws `ERR_INVALID_ITEM` for a value `send` would refuse
   * (false would read as "wait and retry").
   */
  trySend(item: T): boolean {
    if (typeof item !== 'string' && !(item instanceof Uint8Array)) {
      const refused = itemRefusal(item);
      if (refused !== undefined) throw refused;
    }
    const port = this.#port;
    if (port === null || this.closed) return false;
    if (this.#feed !== null) {
      const r = this.#feed.offer(FrameKind.Item, item);
      if (r === OVERRUN) this.#overran(this.#feed);
      return r === Offer.Ok;
    }
    if (port.paused) return false;
    const r = port.offer(FrameKind.Item, item);
    return r === Offer.Ok || r === Offer.Wait;
  }

  /** Report an error to the consumer (`SenderError`): not terminal, and it spends credit like an item. */
  error(message: string): Promise<void> {
    return this.#offer(FrameKind.SenderError, message);
  }

  /** @internal A heartbeat: dropped (not sent) when the stream must wait. */
  _heartbeat(): void {
    const port = this.#port;
    // A live stream's waiting records go first (a heartbeat would spend their credit).
    if (port !== null && !this.closed && !port.paused && (this.#feed === null || this.#feed.queued === 0))
      port.offer(FrameKind.Heartbeat, undefined);
  }

  /** End the stream normally. Never blocks the caller: resolves once the terminal is handed over. */
  finalize(): Promise<void> {
    return this.#end(FrameKind.Finalized);
  }

  /**
   * Leave the stream without ending it (`Detached`): the anchor may be attached again. Resolves once
   * the consumer's node has acknowledged the detach (at once on the same worker), so an
   * `attachAnchor` made after `await detach()` is accepted whether or not the consumer has read
   * this far: it reads this sender's items, then the next sender's. If no acknowledgement comes
   * (peer gone, a consumer that does not send one, 10 s), it resolves anyway: the Detached itself
   * was handed over, and an attach before the consumer reads it may then be refused.
   */
  detach(): Promise<void> {
    const p = this.#end(FrameKind.Detached);
    const ack = this.#onDetach;
    // A live stream's Detached may wait behind its records: the consumer is told once it is handed on.
    if (p === this.#queuedEnd && ack !== undefined) return p.then(() => ack());
    // #end gives the shared RESOLVED exactly when the terminal was taken.
    if (p !== RESOLVED || ack === undefined) return p;
    return ack() ?? RESOLVED;
  }

  #end(kind: number): Promise<void> {
    const port = this.#port;
    if (port === null || this.closed) return Promise.reject(this.#closedError());
    const queued = this.#feed?.endAfter(kind) ?? null;
    if (queued !== null) {
      // Behind a live stream's waiting records; finalize() does not wait for them.
      this.#terminal = true;
      this.#done();
      queued.catch(() => {});
      if (kind !== FrameKind.Detached) return RESOLVED;
      this.#queuedEnd = queued;
      return queued;
    }
    // The terminal is always taken (a full inlet overshoots by one record), so this never waits.
    const r = port.offer(kind, undefined);
    this.#terminal = true;
    this.#done();
    return r === Offer.Closed ? Promise.reject(this.#closedError()) : RESOLVED;
  }

  /**
   * Resolves when this node has handed on all of the stream's output (`Sent`) or lost it
   * (`Discarded`). The first outcome stands.
   */
  retired(): Promise<Retirement> {
    if (this.#retirement !== null) return Promise.resolve(this.#retirement);
    return new Promise((resolve) => (this.#retiredWaiters ??= []).push(resolve));
  }

  /** @internal */
  _retire(outcome: Retirement): void {
    if (this.#retirement !== null) return;
    this.#retirement = outcome;
    const w = this.#retiredWaiters;
    if (w === null) return;
    this.#retiredWaiters = null;
    for (const f of w) f(outcome);
  }

  /** @internal The stream closed under the producer (null after a clean terminal). */
  _closed(error: LanemuxError | null): void {
    if (error !== null && this.#error === null && !this.#terminal) {
      this.#error = error;
      this.#abortCancel(error);
      this.#abortStop(error);
    }
    // What a live stream still held is lost with the stream (its producer is told by the close).
    if (error !== null) this.#feed?.close(error);
    this.#done();
  }

  /** @internal A consumer stop or cancel arrived. */
  _lifecycle(cancel: boolean): void {
    if (this.#stopReason === NOT_ABORTED)
      this.#abortStop(new StreamError('ERR_STREAM_CANCELLED', 'the consumer asked the producer to stop'));
    if (cancel && this.#cancelReason === NOT_ABORTED) {
      const e = new StreamError('ERR_STREAM_CANCELLED', 'the consumer cancelled the stream');
      if (this.#error === null) this.#error = e;
      this.#feed?.close(e);
      this.#abortCancel(e);
    }
  }

  /** @internal The node ends the stream (a drain's deadline): it departs (Dropped for the consumer) and fails with `error`. */
  _depart(error: LanemuxError): void {
    if (this.closed) return;
    this.#error = error;
    this.#port?.depart();
    this.#abortCancel(error);
    this.#abortStop(error);
    this.#done();
  }

  #abort(): void {
    if (this.closed) return;
    this.#error = new StreamError('ERR_ABORTED', 'the sender was aborted by its signal', {
      cause: this.#signal?.reason,
    });
    this.#feed?.close(this.#error);
    this.#port?.depart();
    this.#abortCancel(this.#error);
    this.#done();
  }

  #done(): void {
    if (this.#finished) return;
    this.#finished = true;
    if (this.#abortListener && this.#signal) {
      this.#signal.removeEventListener('abort', this.#abortListener);
      this.#abortListener = null;
    }
    this.#onDone?.();
  }
}
