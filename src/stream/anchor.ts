/**
 * `StreamAnchor<T>`: the consumer's end of a stream. It reads the mux-owned slot buffer directly
 * (no pump, no extra queue), so records it has not taken hold their sender's credit: a consumer
 * that stops reading holds its sender to exactly C records in flight.
 *
 * Consume it as an async iterator (`for await (const x of anchor)`), as a WHATWG
 * `ReadableStream` (`anchor.readable`), whose back-pressure is the slot's credit, or in push mode
 * (`anchor.consume({ item })`: callbacks, no promise per item — for servers that fan thousands of
 * streams out).
 */
import type { LanemuxError } from '../errors.ts';
import type { Bind } from '../mux/bind.ts';
import type { DirectReader, SlotBuffer } from '../mux/slot-buffer.ts';
import { FrameKind } from '../wire/frame.ts';
import { AnchorReader, STEP_DONE, STEP_NONE, STEP_VALUE, readerActive } from './anchor-reader.ts';
import { enqueueDrain } from './drain-queue.ts';
import type { Drainable } from './drain-queue.ts';
import { StreamError } from './errors.ts';
import { type GapMarker, mergeGap, parseGap, transportError } from './live-feed.ts';

/** What an anchor needs from its node. */
export interface AnchorHost {
  /** The anchor is finished (terminal read, error, cancel): forget it and release its bind. */
  anchorDone(anchor: StreamAnchor<unknown>, cancelled: boolean): void;
  /** A consumer stop or cancel signal for the anchor's current sender. */
  anchorLifecycle(anchor: StreamAnchor<unknown>, cancel: boolean): void;
  /** The anchor has no sender again (after a Detached): its unattached timer restarts. */
  anchorUnattached(anchor: StreamAnchor<unknown>): void;
  /** Why `bind`'s sender ended without a terminal, when the node knows better than "dropped" (its drain). */
  dropped?(bind: Bind | null): LanemuxError | null;
}

/** Callbacks of a push-mode reader ({@link StreamAnchor.consume}). */
export interface AnchorConsumer<T> {
  /**
   * Called for every item, in order. Return `false` to pause: nothing more is delivered until
   * `resume()`, and unread items hold their sender's credit as an idle iterator would. A throw
   * cancels the stream and ends it with `ERR_CONSUMER_THREW`. `gap` is null unless a live producer
   * (`overrun: 'drop-oldest'`) dropped records right before this one: then it says how many.
   */
  item(value: T, gap: GapMarker | null): boolean | void;
  /**
   * Called once when the stream ends: `null` when the producer finalized or the anchor was
   * cancelled, else the error that ended it (`ERR_SENDER_DROPPED`, `ERR_TRANSPORT_ERROR`, …).
   * The stream is over by then, so an exception thrown here is reported as an uncaught error
   * (from a microtask, as an event listener's would be); other streams are not affected.
   */
  end?(error: LanemuxError | null): void;
  /**
   * A `SenderError` (`sender.error(message)`); the stream goes on. Without this callback it is
   * passed to `end` and the stream is cancelled, so no error is ever dropped. A throw cancels the
   * stream and ends it with `ERR_CONSUMER_THREW`, as a throwing `item` does.
   */
  senderError?(error: StreamError): void;
}

/** The handle of a push-mode reader. */
export interface AnchorConsumption {
  /** Stop delivering until {@link resume}; unread items keep holding credit. Idempotent. */
  pause(): void;
  /** Deliver again (in a later microtask, never inside this call). Idempotent. */
  resume(): void;
  /** True while paused. */
  readonly paused: boolean;
}

/** How the anchor is currently fed. */
export type FeedKind = 'none' | 'mux' | 'local' | 'legacy';

/**
 * Senders that may wait behind the one the consumer reads: each attached after the one before it
 * detached, and each holds its own buffer (and, on the mux, its own credit window) until the
 * consumer gets to it. Past this the attach is refused, so a producer that attaches and detaches in
 * a loop cannot make an idle consumer hold unbounded buffers.
 */
export const MAX_WAITING_SENDERS = 4;

/** @internal A sender's feed waiting behind the one being read. */
export interface WaitingFeed {
  readonly buffer: SlotBuffer;
  readonly kind: FeedKind;
  readonly bind: Bind | null;
  onTake: (() => void) | null;
  /** Lets the sender go when the anchor ends before reading this feed (a mux feed is released by its bind). */
  readonly release: ((error: StreamError) => void) | null;
}

