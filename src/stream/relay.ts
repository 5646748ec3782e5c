/**
 * `relay(source, target)`: one stream forwarded through a middle node (a frontend between a decode
 * engine and a browser) with end-to-end credit. The relay reads its source anchor in push mode and
 * takes a record only when the target sender passes it on at once (it has credit and withholds
 * nothing), so the browser's reading is what returns credit to the engine's slot: a slow browser
 * holds back its own stream at the engine, and the frontend holds at most the source's credit
 * window plus one record for it. No promise per record: the source's push reader is paused while
 * the target has no room and resumed by the target's slot when credit returns.
 *
 * Stop and cancel travel browser → engine (the target's consumer stops or cancels: the relay stops
 * or cancels the source); `Finalized` and `SenderError` travel engine → browser. A failure of either
 * hop ends the other: the source failing (engine gone, not resumed) departs the target, so the
 * browser reads `ERR_SENDER_DROPPED`; the target failing (browser gone) cancels the source, so the
 * engine's sender is cancelled.
 */
import type { LanemuxError } from '../errors.ts';
import type { AnchorConsumer, AnchorConsumption, StreamAnchor } from './anchor.ts';
import { StreamError } from './errors.ts';
import type { LanemuxNode } from './node.ts';
import type { SenderWatcher, StreamSender } from './sender.ts';

/** Options of {@link relay}. */
export interface RelayOptions {
  /**
   * Aborting it ends the relay as {@link Relay.cancel} does, `done` giving `ERR_ABORTED` (the
   * signal's reason as its cause). Defaults to none.
   */
  readonly signal?: AbortSignal;
}

/** Options of {@link openRelay}. */
export interface OpenRelayOptions extends RelayOptions {
  /**
   * The target anchor's zero-RTT ticket (`prebindAnchor` on its node): the target stream opens with
   * `openAnchorStream`, no attach round trip. Defaults to none: `attachAnchor`.
   */
  readonly ticket?: string;
  /** Timeout of the target's attach, ms. Defaults to 10,000 (as `attachAnchor`). */
  readonly timeoutMs?: number;
}

/** A running relay (see {@link relay}). */
export interface Relay<T = unknown> {
  /** Where the records come from: give its `handle` (or a ticket from `prebindAnchor`) to the producer. */
  readonly source: StreamAnchor<T>;
  /** Where they go. */
  readonly target: StreamSender<T>;
  /** Items and sender errors passed from the source to the target so far. */
  readonly relayed: number;
  /**
   * Records this node holds for the stream now: read from neither side yet (unread at the source,
   * withheld at the target, or in the relay's hand). At most C + 1, C being the source's credit
   * window (`source.credit.limit`); C + 2 while the source's hop resumes after a lost link (the
   * old link's unread records beside the new window, docs/protocol.md §8.3). What the target has
   * passed on is the target's window, not held here (with resume, its replay ring keeps a copy).
   */
  readonly held: number;
  /**
   * Resolves (never rejects) when the relay is over: `null` once the source finalized and the
   * target's terminal was handed over; otherwise the error that ended it — the source's
   * (`ERR_SENDER_DROPPED`, …), the target's cancel or loss (`ERR_STREAM_CANCELLED`, …), or
   * `ERR_STREAM_CANCELLED` for {@link cancel}, `ERR_ABORTED` for the signal.
   */
  readonly done: Promise<LanemuxError | null>;
  /**
   * End both hops: the source is cancelled (its producer's sends fail `ERR_STREAM_CANCELLED`) and
   * the target departs (its consumer reads `ERR_SENDER_DROPPED`, retryable). Idempotent.
   */
  cancel(): void;
}

const noop = (): void => {};

/**
 * Forward every record of `source` to `target` with end-to-end credit (see the module comment).
 * The relay becomes `source`'s one reader (it throws `ERR_READER_ACTIVE` if the anchor is read
 * already) and `target`'s one producer: send nothing else on it.
 */
export function relay<T>(source: StreamAnchor<T>, target: StreamSender<T>, options: RelayOptions = {}): Relay<T> {
  return new RelayRun(source, target, options.signal);
}

/**
 * A relay in one call on the middle node: attach (or, with a ticket, open) a sender to the target
 * anchor `handle`, create the source anchor, and relay. Give `relay.source.handle` (or
 * `node.prebindAnchor(relay.source)`) to the producer.
 */
export async function openRelay<T = unknown>(
  node: LanemuxNode,
  handle: string,
  options: OpenRelayOptions = {},
): Promise<Relay<T>> {
  const { signal, ticket, timeoutMs } = options;
  const target =
    ticket !== undefined
      ? await node.openAnchorStream<T>(handle, ticket, signal !== undefined ? { signal } : {})
      : await node.attachAnchor<T>(handle, {
          ...(signal !== undefined ? { signal } : {}),
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        });
  let source: StreamAnchor<T>;
  try {
    source = node.createAnchor<T>();
    // The next hop's window bounds the stream end to end: a tuned source window would only grow what the relay holds.
    source._fixedCredit = true;
  } catch (e) {
    target._depart(e as LanemuxError);
    throw e;
  }
  return relay(source, target, signal !== undefined ? { signal } : {});
}

