/**
 * Receive-window auto-tuning of one ingress slot (docs/protocol.md §10.7.1): {@link AutoWindow}.
 *
 * A static window of C records caps one stream at ≈ C × record / RTT. Like TCP/QUIC receive-window
 * auto-tuning, the receiver measures how fast its consumer drains the slot and the round trip of
 * credit, and grows the window it grants toward the bandwidth-delay product, within the slot byte
 * budget and the peer window, shrinking back while the node's receive window is nearly full.
 *
 * Pure: no timers; every call takes `now` (ms) from the caller's clock. The wire is unchanged: a
 * larger window is only a larger grant in an ordinary CreditUpdate, and a smaller one is credit the
 * receiver keeps instead of granting it back.
 */
import { assertCount } from './count.ts';
import { MAX_CREDIT } from './constants.ts';
import { CreditError } from './errors.ts';

/** Largest window {@link AutoWindow} grows to by default, in records. */
export const DEFAULT_AUTO_MAX_RECORDS = 65_536;
/** Receive-window fill (held / size) at or above which windows shrink. */
export const AUTO_SHRINK_FILL = 0.75;
/** Receive-window fill below which windows may grow. */
export const AUTO_GROW_FILL = 0.5;
/**
 * A window its consumer drains in less than this many ms grows too, round trip or not: such a stream
 * costs a grant (a CreditUpdate each way to encode, apply and write) every few ms, and a window twice
 * as large halves them. Memory stays bounded by the caps and by the receive window (which shrinks it).
 * 32, not 8: in lockstep (one token per stream per pass, a pass every 0.3–1 ms) a window of 32 drains
 * in 10–30 ms, so at 8 it never grew, and the grant batches, each a socket write, cost the receiver
 * about half as much as its own per-token work (a profile at 256 streams over 16 peers). A stream at an
 * LLM's pace (tens of tokens a second) drains C far more slowly and keeps it.
 */
export const AUTO_FAST_EPOCH_MS = 32;

/** Options of {@link AutoWindow}. */
export interface AutoWindowOptions {
  /** The slot byte budget: the window never exceeds it in bytes of the records seen. Must be ≥ 1. */
  readonly byteBudget: number;
  /** Hard cap in records. Defaults to {@link DEFAULT_AUTO_MAX_RECORDS}. */
  readonly maxRecords?: number | undefined;
}

/**
 * One slot's tuned window, from `base` (the advertised C; never below it) up to the smallest of
 * `maxRecords`, `byteBudget / record size` and half the peer window over the record size.
 *
 * Growth (after QUIC's auto-tuning): each time the consumer has drained a whole window, if that took
 * less than two credit round trips the window, not the consumer, limits the stream, so it doubles.
 * A slow consumer drains a window more slowly and the window stays. The credit round trip is
 * sampled from a grant that found the sender without credit to the next arrival it unlocks.
 *
 * Calls are per grant and per drain visit, never per record, and allocate nothing.
 */
export class AutoWindow {
  /** The advertised C: the floor. */
  readonly base: number;
  readonly byteBudget: number;
  readonly maxRecords: number;
  #window: number;
  /** Smoothed credit round trip, ms; -1 until sampled. */
  #srtt = -1;
  /** Time of a grant sent while the sender had no credit, awaiting its first arrival; -1 if none. */
  #probeAt = -1;
  #epochStart: number;
  #epochRecords = 0;
  /** Smoothed record size, bytes (0 until a record is drained). */
  #recordBytes = 0;
  #lastShrink = Number.NEGATIVE_INFINITY;

  /**
   * @param base - the advertised C, 1..2^32−1.
   * @param now - the clock at open, ms.
   * @param options - the byte budget and the cap.
   */
  constructor(base: number, now: number, options: AutoWindowOptions) {
    assertCount(base, 'base');
    assertCount(options.byteBudget, 'byteBudget');
    const maxRecords = options.maxRecords ?? DEFAULT_AUTO_MAX_RECORDS;
    assertCount(maxRecords, 'maxRecords');
    if (base === 0 || base > MAX_CREDIT || options.byteBudget === 0) {
      throw new CreditError('ERR_INVALID_ARGUMENT', 'base must be 1..2^32-1 and byteBudget at least 1');
    }
    this.base = base;
    this.byteBudget = options.byteBudget;
    this.maxRecords = Math.min(MAX_CREDIT, Math.max(base, maxRecords));
    this.#window = base;
    this.#epochStart = now;
  }

