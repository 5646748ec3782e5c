/**
 * `MpscAnchor<T>`: the consumer's end of a stream that many senders write into
 * (docs/protocol.md §8 "MPSC anchors"). Every attached sender has its own feed — over the mux its
 * own bind (session, slot, C+1 buffer and credit C), over the per-stream path its own connection,
 * on the same worker its own bounded local buffer — and the consumer reads them all.
 *
 * Design: no pump and no shared channel. The reference moves each sender's records through a
 * per-sender pump into a 256-deep anchor channel, so its senders may run ahead of the consumer by
 * that depth. Here the anchor reads every feed's buffer itself, round-robin over the feeds that
 * have something (one record per turn, so one busy sender cannot starve the others), and a
 * record's credit returns when the consumer takes it. Memory is therefore bounded by C + 1 records
 * per mux sender (and the anchor channel depth per per-stream or same-worker sender), with no
 * extra queue; a consumer that stops reading holds every sender to its window. A feed that runs
 * empty is watched with one `notifyReadable()` of its buffer — a wait per idle-to-busy transition,
 * never a promise per record while the feed has records.
 *
 * Per-sender ends: a sender's terminal ends only its own part. `finalize()` surfaces as a
 * `finalized` event and `detach()` as `detached`; a sender whose slot or connection ends without
 * a terminal (its peer went away, epoch death, accept window expired, it was aborted) surfaces
 * as a `dropped` event carrying a `StreamError` (`ERR_SENDER_DROPPED`, `ERR_TRANSPORT_ERROR`, or
 * `ERR_DESERIALIZATION` for an undecodable record, which also closes that sender's slot). The
 * other senders go on. No sender can end the whole anchor.
 *
 * The anchor itself ends when the consumer says so, or when nobody is left:
 * - {@link MpscAnchor.cancel} (or `close()`, `break` out of `for await`, dropping the
 *   `readable`): every sender's slot closes (`CloseSlot{UnknownSlot}` over the mux), so each
 *   producer's next `send()` fails; unread records are discarded.
 * - {@link MpscAnchor.seal}: no further sender may attach, and iteration ends (done) once every
 *   attached sender's part has ended and its events have been read.
 * - The node's `unattachedTimeout` with no sender attached (armed at creation and whenever the
 *   last sender's end is read): iteration ends (done), as the reference's registry removal does.
 */
import type { LanemuxError } from '../errors.ts';
import type { PeerId } from '../messenger/types.ts';
import type { Bind } from '../mux/bind.ts';
import type { SlotBuffer } from '../mux/slot-buffer.ts';
import { FrameKind } from '../wire/frame.ts';
import { AnchorReader, STEP_DONE, STEP_NONE, STEP_VALUE } from './anchor-reader.ts';
import { StreamError } from './errors.ts';
import { type GapMarker, mergeGap, parseGap, transportError } from './live-feed.ts';

/** One event of an MPSC stream, tagged with the sender (its id from `attachMpscAnchor`). */
export type MpscEvent<T> =
  /**
   * An item from `sender`. `gap` is there when a live sender (`overrun: 'drop-oldest'`) dropped
   * records right before this one: it says how many.
   */
  | { readonly kind: 'item'; readonly sender: number; readonly value: T; readonly gap?: GapMarker }
  /** `sender` reported an error with `sender.error(message)`; it may go on sending. */
  | { readonly kind: 'error'; readonly sender: number; readonly message: string }
  /** `sender` finalized: its part ended normally (the anchor goes on). */
  | { readonly kind: 'finalized'; readonly sender: number }
  /** `sender` detached (or a `_mpsc_anchor_detach` removed it): its part ended (the anchor goes on). */
  | { readonly kind: 'detached'; readonly sender: number }
  /** `sender`'s part ended without a terminal; `error.code` says why (the anchor goes on). */
  | { readonly kind: 'dropped'; readonly sender: number; readonly error: StreamError };

/** What an MPSC anchor needs from its node. */
export interface MpscHost {
  /** The anchor ended (cancelled, sealed and drained, or expired): forget it. */
  mpscDone(anchor: MpscAnchor<unknown>, cancelled: boolean): void;
  /** The anchor has no sender now: (re)start its unattached timer for `anchor.idleEpoch`. */
  mpscIdle(anchor: MpscAnchor<unknown>): void;
  /** Why a sender of `peer` ended without a terminal, when the node knows better than "dropped" (its drain). */
  dropped?(peer: PeerId | null): StreamError | null;
}