/** The relay: the source's push-mode reader and the target's watcher in one object. */
class RelayRun<T> implements Relay<T>, AnchorConsumer<T>, SenderWatcher {
  readonly source: StreamAnchor<T>;
  readonly target: StreamSender<T>;
  readonly done: Promise<LanemuxError | null>;
  #resolve!: (end: LanemuxError | null) => void;
  #consumption: AnchorConsumption;
  #running = true;
  #relayed = 0;
  /** A record taken from the source that the target did not take (at most one). */
  #hand: T | undefined = undefined;
  #holding = false;
  readonly #signal: AbortSignal | undefined;
  #onAbort: (() => void) | null = null;

  constructor(source: StreamAnchor<T>, target: StreamSender<T>, signal: AbortSignal | undefined) {
    this.source = source;
    this.target = target;
    this.#signal = signal;
    this.done = new Promise((resolve) => {
      this.#resolve = resolve;
    });
    // First: it throws when the anchor has a reader, before anything else is set up.
    this.#consumption = source.consume(this);
    target._watch(this);
    if (!this.#running || signal === undefined) return;
    if (signal.aborted) this.#aborted();
    else {
      this.#onAbort = () => this.#aborted();
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  get relayed(): number {
    return this.#relayed;
  }

  get held(): number {
    return this.source._unread() + this.target._withheld + (this.#holding ? 1 : 0);
  }

  // ───────────── the source's reader ─────────────

  /** @internal */
  item(value: T): boolean {
    if (!this.#running) return false;
    const t = this.target;
    if (!t.trySend(value)) {
      // Not taken (paused, or a link being lost): keep it until the target has room.
      this.#hand = value;
      this.#holding = true;
      t._notifyRoom(this.#onRoom);
      return false;
    }
    this.#relayed++;
    if (t._room > 0) return true;
    t._notifyRoom(this.#onRoom);
    return false;
  }

  /** @internal A `SenderError` of the source's producer: the target's consumer gets the same message. */
  senderError(error: StreamError): void {
    if (!this.#running) return;
    // Spends credit like an item; a closed target is reported through its cancel.
    this.target.error(error.message).catch(noop);
    this.#relayed++;
    if (this.target._room > 0) return;
    this.#consumption.pause();
    this.target._notifyRoom(this.#onRoom);
  }

  /** @internal */
  end(error: LanemuxError | null): void {
    if (!this.#running) return;
    if (error === null && !this.source._cancelled) {
      this.#stop();
      // The terminal goes after whatever the target still withholds.
      this.target.finalize().catch(noop);
      this.#resolve(null);
      return;
    }
    const e =
      error ?? new StreamError('ERR_STREAM_CANCELLED', "the relay's source anchor was cancelled on the relaying node");
    this.#stop();
    this.target._depart(e);
    this.#resolve(e);
  }

  /** The target may have room again: pass the record in hand on, then read the source on. */
  readonly #onRoom = (): void => {
    if (!this.#running) return;
    const t = this.target;
    if (t._room === 0) {
      t._notifyRoom(this.#onRoom);
      return;
    }
    if (this.#holding) {
      if (!t.trySend(this.#hand as T)) {
        t._notifyRoom(this.#onRoom);
        return;
      }
      this.#holding = false;
      this.#hand = undefined;
      this.#relayed++;
      if (t._room === 0) {
        t._notifyRoom(this.#onRoom);
        return;
      }
    }
    this.#consumption.resume();
  };

  // ───────────── the target's watcher ─────────────

  /** @internal The target's consumer asked to stop: ask the source's producer. */
  senderStopped(): void {
    if (this.#running) this.source.requestStop();
  }

  /** @internal The target's consumer cancelled, or the target was lost: cancel the source. */
  senderCancelled(reason: unknown): void {
    if (!this.#running) return;
    this.#stop();
    this.source.cancel();
    this.#resolve(reason as LanemuxError);
  }

  cancel(): void {
    if (this.#running) this.#cancel(new StreamError('ERR_STREAM_CANCELLED', 'the relay was cancelled'));
  }

  #aborted(): void {
    if (this.#running)
      this.#cancel(
        new StreamError('ERR_ABORTED', 'the relay was aborted by its signal', { cause: this.#signal?.reason }),
      );
  }

  #cancel(e: StreamError): void {
    this.#stop();
    this.source.cancel();
    this.target._depart(e);
    this.#resolve(e);
  }

  #stop(): void {
    this.#running = false;
    this.#hand = undefined;
    this.#holding = false;
    this.target._watch(null);
    if (this.#onAbort !== null) this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#onAbort = null;
  }
}
