/**
 * Live sources that cannot stall (docs/protocol.md §10.9 "Overruns"): the sender-side queue of a
 * stream opened with `overrun: 'drop-oldest'` or `'fail'`. Its port is told to pause at the first
 * record that finds no credit, so what waits for credit waits here: at most `overrunLimit`
 * records, in a fixed ring. One more record is an overrun: `drop-oldest` evicts the oldest and the
 * next record delivered carries a gap marker (`{ dropped, durationMs }`, a `SenderError` record of
 * a reserved text that old peers read as an ordinary sender error); `fail` ends the stream with
 * `ERR_FEED_OVERRUN`. Never unbounded buffering, never a silent loss. Streams with the default
 * `'block'` never make one of these.
 */
import { ConfigError } from '../errors.ts';
import { StreamError } from './errors.ts';
import type { MuxMetrics } from '../metrics/mux-metrics.ts';
import { FrameKind } from '../wire/frame.ts';
import { Offer, type SenderPort } from './port.ts';

/**
 * What a stream's sender does when its records outrun the consumer's credit: `'block'` makes
 * `send()` wait (back-pressure); `'drop-oldest'` drops the oldest waiting record and tells the
 * consumer with a gap marker; `'fail'` ends the stream with `ERR_FEED_OVERRUN`.
 */
export type OverrunPolicy = 'block' | 'drop-oldest' | 'fail';

/** Default of `overrunLimit`: records a live stream's sender keeps waiting for credit. */
export const DEFAULT_OVERRUN_LIMIT = 256;
/** Largest `overrunLimit`. */
export const MAX_OVERRUN_LIMIT = 65_536;

/** What the consumer learns before the first record after a gap: what was dropped, and the stretch it covered. */
export interface GapMarker {
  /** Records the producer dropped right before this one. */
  readonly dropped: number;
  /** Milliseconds, on the producer's clock, from the send of the first dropped record to the send of this one. */
  readonly durationMs: number;
}

/** Text of a gap marker's `SenderError` record (docs/protocol.md §10.9). */
const GAP_PREFIX = 'lanemux-gap: ';
const GAP_TEXT = /^lanemux-gap: ([0-9]{1,15}) dropped over ([0-9]{1,15}) ms$/;

/** The `SenderError` text that carries a gap marker. */
export function gapText(dropped: number, durationMs: number): string {
  return `${GAP_PREFIX}${dropped} dropped over ${durationMs} ms`;
}

/** The gap marker a `SenderError` text carries, or null for an ordinary sender error. */
export function parseGap(text: unknown): GapMarker | null {
  if (typeof text !== 'string' || !text.startsWith(GAP_PREFIX)) return null;
  const m = GAP_TEXT.exec(text);
  return m === null ? null : { dropped: Number(m[1]), durationMs: Number(m[2]) };
}

/** Two markers with no record between them (a marker whose record was dropped too): one gap. */
export function mergeGap(a: GapMarker | null, b: GapMarker): GapMarker {
  return a === null ? b : { dropped: a.dropped + b.dropped, durationMs: a.durationMs + b.durationMs };
}

/** A `TransportError` text starting with this ends the stream with `ERR_FEED_OVERRUN` at a lanemux consumer. */
export const FEED_OVERRUN_PREFIX = 'ERR_FEED_OVERRUN: ';

/**
 * A `TransportError` frame's error at a consumer: `ERR_FEED_OVERRUN` when a live producer's
 * `overrun: 'fail'` ended the stream, else `ERR_TRANSPORT_ERROR`.
 */
export function transportError(value: unknown): StreamError {
  const text = String(value);
  return text.startsWith(FEED_OVERRUN_PREFIX)
    ? new StreamError('ERR_FEED_OVERRUN', text.slice(FEED_OVERRUN_PREFIX.length))
    : new StreamError('ERR_TRANSPORT_ERROR', text);
}

/** A live stream's policy and limit. */
export interface LiveFeedOptions {
  readonly policy: 'drop-oldest' | 'fail';
  readonly limit: number;
}

/**
 * The live-feed options of an attach or open, validated; null for `'block'` (the default). A bad
 * value throws one `ConfigError` naming the field.
 */
export function liveFeedOptions(
  options: { readonly overrun?: unknown; readonly overrunLimit?: unknown },
  where: string,
): LiveFeedOptions | null {
  const { overrun, overrunLimit } = options;
  if (overrun !== undefined && overrun !== 'block' && overrun !== 'drop-oldest' && overrun !== 'fail') {
    throw new ConfigError('overrun', `overrun must be 'block', 'drop-oldest' or 'fail', not ${String(overrun)}`, {
      where,
    });
  }
  if (
    overrunLimit !== undefined &&
    (typeof overrunLimit !== 'number' ||
      !Number.isInteger(overrunLimit) ||
      overrunLimit < 1 ||
      overrunLimit > MAX_OVERRUN_LIMIT)
  ) {
    throw new ConfigError(
      'overrunLimit',
      `overrunLimit must be an integer from 1 to ${MAX_OVERRUN_LIMIT}, not ${String(overrunLimit)}`,
      { where },
    );
  }
  if (overrun === undefined || overrun === 'block') return null;
  return { policy: overrun, limit: (overrunLimit as number | undefined) ?? DEFAULT_OVERRUN_LIMIT };
}

/** What a live feed needs from its node: its clock and metrics. */
export interface LiveFeedHost {
  readonly runtime: { now(): number };
  readonly metrics: MuxMetrics;
}