/** Options of `createMpscAnchor`. */
export interface MpscAnchorOptions {
  /** Most senders attached at once; a further attach is refused. Defaults to 1,024. */
  readonly maxSenders?: number;
}

/** Default of {@link MpscAnchorOptions.maxSenders}. */
export const MPSC_MAX_SENDERS = 1024;

/** @internal One attached sender's feed: where its frames arrive and how to close it. */
export class MpscFeed {
  readonly senderId: number;
  readonly transport: 'mux' | 'local' | 'legacy';
  /** Where the sender's records are read now (a resume reads the next bind's after it). */
  buffer: SlotBuffer;
  /** The sender's peer (null on the same worker). */
  readonly peer: PeerId | null;
  /** The mux bind whose buffer is read now, when over the mux. */
  bind: Bind | null;
  /** Items (`Item`, `SenderError`) taken from the current buffer: with its unread ones, the resume offset. */
  read = 0;
  /** Binds a resume opened after the current one, oldest first (read once it is drained), or null. */
  next: Bind[] | null = null;
  /** The link was lost: the feed waits for its producer's resume (docs/protocol.md §8.3), not an end. */
  suspended = false;
  /** The consumer asked the sender to stop while it was suspended: the resumed bind carries it. */
  stopPending = false;
  /** The resume failed: once its records are read the sender ends `dropped` with this. */
  resumeError: StreamError | null = null;
  /** Runs after each take (same-worker and per-stream back-pressure). */
  onTake: (() => void) | null = null;
  /** Close the sender's slot or connection (idempotent): its next send fails. */
  release: ((error: LanemuxError) => void) | null = null;
  /** A consumer stop (false) or cancel (true) for the sender, where the transport has one. */
  lifecycle: ((cancel: boolean) => void) | null = null;
  queued = false;
  watching = false;
  ended = false;
  /** A `_mpsc_anchor_detach` closed it: a close without terminal reads as `detached`. */
  detachRequested = false;
  /** Gap markers read since the sender's last item: they stamp its next one. */
  gap: GapMarker | null = null;

  constructor(
    senderId: number,
    transport: 'mux' | 'local' | 'legacy',
    buffer: SlotBuffer,
    peer: PeerId | null,
    bind: Bind | null,
  ) {
    this.senderId = senderId;
    this.transport = transport;
    this.buffer = buffer;
    this.peer = peer;
    this.bind = bind;
  }
}

/** `step()` found an event. */
const STEP_EVENT = STEP_VALUE;

/**
 * The consumer's end of a many-senders stream. Create one with `node.createMpscAnchor()`.
 * `next()` filters heartbeats; per-sender ends are events, not errors. A read rejects only when the
 * anchor itself failed (the node closed: `ERR_SENDER_DROPPED`), and `ERR_READER_ACTIVE` while a
 * `for await` loop reads the anchor (the one-reader rule of {@link AnchorReader}).
 */
export class MpscAnchor<T = unknown> extends AnchorReader<MpscEvent<T>> {
  /** The handle to give producers (`attachMpscAnchor`); bit 63 of its local id marks MPSC. */
  readonly handle: string;
  /** The anchor's local id (low 64 bits of the handle, bit 63 set). */
  readonly localId: bigint;
  /** Most senders attached at once. */
  readonly maxSenders: number;
  readonly #host: MpscHost;
  readonly #feeds = new Map<number, MpscFeed>();
  #nextSender = 1;
  /** Feeds with something to read (or a close to report), FIFO: the round-robin order. */
  #ready: MpscFeed[] = [];
  #readyHead = 0;
  #waiters: Array<() => void> = [];
  #pending: MpscEvent<T> | null = null;
  #done = false;
  #error: LanemuxError | null = null;
  #sealed = false;
  #idleEpoch = 0;

  /** @internal */
  constructor(host: MpscHost, handle: string, localId: bigint, maxSenders: number) {
    super();
    this.#host = host;
    this.handle = handle;
    this.localId = localId;
    this.maxSenders = maxSenders;
  }

  /** Senders attached now (a sender counts until its end has been read). */
  get senders(): number {
    return this.#feeds.size;
  }

