/**
 * The peer-level byte window (HTTP/2's connection window): how many bytes of Data-record bodies one
 * peer may have in flight toward another, across all lanes and slots. Pure bookkeeping: no timers,
 * no I/O; the mux decides when to send the updates these classes ask for.
 *
 * - The receiver advertises a window W in its HELLO. The sender's {@link SendWindow} counts the
 *   bytes it sent and the receiver has not released yet; a record is sent only if it fits (or if
 *   nothing is in flight, so a record larger than W can never deadlock).
 * - The receiver's {@link ReceiveWindow} counts the bytes it holds (slot buffers, holds, unread
 *   records of retired slots) and the bytes it released but has not reported yet; it says when a
 *   report (a window update) is due.
 */
import { assertCount } from './count.ts';

/** Sender side: bytes in flight toward one peer on one link. Allocation-free. */
export class SendWindow {
  /** The receiver's window in bytes; `Infinity` when it advertised none (no limit). */
  size: number;
  /** Bytes sent (or staged to send) and not yet released by the receiver. */
  inflight = 0;

  /** @param size - the receiver's window in bytes. Defaults to `Infinity` (no limit). */
  constructor(size = Number.POSITIVE_INFINITY) {
    this.size = size;
  }

  /** False when the receiver advertised no window: nothing is counted. */
  get limited(): boolean {
    return this.size !== Number.POSITIVE_INFINITY;
  }

  /** True if a body of `bytes` may go now: it fits, or nothing is in flight. */
  fits(bytes: number): boolean {
    return this.inflight === 0 || this.inflight + bytes <= this.size;
  }

  /** True while some body could go (the window is not full). */
  get hasRoom(): boolean {
    return this.inflight < this.size;
  }

  /** Count `bytes` as in flight. */
  charge(bytes: number): void {
    this.inflight += bytes;
  }

  /** Take back `bytes` that were charged but never sent (a discarded or refused batch). Clamped at 0. */
  uncharge(bytes: number): void {
    this.inflight = bytes < this.inflight ? this.inflight - bytes : 0;
  }

  /**
   * The receiver released `bytes`. Returns how many bytes it released beyond what is in flight
   * (0 for a correct peer; more is a protocol error, and in-flight is clamped at 0).
   */
  release(bytes: number): number {
    assertCount(bytes, 'bytes');
    if (bytes <= this.inflight) {
      this.inflight -= bytes;
      return 0;
    }
    const over = bytes - this.inflight;
    this.inflight = 0;
    return over;
  }

  /** A new link: nothing in flight, the new link's window. */
  reset(size: number): void {
    this.size = size;
    this.inflight = 0;
  }
}

/**
 * Receiver side: bytes held for one peer on one link, and released bytes not yet reported.
 *
 * A report is due when `unreported > 0` and one of:
 * 1. `unreported ≥ W/4` — the common, coalesced case;
 * 2. `held + unreported > W − maxBatch` — the sender may be blocked.
 * Both are checked on every arrival as well as on every release.
 *
 * Why condition 2 releases every blocked sender whose next record fits a batch (body `b ≤ maxBatch`):
 * the sender's in-flight count is `I = held + unreported + (bytes in transit either way)`; once
 * in-transit data has landed and in-transit updates are applied, `I = held + unreported`. Blocked
 * means `I > 0` and `I + b > W`, so `held + unreported > W − maxBatch`. If `unreported > 0`, the
 * event (arrival or release) that made this true found condition 2 and sent the update. If
 * `unreported = 0`, then `I = held`: only the consumer can make room, and its next take moves bytes
 * from held to unreported, leaving `held + unreported = I > W − maxBatch`, so that take is reported
 * at once. A blocked sender thus never waits on bytes this receiver released and kept to itself.
 * A rendezvous singleton (larger than a batch) can be blocked with neither condition true; the
 * mux's sweep reports any leftover `unreported` as a backstop ({@link ReceiveWindow.pending}), so it
 * waits at most one sweep interval. (A "held = 0" condition would cover part of that case sooner,
 * at the price of an update per batch for a consumer that keeps up with a trickle.)
 */