/** `offer` answer of a `'fail'` feed one record past its limit: the stream must end. */
export const OVERRUN = -1;

/** The sender-side queue of one live stream. */
export class LiveFeed {
  readonly policy: 'drop-oldest' | 'fail';
  readonly limit: number;
  /** Records this stream dropped (`drop-oldest`) or refused (`fail`). */
  overruns = 0;
  readonly #port: SenderPort;
  readonly #host: LiveFeedHost;
  // The ring, made at the first record that waits.
  #kinds: Uint8Array | null = null;
  #values: unknown[] | null = null;
  #times: Float64Array | null = null;
  #head = 0;
  #count = 0;
  /** The gap in front of the ring's head: records dropped, and when the first of them was sent. */
  #dropped = 0;
  #gapFrom = 0;
  /** A terminal waiting behind the ring (a FrameKind; -1: none), and who waits for its handover. */
  #terminal = -1;
  #handedOver: { resolve: () => void; reject: (e: unknown) => void } | null = null;
  #waiting = false;
  #closed = false;

  constructor(options: LiveFeedOptions, port: SenderPort, host: LiveFeedHost) {
    this.policy = options.policy;
    this.limit = options.limit;
    this.#port = port;
    this.#host = host;
    // Records wait here, not in the port: it pauses at the first one without credit.
    port.holdBack?.(0);
  }

  /** Records waiting for credit. */
  get queued(): number {
    return this.#count;
  }

  /**
   * Hand a non-terminal record on, or queue it: `Offer.Ok`, `Offer.Closed`, or {@link OVERRUN}
   * (a `'fail'` feed at its limit; nothing was taken).
   */
  offer(kind: number, value: unknown): number {
    if (this.#closed) return Offer.Closed;
    const port = this.#port;
    if (this.#count === 0 && !port.paused) {
      const r = port.offer(kind, value);
      if (r === Offer.Ok) return Offer.Ok;
      if (r === Offer.Wait) {
        this.#watch();
        return Offer.Ok;
      }
      if (r === Offer.Closed) return r;
      // Refused (the port at its hard cap): it waits here instead.
    }
    if (this.#count === this.limit) {
      this.overruns++;
      this.#host.metrics.overruns++;
      if (this.policy === 'fail') return OVERRUN;
      this.#evict();
    }
    this.#push(kind, value);
    this.#watch();
    return Offer.Ok;
  }

  /**
   * The producer's terminal: null when nothing waits (the caller offers it at once), else a promise
   * that settles once it was handed on behind the waiting records.
   */
  endAfter(kind: number): Promise<void> | null {
    if (this.#count === 0 || this.#closed) return null;
    this.#terminal = kind;
    return new Promise((resolve, reject) => (this.#handedOver = { resolve, reject }));
  }

  /** The stream ended (closed, cancelled, failed): drop what waits. Idempotent. */
  close(error: unknown = null): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#values !== null) this.#values.fill(undefined);
    this.#count = 0;
    const h = this.#handedOver;
    this.#handedOver = null;
    if (h !== null) h.reject(error);
  }

  #push(kind: number, value: unknown): void {
    if (this.#kinds === null) {
      this.#kinds = new Uint8Array(this.limit);
      this.#values = new Array<unknown>(this.limit);
      this.#times = new Float64Array(this.limit);
    }
    const i = (this.#head + this.#count) % this.limit;
    this.#kinds[i] = kind;
    this.#values![i] = value;
    this.#times![i] = this.#host.runtime.now();
    this.#count++;
  }

  #shift(): void {
    this.#values![this.#head] = undefined;
    this.#head = this.#head + 1 === this.limit ? 0 : this.#head + 1;
    this.#count--;
  }

  /** Drop the oldest waiting record into the gap in front of the head. */
  #evict(): void {
    if (this.#dropped === 0) this.#gapFrom = this.#times![this.#head]!;
    this.#dropped++;
    this.#shift();
  }

  /** Pump once the port may take records again (one wait per pause, not per record). */
  #watch(): void {
    if (this.#waiting || this.#closed) return;
    this.#waiting = true;
    this.#port.waitWritable().then(this.#pump, this.#lost);
  }

  readonly #lost = (e: unknown): void => {
    this.#waiting = false;
    this.close(e);
  };

  readonly #pump = (): void => {
    this.#waiting = false;
    if (this.#closed) return;
    const port = this.#port;
    while (this.#count > 0 && !port.paused) {
      if (this.#dropped > 0) {
        const ms = Math.max(0, Math.round(this.#times![this.#head]! - this.#gapFrom));
        const r = port.offer(FrameKind.SenderError, gapText(this.#dropped, ms));
        if (r === Offer.Closed) return this.close();
        if (r === Offer.Refused) break;
        this.#dropped = 0;
      }
      // The marker may have paused the port: its record still goes (the port takes it and waits).
      const r = port.offer(this.#kinds![this.#head]!, this.#values![this.#head]);
      if (r === Offer.Closed) return this.close();
      if (r === Offer.Refused) break;
      this.#shift();
    }
    if (this.#count > 0) {
      this.#watch();
      return;
    }
    if (this.#terminal >= 0) {
      // A port always takes a terminal.
      const r = port.offer(this.#terminal, undefined);
      this.#terminal = -1;
      const h = this.#handedOver;
      this.#handedOver = null;
      this.#closed = true;
      if (h !== null) {
        if (r === Offer.Closed) h.reject(port.closeError);
        else h.resolve();
      }
    }
  };
}