/**
 * @internal A feed whose link was lost, waiting for its sender to resume (docs/protocol.md §8.3): once
 * its unread records are read the reader waits, then reads the resumed stream's feed (`next`), or
 * ends with `error` (not resumed in time).
 */
interface ResumeMark {
  readonly bind: Bind;
  next: boolean;
  error: LanemuxError | null;
}

/** The consumer slot after `end` ran: the anchor stays claimed by its one push-mode reader. */
const ENDED: AnchorConsumer<unknown> = { item: () => undefined };
/** A consumer callback threw: the stream is cancelled and ends with this (the thrown value is the cause). */
const consumerThrew = (callback: string, e: unknown): StreamError =>
  new StreamError(
    'ERR_CONSUMER_THREW',
    `the consumer's ${callback} callback threw: ${e instanceof Error ? e.message : String(e)}`,
    { cause: e },
  );

/**
 * The consumer's end of a stream. `next()` filters heartbeats. `SenderError` rejects with
 * `ERR_SENDER_ERROR` and the stream goes on (call `next()` again). `Dropped` →
 * `ERR_SENDER_DROPPED`, a protocol `TransportError` → `ERR_TRANSPORT_ERROR`, an undecodable record →
 * `ERR_DESERIALIZATION`: these end it. Reads reject `ERR_READER_ACTIVE` while `consume()` or a
 * `for await` loop reads the anchor (the one-reader rule of {@link AnchorReader}).
 */
export class StreamAnchor<T = unknown> extends AnchorReader<T> implements Drainable, DirectReader {
  // The fields an item handed over reads first: V8 lays fields out as declared, so these share cache lines.
  #feed: SlotBuffer | null = null;
  #onTake: (() => void) | null = null;
  /** Items (and sender errors) taken from the current feed: what a resume counts as received. */
  #feedRead = 0;
  /** The gap before the item last taken, and gap markers read since (they stamp the next item). */
  #gap: GapMarker | null = null;
  #gapNext: GapMarker | null = null;
  #done = false;
  #error: LanemuxError | null = null;
  /** Push mode: the consumer, and whether it paused. */
  #consumer: AnchorConsumer<T> | null = null;
  #paused = false;
  /**
   * An item taken by {@link _direct} is being delivered: another one offered meanwhile waits in the
   * buffer (no re-entry). A drain's callbacks need no such guard: ingress runs from the transport,
   * never from inside a consumer's callback.
   */
  #delivering = false;
  /** The handle to give a producer (`attachAnchor`); parse it back with `parseHandle`. */
  readonly handle: string;
  /** The anchor's local id (low 64 bits of the handle). */
  readonly localId: bigint;
  readonly #host: AnchorHost;
  #feedKind: FeedKind = 'none';
  /** The mux bind feeding the anchor (attach or pre-bind), if any. */
  bind: Bind | null = null;
  /** Feeds of senders that attached after the one being read detached, oldest first (null until one does). */
  #waiting: WaitingFeed[] | null = null;
  // The last sender to attach (the one being read, or the newest waiting one), as the node
  // identifies it when that sender says it detached: its buffer (same worker), its session and peer.
  #tailBuffer: SlotBuffer | null = null;
  #tailBind: Bind | null = null;
  #tailSession: bigint | null = null;
  #tailPeer: string | null = null;
  /** The last sender to attach has handed over its Detached: another may attach behind it. */
  #tailDetached = false;
  /** Feeds suspended by a lost link (docs/protocol.md §8.3); null while none is. */
  #resumes: ResumeMark[] | null = null;