/**
 * Toward a peer that advertised no window, what a receiver holds for it is still bounded: this many
 * windows (plus one batch). Large enough for an older honest peer's ordinary loads, finite for a
 * hostile one that leaves the field out.
 */
export const LEGACY_WINDOW_FACTOR = 4;

export class ReceiveWindow {
  /** The window this receiver advertised, in bytes. */
  readonly size: number;
  /** The largest batch the sender can deliver (bounds one record). */
  readonly maxBatch: number;
  /** The sender honours the window (both sides advertised one): reports are sent and overruns faulted. */
  readonly active: boolean;
  /** Bytes held now: in slot buffers, in holds, in unread buffers of retired slots. */
  held = 0;
  /** Bytes released (taken, discarded, or dropped on arrival) and not yet reported. */
  unreported = 0;
  /** The most bytes held at once on this link. */
  peak = 0;
  readonly #limit: number;
  readonly #quarter: number;
  readonly #tight: number;

  /**
   * @param size - the advertised window W, ≥ 1.
   * @param maxBatch - the largest batch the peer can send (its max message size toward us).
   * @param active - both sides advertised a window: reports are due and overruns count.
   */
  constructor(size: number, maxBatch: number, active: boolean) {
    assertCount(size, 'size');
    assertCount(maxBatch, 'maxBatch');
    this.size = size;
    this.maxBatch = maxBatch;
    this.active = active;
    // Inactive (the peer advertised no window, an older build — or a hostile peer that left it out):
    // no report is ever due, and the peer keeps today's credit-only behaviour up to a finite bound,
    // LEGACY_WINDOW_FACTOR windows, past which its overrunning stream is closed.
    this.#limit = active ? size + maxBatch : LEGACY_WINDOW_FACTOR * size + maxBatch;
    this.#quarter = active ? Math.max(1, Math.floor(size / 4)) : Number.POSITIVE_INFINITY;
    this.#tight = active ? size - maxBatch : Number.POSITIVE_INFINITY;
  }

  /**
   * True if holding `bytes` more would exceed the window plus one batch while something is already
   * held (a correct sender never does that: with nothing in flight it may send one record of any size).
   */
  overruns(bytes: number): boolean {
    return this.held > 0 && this.held + bytes > this.#limit;
  }

  /**
   * `bytes` entered a slot buffer or a hold. Returns true when a report is due: an arrival can make
   * condition 2 true for bytes released earlier, with no release to come.
   */
  charge(bytes: number): boolean {
    const held = this.held + bytes;
    this.held = held;
    if (held > this.peak) this.peak = held;
    // An arrival leaves `unreported` as it was: only condition 2 can have become true.
    const u = this.unreported;
    return u > 0 && held + u > this.#tight;
  }

  /** `bytes` held left (taken by the consumer or discarded). Returns true when a report is due. */
  release(bytes: number): boolean {
    this.held = bytes < this.held ? this.held - bytes : 0;
    this.unreported += bytes;
    return this.due;
  }

  /**
   * `bytes` arrived and were not kept: dropped on arrival, or taken at once by a reader waiting on
   * an empty slot (never held). Returns true when a report is due.
   */
  dropped(bytes: number): boolean {
    this.unreported += bytes;
    return this.due;
  }

  /** A report is due now (see the class comment for the conditions). */
  get due(): boolean {
    const u = this.unreported;
    return u > 0 && (u >= this.#quarter || this.held + u > this.#tight);
  }

  /** Something is released and unreported (the sweep's backstop sends it). */
  get pending(): boolean {
    return this.active && this.unreported > 0;
  }

  /**
   * True if a sender blocked on a record of up to `largest` bytes could be waiting on this window:
   * `0 < held + unreported` and `held + unreported > W − largest` (the watchdog does not count such
   * windows as dead).
   */
  mayBlock(largest: number): boolean {
    const used = this.held + this.unreported;
    // With nothing held or owed, the sender's in-flight count is (about to be) 0: anything fits.
    return this.active && used > 0 && used > this.size - largest;
  }

  /** Take the bytes to report in an update (0 if none). */
  takeReport(): number {
    const n = this.unreported;
    this.unreported = 0;
    return n;
  }
}