  /** The window wanted now, in records. */
  get records(): number {
    return this.#window;
  }

  /** Records still to be consumed before the current epoch ends (a window's worth is drained): 0 when it has. */
  get epochLeft(): number {
    const left = this.#window - this.#epochRecords;
    return left > 0 ? left : 0;
  }

  /** Smoothed credit round trip in ms, or -1 before the first sample. */
  get rtt(): number {
    return this.#srtt;
  }

  /** Smoothed size of the records drained, in bytes (0 before any). */
  get recordBytes(): number {
    return this.#recordBytes;
  }

  /**
   * A grant is being sent. `starved`: the sender had no credit left (every record it could send has
   * arrived), so the next arrival measures the credit round trip.
   */
  granted(now: number, starved: boolean): void {
    if (starved && this.#probeAt < 0) this.#probeAt = now;
  }

  /** A round-trip probe is open: the next arrival is a sample (until then {@link arrived} needs no clock). */
  get probing(): boolean {
    return this.#probeAt >= 0;
  }

  /** Records arrived (once per batch, not per record): closes an open round-trip probe. */
  arrived(now: number): void {
    const at = this.#probeAt;
    if (at < 0) return;
    this.#probeAt = -1;
    const sample = now > at ? now - at : 0;
    this.#srtt = this.#srtt < 0 ? sample : this.#srtt + (sample - this.#srtt) / 8;
  }

  /** The consumer took `records` records of `bytes` bytes in all. */
  consumed(records: number, bytes: number): void {
    if (records <= 0) return;
    this.#epochRecords += records;
    const size = bytes / records;
    // Rising sizes count at once (the byte cap must hold for big records), falling ones slowly.
    this.#recordBytes = size >= this.#recordBytes ? size : this.#recordBytes + (size - this.#recordBytes) / 8;
  }

  /** The largest window the budgets allow now, in records (never below {@link base}). */
  cap(peerWindowBytes: number): number {
    const size = this.#recordBytes > 1 ? this.#recordBytes : 1;
    let cap = Math.floor(this.byteBudget / size);
    // Half the peer window: one stream must leave room for the others sharing the link.
    const peer = Math.floor(peerWindowBytes / 2 / size);
    if (peer < cap) cap = peer;
    if (this.maxRecords < cap) cap = this.maxRecords;
    return cap > this.base ? cap : this.base;
  }

  /**
   * Decides the window at a drain visit or grant.
   *
   * @param now - the clock, ms.
   * @param fill - the node's receive window for this peer, held / size (0 when it limits nothing).
   * @param peerWindowBytes - that window's size in bytes (`Infinity` when none is advertised).
   * @returns the window wanted now, in records ({@link base}..{@link cap}).
   */
  retarget(now: number, fill: number, peerWindowBytes: number): number {
    const cap = this.cap(peerWindowBytes);
    let w = this.#window;
    if (fill >= AUTO_SHRINK_FILL) {
      // Memory pressure: halve, at most once per round trip so one full moment does not collapse it.
      const spacing = this.#srtt > 1 ? this.#srtt : 1;
      if (w > this.base && now - this.#lastShrink >= spacing) {
        w = Math.max(this.base, Math.floor(w / 2));
        this.#lastShrink = now;
      }
      this.#newEpoch(now);
    } else if (this.#epochRecords >= w) {
      const elapsed = now - this.#epochStart;
      if (fill < AUTO_GROW_FILL && ((this.#srtt >= 0 && elapsed < 2 * this.#srtt) || elapsed < AUTO_FAST_EPOCH_MS))
        w = w * 2;
      this.#newEpoch(now);
    }
    if (w > cap) w = cap;
    // Leaving the floor takes a step of more than `base` (to 2·base + 1) or none: the grant then lifts
    // the sender's credit past C, which is how a resumable producer learns that grants no longer mean
    // only records consumed and keeps its replay ring by bytes, not by credit (docs/protocol.md §8.3).
    const base = this.base;
    if (this.#window === base && w > base && w <= 2 * base) w = cap > 2 * base ? 2 * base + 1 : base;
    this.#window = w;
    return w;
  }

  #newEpoch(now: number): void {
    this.#epochStart = now;
    this.#epochRecords = 0;
  }
}