  /**
   * This stream's credit as the consumer counts it (mux streams once the OpenSlot arrived; null
   * otherwise): the window C, what the sender may still send, records admitted and not yet
   * returned, and credit freed by reading but not yet granted back.
   */
  get credit(): {
    readonly limit: number;
    readonly remaining: number;
    readonly outstanding: number;
    readonly ungranted: number;
  } | null {
    const a = this.bind?.slot?.account;
    return a === undefined
      ? null
      : { limit: a.limit, remaining: a.remaining, outstanding: a.dataOutstanding, ungranted: a.ungranted };
  }
  #feedWaiters: Array<() => void> = [];
  /** The end was a cancel, not the producer's `Finalized`. */
  #cancelled = false;
  /** Push mode: a drain is queued, a wake-up is armed. */
  #queued = false;
  #armed = false;
  readonly #wake = (): void => {
    this.#armed = false;
    this.#schedule();
  };
  /** The feed a parked read's wake-up is armed on (at most one: the wake-up outlives a direct hand-off). */
  #readArmedOn: SlotBuffer | null = null;
  readonly #readWake = (): void => {
    this.#readArmedOn = null;
    if (this.readParked) this.#schedule();
  };

  /**
   * @internal The stream's credit window stays at C (a relay's source: see `BindOwner.fixedCredit`). Set before the
   * anchor is attached.
   */
  _fixedCredit = false;
  /**
   * @internal The deadline of the anchor's current unattached period (the node's reaper sets it):
   * a reaper entry with an older one is stale.
   */
  _unattachedDeadline = 0;
  /** @internal */
  constructor(host: AnchorHost, handle: string, localId: bigint) {
    super();
    this.#host = host;
    this.handle = handle;
    this.localId = localId;
  }

  /**
   * The gap before the item last read (`next()`, `for await`, `readable`, the last one
   * `takeAvailable` returned, which stops at such an item): what a live producer with `overrun:
   * 'drop-oldest'` dropped right before it, or null when nothing was.
   */
  get gap(): GapMarker | null {
    return this.#gap;
  }

  /** How the anchor is fed now: `none` until a sender attaches. */
  get feedKind(): FeedKind {
    return this.#feedKind;
  }

  /** True once the stream ended (terminal read, error or cancel). */
  get finished(): boolean {
    return this.#done || this.#error !== null;
  }

  /** @internal True when the stream ended by a cancel rather than its producer's `Finalized`. */
  get _cancelled(): boolean {
    return this.#cancelled;
  }

  /** @internal Items (and sender errors) here and not yet read: in the feed being read and every waiting one. */
  _unread(): number {
    let n = this.#feed?.dataRecords() ?? 0;
    if (this.#waiting !== null) for (const w of this.#waiting) n += w.buffer.dataRecords();
    return n;
  }

  /**
   * @internal A sender attached: install where its frames come from (`onTake` runs after each take:
   * local and per-stream senders), or, when the last sender detached and its frames are not all read
   * yet, queue it behind. `session` and `peer` identify a remote sender's detach; `release` lets a
   * waiting sender go if the anchor ends first. The caller checks {@link _attachable} first.
   */
  _feed(
    buffer: SlotBuffer,
    kind: FeedKind,
    bind: Bind | null,
    onTake: (() => void) | null = null,
    session: bigint | null = bind?.sessionId ?? null,
    peer: string | null = bind?.peer ?? null,
    release: ((error: StreamError) => void) | null = null,
  ): void {
    if (this.#feed !== null) (this.#waiting ??= []).push({ buffer, kind, bind, onTake, release });
    else this.#install(buffer, kind, bind, onTake);
    this.#tailBuffer = buffer;
    this.#tailBind = bind;
    this.#tailSession = session;
    this.#tailPeer = peer;
    this.#tailDetached = false;
  }

  #install(buffer: SlotBuffer, kind: FeedKind, bind: Bind | null, onTake: (() => void) | null): void {
    // A feed left behind may keep pointing here: `_direct` answers only for the feed read now.
    if (this.#consumer !== null) buffer.direct = this;
    this.#feed = buffer;
    this.#feedKind = kind;
    this.bind = bind;
    this.#onTake = onTake;
    this.#feedRead = 0;
    this.#wakeFeedWaiter();
    this.#rearm();
  }

  /** @internal What runs after each take from `buffer` (its per-stream connection arrived). */
  _setOnTake(buffer: SlotBuffer, onTake: () => void): void {
    if (this.#feed === buffer) this.#onTake = onTake;
    else if (this.#waiting !== null) for (const w of this.#waiting) if (w.buffer === buffer) w.onTake = onTake;
  }

  /** @internal Withdraw the only feed (a released pre-bind): unread frames there are discarded. */
  _unfeed(): void {
    this.#feed = null;
    this.#feedKind = 'none';
    this.bind = null;
    this.#onTake = null;
    this.#tailBuffer = null;
    this.#tailBind = null;
    this.#tailSession = null;
    this.#tailPeer = null;
    this.#tailDetached = false;
    this.#rearm();
  }

  /**
   * @internal True when a sender may attach now: nobody feeds the anchor, or the last sender to
   * attach has detached (the new one reads after its frames), with fewer than
   * {@link MAX_WAITING_SENDERS} waiting. {@link _waitingFull} tells the two refusals apart.
   */
  get _attachable(): boolean {
    return this.#feed === null || (this.#tailDetached && !this._waitingFull);
  }

  /** @internal The last sender detached, but {@link MAX_WAITING_SENDERS} already wait behind the one being read. */
  get _waitingFull(): boolean {
    return this.#tailDetached && this.#waiting !== null && this.#waiting.length >= MAX_WAITING_SENDERS;
  }

  /** @internal The mux bind of the last sender to attach (the live one), if it rides the mux. */
  get _tailBind(): Bind | null {
    return this.#tailBind;
  }

  /** @internal True when `buffer` feeds the last sender to attach. */
  _isTail(buffer: SlotBuffer): boolean {
    return this.#tailBuffer === buffer;
  }

  /** @internal The same-worker sender writing into `buffer` handed over its Detached. */
  _localDetached(buffer: SlotBuffer): void {
    if (this.#tailBuffer === buffer) this.#tailDetached = true;
  }

  /**
   * @internal `peer` says its sender of `session` handed over its Detached (`_anchor_detach`). Only
   * the last sender to attach counts (an earlier one has detached already), and only from its own
   * peer when that is known (a pre-bind learns it at claim; before that the session is the proof).
   */
  _remoteDetached(session: bigint, peer: string): boolean {
    if (this.#tailBuffer === null || this.#tailSession !== session) return false;
    const known = this.#tailPeer ?? this.#tailBind?.slot?.peer ?? null;
    if (known !== null && known !== peer) return false;
    this.#tailDetached = true;
    return true;
  }

  /** @internal Remove and return every waiting feed (the anchor ended: the node lets their senders go). */
  _takeWaiting(): WaitingFeed[] | null {
    const w = this.#waiting;
    this.#waiting = null;
    return w;
  }

  /**
   * @internal The stream ends where `bind`'s feed ends (its sender went away: the consumer reads
   * Dropped there), so the feeds waiting after it are never read: remove and return them. Nobody
   * may attach any more.
   */
  _cutAfter(bind: Bind): WaitingFeed[] | null {
    const w = this.#waiting;
    if (w === null) return null;
    const i = this.bind === bind ? 0 : w.findIndex((f) => f.bind === bind) + 1;
    if (i === 0 && this.bind !== bind) return null;
    const cut = w.splice(i);
    if (w.length === 0) this.#waiting = null;
    this.#tailDetached = false;
    this.#tailBuffer = null;
    return cut.length > 0 ? cut : null;
  }

  /**
   * @internal Items of `bind`'s feed this anchor has received (read, and unread in its buffer), or
   * null when `bind` does not feed it.
   */
  _received(bind: Bind): number | null {
    if (this.bind === bind) return this.#feedRead + bind.buffer.dataRecords();
    if (this.#waiting?.some((f) => f.bind === bind) === true) return bind.buffer.dataRecords();
    return null;
  }

  /** @internal `bind`'s link was lost: its records are read, then the reader waits for the resume. */
  _suspended(bind: Bind): void {
    (this.#resumes ??= []).push({ bind, next: false, error: null });
  }

  #mark(bind: Bind | null): ResumeMark | undefined {
    return this.#resumes?.find((m) => m.bind === bind);
  }

  #unmark(m: ResumeMark): void {
    const r = this.#resumes!;
    r.splice(r.indexOf(m), 1);
    if (r.length === 0) this.#resumes = null;
  }

  /** @internal The stream of suspended `old` resumed on `fresh`: read right after `old`'s records. */
  _resumed(old: Bind, fresh: Bind): void {
    const m = this.#mark(old);
    if (m === undefined) return;
    m.next = true;
    const feed: WaitingFeed = { buffer: fresh.buffer, kind: 'mux', bind: fresh, onTake: null, release: null };
    const w = (this.#waiting ??= []);
    if (this.bind === old) w.unshift(feed);
    else w.splice(w.findIndex((f) => f.bind === old) + 1, 0, feed);
    if (this.#tailBind === old) {
      this.#tailBind = fresh;
      this.#tailBuffer = fresh.buffer;
      this.#tailSession = fresh.sessionId;
    }
    this.#wakeFeedWaiter();
  }

  /** @internal Suspended `bind` was not resumed: the stream ends with `error` after its records. */
  _resumeFailed(bind: Bind, error: LanemuxError): void {
    const m = this.#mark(bind);
    if (m === undefined) return;
    m.error = error;
    this.#wakeFeedWaiter();
  }

  /** True while the reader has read all of a suspended feed and waits for its resume. */
  #parked(f: SlotBuffer): boolean {
    if (this.#resumes === null || !f.closed || f.length > 0) return false;
    const m = this.#mark(this.bind);
    return m !== undefined && !m.next && m.error === null;
  }

  /** The feed being read sent Detached: the next waiting sender's feed takes its place, if there is one. */
  #next(): boolean {
    const w = this.#waiting;
    if (w === null) return false;
    const f = w.shift()!;
    if (w.length === 0) this.#waiting = null;
    this.#install(f.buffer, f.kind, f.bind, f.onTake);
    return true;
  }

  /** The feed changed under a push-mode reader: a wake-up armed on the old one may never come. */
  #rearm(): void {
    if (this.readParked) {
      this.#readArmedOn = null;
      this.#schedule();
    }
    if (this.#consumer === null || !this.#armed) return;
    this.#armed = false;
    this.#schedule();
  }

  /** @internal The node is closing: end with SenderDropped unless already finished. */
  _fail(error: LanemuxError): void {
    if (this.finished) return;
    this.#error = error;
    // Wake a reader parked on the buffer too: it then sees the error.
    this.#feed?.close();
    this.#wakeFeedWaiter();
  }

  #wakeFeedWaiter(): void {
    if (this.readParked) this.#schedule();
    const w = this.#feedWaiters;
    if (w.length === 0) return;
    this.#feedWaiters = [];
    for (const f of w) f();
  }

  protected get readerNoun(): string {
    return 'the anchor';
  }

  protected override pushReader(): boolean {
    return this.#consumer !== null;
  }

  /**
   * Park a read on the feed being read when ingress can hand it the next item (as to a push-mode
   * consumer waiting on an empty buffer), and have any other change wake it through the drain queue.
   */
  protected override armParked(): boolean {
    const f = this.#feed;
    if (f === null || this.#consumer !== null || this.#onTake !== null || this.#gapNext !== null || this.stamped)
      return false;
    if (this.finished || this.#parked(f)) return false;
    f.direct = this;
    if (this.#readArmedOn !== f) {
      this.#readArmedOn = f;
      f.notifyReadable(this.#readWake);
    }
    return true;
  }

  /** Resolves when `takeAvailable` has something to return, or the stream ended or failed. */
  waitAvailable(): Promise<void> {
    if (this.#error !== null || this.#done) return Promise.resolve();
    const f = this.#feed;
    if (f === null || this.#parked(f)) {
      return new Promise<void>((resolve) => {
        this.#feedWaiters.push(resolve);
      });
    }
    return f.waitReadable();
  }

  /**
   * Read in push mode: `consumer.item(value)` for every item, in order, with no promise per item.
   * An item that arrives while the consumer waits (not paused, nothing unread) is delivered while
   * the batch that carried it is applied, and its credit returns with that batch; otherwise items
   * are delivered from a microtask after the batch, one microtask for every anchor woken by it.
   * `item` never runs inside another of this anchor's callbacks; `end` is called once. Reading credit returns
   * as items are delivered, exactly as with the iterator; return `false` from `item` (or call
   * `pause()`) to stop reading, and the sender is held to its credit window until `resume()`.
   *
   * An anchor has one reader: `next()`, `takeAvailable()`, a `for await` loop and a second
   * `consume()` throw `ERR_READER_ACTIVE` afterwards, and `consume()` throws it while a `for await`
   * loop reads the anchor.
   */
  consume(consumer: AnchorConsumer<T>): AnchorConsumption {
    if (this.#consumer !== null) throw readerActive();
    if (this.looping) throw this.loopActive();
    // A next() parked on the feed is refused, not fed: the consumer reads every item.
    this.refuseParked(readerActive);
    this.#consumer = consumer;
    if (this.#feed !== null) this.#feed.direct = this;
    this.#schedule();
    const self = this;
    return {
      pause: () => {
        self.#paused = true;
      },
      resume: () => {
        if (!self.#paused) return;
        self.#paused = false;
        self.#schedule();
      },
      get paused() {
        return self.#paused;
      },
    };
  }

  #schedule(): void {
    if (this.#queued) return;
    this.#queued = true;
    enqueueDrain(this);
  }

  /** Wake this anchor when its feed has something (or it gets one). At most one wake-up is armed. */
  #arm(): void {
    if (this.#armed) return;
    this.#armed = true;
    const f = this.#feed;
    if (f === null || this.#parked(f)) this.#feedWaiters.push(this.#wake);
    else f.notifyReadable(this.#wake);
  }

  /**
   * @internal Ingress offers an `Item` for `buffer`: taken and delivered at once (true) when it is the
   * next value this reader delivers, at once: the push-mode consumer waits on this (empty) feed, is
   * not paused, is not delivering an item taken this way, and no gap marker or take hook applies. A live consumer
   * that is neither paused nor inside a callback is queued or armed, so with nothing unread the
   * item is next either way. A read (`next()`, `for await`) parked on this feed takes it the same
   * way. False: nothing happened, the item goes into the buffer.
   */
  _direct(buffer: SlotBuffer, value: unknown): boolean {
    // Either reader takes it only as the next value of the feed read now, with no gap to stamp or take hook.
    if (this.#feed !== buffer || this.#gapNext !== null || this.stamped || this.#onTake !== null || this.finished)
      return false;
    const c = this.#consumer;
    if (c === null) {
      // A read parked on this (empty) feed: it resolves with the item, and its loop runs next.
      if (!this.readParked) return false;
      this.#feedRead++;
      this.handParked(value as T);
      return true;
    }
    if (c === ENDED || this.#paused || this.#delivering) return false;
    this.#feedRead++;
    this.#delivering = true;
    try {
      if (c.item(value as T, this.#gap) === false) this.#paused = true;
    } catch (e) {
      this.cancel();
      this.#end(c, consumerThrew('item', e));
    } finally {
      this.#delivering = false;
    }
    return true;
  }

  /** @internal Deliver what is buffered to the push-mode consumer (run by the drain queue). */
  drain(): void {
    this.#queued = false;
    const c = this.#consumer;
    if (c === null) {
      this.settleParked();
      return;
    }
    if (this.#paused || c === ENDED) return;
    for (;;) {
      let r: number;
      try {
        r = this.step();
      } catch (e) {
        const error = e as LanemuxError;
        if (!this.finished && c.senderError !== undefined) {
          // A SenderError: the stream goes on.
          try {
            c.senderError(error as StreamError);
          } catch (thrown) {
            // As a throwing item(): escaping here would leave the stream neither read nor ended.
            this.cancel();
            this.#end(c, consumerThrew('senderError', thrown));
            return;
          }
          // pause() inside senderError holds the next item back too.
          if (this.#paused) return;
          continue;
        }
        if (!this.finished) this.cancel();
        this.#end(c, error);
        return;
      }
      if (r === STEP_DONE) {
        this.#end(c, null);
        return;
      }
      if (r === STEP_NONE) {
        this.#arm();
        return;
      }
      let more: boolean | void;
      try {
        more = c.item(this.take() as T, this.#gap);
      } catch (e) {
        this.cancel();
        this.#end(c, consumerThrew('item', e));
        return;
      }
      if (more === false) this.#paused = true;
      if (this.#paused) return;
    }
  }

  #end(c: AnchorConsumer<T>, error: LanemuxError | null): void {
    this.#consumer = ENDED as AnchorConsumer<T>;
    c.end?.(error);
  }

  #pending: unknown = undefined;

  protected take(): T {
    const v = this.#pending as T;
    this.#pending = undefined;
    return v;
  }

  /**
   * Advance over control frames to the next item (left in `#pending`), the end, or "nothing now".
   * Throws the stream's error frames.
   */
  protected step(): number {
    for (;;) {
      if (this.#error !== null) throw this.#error;
      if (this.#done) return STEP_DONE;
      const f = this.#feed;
      if (f === null) return STEP_NONE;
      if (f.take()) {
        this.#onTake?.();
        const kind = f.kind;
        const value = f.value;
        f.value = undefined;
        switch (kind) {
          case FrameKind.Item:
            this.#feedRead++;
            this.#pending = value;
            if (this.#gapNext !== null || this.stamped) this.#stamp();
            return STEP_VALUE;
          case FrameKind.Heartbeat:
            continue;
          case FrameKind.SenderError: {
            this.#feedRead++;
            const gap = parseGap(value);
            if (gap !== null) {
              this.#gapNext = mergeGap(this.#gapNext, gap);
              continue;
            }
            throw new StreamError('ERR_SENDER_ERROR', String(value));
          }
          case FrameKind.Finalized:
            this.#finish(false);
            return STEP_DONE;
          case FrameKind.Detached:
            // The sender left: read the next one that attached meanwhile, or wait for one.
            if (!this.#next()) {
              this._unfeed();
              this.#host.anchorUnattached(this as StreamAnchor<unknown>);
            }
            continue;
          case FrameKind.Dropped:
            // A Dropped may carry its own error (a per-stream connection lost: the path cannot resume).
            throw this.#fail(
              this.#host.dropped?.(this.bind) ??
                (value instanceof StreamError ? value : null) ??
                new StreamError('ERR_SENDER_DROPPED', 'the sender went away without finishing the stream', {
                  retryable: true,
                }),
            );
          case FrameKind.TransportError:
            throw this.#fail(transportError(value));
          default:
            throw this.#fail(new StreamError('ERR_DESERIALIZATION', String(value)));
        }
      }
      if (f.closed) {
        // Closed with nothing to read and no terminal: the stream ended without a sentinel.
        if (this.#feed === f) {
          if (this.#feedKind === 'local' || this.#feedKind === 'legacy') {
            this.#finish(false);
            return STEP_DONE;
          }
          const m = this.#resumes === null ? undefined : this.#mark(this.bind);
          if (m !== undefined) {
            // A lost link: the resumed feed follows with no terminal between, or the stream ends.
            if (m.next) {
              this.#unmark(m);
              this.#next();
              continue;
            }
            if (m.error !== null) {
              this.#unmark(m);
              throw this.#fail(m.error);
            }
            return STEP_NONE;
          }
          throw this.#fail(
            new StreamError('ERR_SENDER_DROPPED', 'the stream closed without a terminal', { retryable: true }),
          );
        }
        continue;
      }
      return STEP_NONE;
    }
  }

  /** The item just stepped to carries the gap markers read before it (or none). */
  #stamp(): void {
    this.#gap = this.#gapNext;
    this.#gapNext = null;
    this.stamped = this.#gap !== null;
  }

  #fail(error: LanemuxError): LanemuxError {
    this.#error = error;
    this.#host.anchorDone(this as StreamAnchor<unknown>, false);
    return error;
  }

  #finish(cancelled: boolean): void {
    if (this.#done) return;
    this.#done = true;
    this.#cancelled = cancelled;
    this.#host.anchorDone(this as StreamAnchor<unknown>, cancelled);
  }

  /**
   * Cancel the stream: the producer's sends fail (`CloseSlot{UnknownSlot}` on the mux), unread
   * records are discarded and the anchor is forgotten. Idempotent.
   */
  cancel(): void {
    // A paused push-mode consumer is not waiting to be resumed any more: it hears its end now (also
    // when the stream had already ended behind the pause), with nothing unread delivered first.
    const paused = this.#paused && this.#consumer !== null && this.#consumer !== ENDED;
    if (paused) {
      this.#paused = false;
      this.#schedule();
    }
    if (this.finished) {
      if (paused) this.#feed?.clear();
      return;
    }
    this.#finish(true);
    // Discard unread records and wake a reader parked on the buffer (it then sees the end).
    this.#feed?.clear();
    this.#feed?.close();
    this.#wakeFeedWaiter();
  }

  /** Ask the producer to stop (it may still send final output and finalize). Idempotent. */
  requestStop(): void {
    if (!this.finished) this.#host.anchorLifecycle(this as StreamAnchor<unknown>, false);
  }
}