  /**
   * Records delivered and not yet read, over every sender: at most C + 1 per mux sender (its credit
   * window plus the terminal reserve), so it stays bounded when the consumer stops reading.
   */
  get buffered(): number {
    let n = 0;
    for (const feed of this.#feeds.values()) {
      n += feed.buffer.length;
      if (feed.next !== null) for (const b of feed.next) n += b.buffer.length;
    }
    return n;
  }

  /** True once the anchor ended (cancelled, sealed and drained, expired, or the node closed). */
  get finished(): boolean {
    return this.#done || this.#error !== null;
  }

  /** True after {@link seal}: no further sender may attach. */
  get sealed(): boolean {
    return this.#sealed;
  }

  /** @internal Bumped whenever the anchor gains a sender or loses its last one. */
  get idleEpoch(): number {
    return this.#idleEpoch;
  }

  /** @internal Why a new sender may not attach now, or null. */
  _refusal(): string | null {
    if (this.finished) return 'unknown or finished anchor';
    if (this.#sealed) return 'the MPSC anchor is sealed';
    if (this.#feeds.size >= this.maxSenders) return `the MPSC anchor has its maximum of ${this.maxSenders} senders`;
    return null;
  }

  /** @internal The id of the next sender: unique for the anchor's lifetime. */
  _nextSenderId(): number {
    return this.#nextSender++;
  }

  /** @internal A sender attached: read its feed from now on. */
  _add(feed: MpscFeed): void {
    this.#feeds.set(feed.senderId, feed);
    this.#idleEpoch++;
    if (feed.buffer.length > 0 || feed.buffer.closed) this.#enqueue(feed);
    else this.#watch(feed);
  }

  /** @internal `_mpsc_anchor_detach`: close one sender's feed; returns false if unknown or not `peer`'s. */
  _detachSender(senderId: number, peer: PeerId | null): boolean {
    const feed = this.#feeds.get(senderId);
    if (feed === undefined || feed.ended || feed.peer !== peer) return false;
    feed.detachRequested = true;
    // A suspended sender detached meanwhile: it reads as detached, it is not waited for.
    feed.suspended = false;
    feed.release?.(new StreamError('ERR_STREAM_CLOSED', 'the sender was detached'));
    // Over the mux the release closes the buffer; elsewhere close it here so the reader sees the end.
    feed.buffer.close();
    return true;
  }

  /** @internal Items of `feed`'s stream that reached the anchor through `bind`, read or not; null when `bind` is not its. */
  _received(feed: MpscFeed, bind: Bind): number | null {
    if (feed.ended || this.#feeds.get(feed.senderId) !== feed) return null;
    if (feed.bind === bind) return feed.read + bind.buffer.dataRecords();
    return feed.next?.includes(bind) === true ? bind.buffer.dataRecords() : null;
  }

  /** @internal Records of `feed` not yet read, over its binds. */
  _unread(feed: MpscFeed): number {
    let n = feed.buffer.dataRecords();
    if (feed.next !== null) for (const b of feed.next) n += b.buffer.dataRecords();
    return n;
  }

  /** @internal `feed`'s link was lost: its records are read, then it waits (no event) for the resume. */
  _suspendedFeed(feed: MpscFeed): void {
    feed.suspended = true;
  }

  /** @internal `feed`'s stream goes on on `fresh`: read after what it has. */
  _resumedFeed(feed: MpscFeed, fresh: Bind): void {
    if (feed.ended) return;
    feed.suspended = false;
    (feed.next ??= []).push(fresh);
    this.#enqueue(feed);
  }

  /** @internal `feed` was not resumed: it ends `dropped` with `error` after its records. */
  _resumeFailedFeed(feed: MpscFeed, error: StreamError): void {
    if (feed.ended) return;
    feed.suspended = false;
    feed.resumeError = error;
    this.#enqueue(feed);
  }

  /** @internal The unattached timer fired: end (cleanly) if still without a sender since `epoch`. */
  _expire(epoch: number): boolean {
    if (this.finished || this.#feeds.size > 0 || epoch !== this.#idleEpoch) return false;
    this.#done = true;
    this.#host.mpscDone(this as MpscAnchor<unknown>, false);
    this.#wake();
    return true;
  }

  /** @internal The node is closing: end with `error` unless already finished. */
  _fail(error: LanemuxError): void {
    if (this.finished) return;
    this.#error = error;
    this.#closeFeeds(error, false);
    this.#wake();
  }

  /**
   * No further sender may attach (`ERR_ATTACH_REFUSED`); iteration ends once every attached
   * sender's part has ended and its events have been read. Idempotent.
   */
  seal(): void {
    if (this.#sealed) return;
    this.#sealed = true;
    this.#wake();
  }

  protected get readerNoun(): string {
    return 'the MPSC anchor';
  }

  /** Resolves when `takeAvailable` has something to return, or the anchor ended. */
  waitAvailable(): Promise<void> {
    if (this.finished || this.#readyHead < this.#ready.length || (this.#sealed && this.#feeds.size === 0))
      return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#waiters.push(resolve);
    });
  }

  protected take(): MpscEvent<T> {
    const e = this.#pending!;
    this.#pending = null;
    return e;
  }

  #wake(): void {
    const w = this.#waiters;
    if (w.length === 0) return;
    this.#waiters = [];
    for (const f of w) f();
  }

  #enqueue(feed: MpscFeed): void {
    if (feed.queued || feed.ended) return;
    feed.queued = true;
    this.#ready.push(feed);
    this.#wake();
  }

  #dequeue(): MpscFeed | undefined {
    const q = this.#ready;
    if (this.#readyHead >= q.length) {
      if (q.length > 0) {
        q.length = 0;
        this.#readyHead = 0;
      }
      return undefined;
    }
    const feed = q[this.#readyHead]!;
    q[this.#readyHead++] = undefined as unknown as MpscFeed;
    if (this.#readyHead > 1024 && this.#readyHead * 2 > q.length) {
      q.splice(0, this.#readyHead);
      this.#readyHead = 0;
    }
    feed.queued = false;
    return feed;
  }

  /** Park on an empty feed's buffer: one wait per idle-to-busy transition. */
  #watch(feed: MpscFeed): void {
    if (feed.watching || feed.ended) return;
    feed.watching = true;
    // Promise-free: the wake-up only queues the feed (it runs inside ingress, so it reads nothing).
    feed.buffer.notifyReadable(() => {
      feed.watching = false;
      if (!this.finished) this.#enqueue(feed);
    });
  }

  /** Advance to the next event (left in `#pending`), the end, or "nothing now". */
  protected step(): number {
    for (;;) {
      if (this.#error !== null) throw this.#error;
      if (this.#done) return STEP_DONE;
      const feed = this.#dequeue();
      if (feed === undefined) {
        if (this.#sealed && this.#feeds.size === 0) {
          this.#finish(false);
          return STEP_DONE;
        }
        return STEP_NONE;
      }
      if (feed.ended) continue;
      const b = feed.buffer;
      const sender = feed.senderId;
      if (b.take()) {
        feed.onTake?.();
        const kind = b.kind;
        const value = b.value;
        b.value = undefined;
        // Round robin: a feed with more goes to the back of the queue; an empty one is watched.
        if (b.length > 0 || b.closed) this.#enqueue(feed);
        else this.#watch(feed);
        switch (kind) {
          case FrameKind.Item:
            feed.read++;
            if (feed.gap === null) this.#pending = { kind: 'item', sender, value: value as T };
            else {
              this.#pending = { kind: 'item', sender, value: value as T, gap: feed.gap };
              feed.gap = null;
            }
            return STEP_EVENT;
          case FrameKind.Heartbeat:
            continue;
          case FrameKind.SenderError: {
            feed.read++;
            const gap = parseGap(value);
            if (gap !== null) {
              feed.gap = mergeGap(feed.gap, gap);
              continue;
            }
            this.#pending = { kind: 'error', sender, message: String(value) };
            return STEP_EVENT;
          }
          case FrameKind.Finalized:
            this.#endFeed(feed);
            this.#pending = { kind: 'finalized', sender };
            return STEP_EVENT;
          case FrameKind.Detached:
            this.#endFeed(feed);
            this.#pending = { kind: 'detached', sender };
            return STEP_EVENT;
          case FrameKind.Dropped:
            this.#endFeed(feed);
            this.#pending = feed.detachRequested
              ? { kind: 'detached', sender }
              : {
                  kind: 'dropped',
                  sender,
                  error:
                    this.#host.dropped?.(feed.peer) ??
                    (value instanceof StreamError ? value : null) ??
                    new StreamError('ERR_SENDER_DROPPED', `sender ${sender} went away without finishing`, {
                      retryable: true,
                    }),
                };
            return STEP_EVENT;
          case FrameKind.TransportError:
            this.#endFeed(feed);
            this.#pending = { kind: 'dropped', sender, error: transportError(value) };
            return STEP_EVENT;
          default:
            // An undecodable record ends this sender only: its slot closes (the producer is told).
            this.#endFeed(feed);
            this.#pending = {
              kind: 'dropped',
              sender,
              error: new StreamError('ERR_DESERIALIZATION', `sender ${sender}: ${String(value)}`),
            };
            return STEP_EVENT;
        }
      }
      if (b.closed) {
        const next = feed.next;
        if (next !== null) {
          // A resume: the next bind's records follow this one's with nothing between.
          const bind = next.shift()!;
          if (next.length === 0) feed.next = null;
          feed.bind = bind;
          feed.buffer = bind.buffer;
          feed.read = 0;
          this.#enqueue(feed);
          continue;
        }
        // Waiting for the resume: the resume (or its failure) queues the feed again.
        if (feed.suspended) continue;
        // Closed with nothing to read and no terminal.
        this.#endFeed(feed);
        this.#pending = feed.detachRequested
          ? { kind: 'detached', sender }
          : {
              kind: 'dropped',
              sender,
              error:
                feed.resumeError ??
                this.#host.dropped?.(feed.peer) ??
                new StreamError('ERR_SENDER_DROPPED', `sender ${sender}'s stream closed without a terminal`, {
                  retryable: true,
                }),
            };
        return STEP_EVENT;
      }
      this.#watch(feed);
    }
  }

  /** One sender's part ended: forget it, close its slot if still open, restart the idle timer. */
  #endFeed(feed: MpscFeed): void {
    if (feed.ended) return;
    feed.ended = true;
    this.#feeds.delete(feed.senderId);
    feed.release?.(new StreamError('ERR_STREAM_CLOSED', "the sender's part of the MPSC stream ended"));
    feed.buffer.clear();
    feed.suspended = false;
    if (feed.next !== null) {
      for (const b of feed.next) b.buffer.clear();
      feed.next = null;
    }
    if (this.#feeds.size === 0 && !this.finished) {
      this.#idleEpoch++;
      if (!this.#sealed) this.#host.mpscIdle(this as MpscAnchor<unknown>);
    }
  }

  #closeFeeds(error: LanemuxError, clear: boolean): void {
    for (const feed of this.#feeds.values()) {
      feed.ended = true;
      feed.release?.(error);
      if (clear) feed.buffer.clear();
      feed.buffer.close();
      feed.suspended = false;
      if (feed.next !== null) for (const b of feed.next) b.buffer.clear();
      feed.next = null;
    }
    this.#feeds.clear();
    this.#ready = [];
    this.#readyHead = 0;
  }

  #finish(cancelled: boolean): void {
    if (this.#done) return;
    this.#done = true;
    this.#host.mpscDone(this as MpscAnchor<unknown>, cancelled);
  }

  /**
   * Cancel the anchor: every sender's slot closes (`CloseSlot{UnknownSlot}` with
   * `LifecycleSlot{cancel}` on the mux, so its next `send()` fails `ERR_STREAM_CANCELLED`; the
   * connection on the per-stream path is reset); unread records are
   * discarded and the anchor is forgotten. Idempotent.
   */
  cancel(): void {
    if (this.finished) return;
    this.#finish(true);
    // The cancel's LifecycleSlot goes with each sender's CloseSlot, so every producer learns
    // ERR_STREAM_CANCELLED, as a plain anchor's does, not a bare UnknownSlot.
    for (const feed of this.#feeds.values()) if (!feed.ended) feed.lifecycle?.(true);
    this.#closeFeeds(new StreamError('ERR_STREAM_CANCELLED', 'the consumer cancelled the MPSC stream'), true);
    this.#wake();
  }

  /** Ask every sender to stop (mux senders' `stopSignal` fires; they may still send and finalize). Idempotent. */
  requestStop(): void {
    if (this.finished) return;
    for (const feed of this.#feeds.values()) feed.lifecycle?.(false);
  }
}
