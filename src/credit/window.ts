/**
 * The receiver side of the credit model: {@link Window}.
 */
import { assertCount, checkedAdd } from './count.ts';

/** Answer of {@link Window.arrive}. */
export const Arrival = {
  /** The record was within the window. */
  Accepted: 'accepted',
  /** Nothing was left of the granted window: the stream fails with `CREDIT_VIOLATION` (L12). */
  Violation: 'violation',
} as const;
/** Answer of {@link Window.arrive}. */
export type Arrival = (typeof Arrival)[keyof typeof Arrival];

/** `max(1, ⌊w/2⌋)`: the grant threshold of a window of `w` (w = 0..3 → 1, w = 32 → 16). */
export function batchFor(window: number): number {
  return Math.max(1, Math.floor(window / 2));
}

/**
 * The receiver's count of one stream's window.
 *
 * - `remaining`: what the sender may still send, as the receiver counts it.
 * - `pending`: consumed but not yet granted back.
 * - `batch`: the grant threshold, `max(1, ⌊w/2⌋)`.
 *
 * Grants are returned as numbers (0 = send no CreditUpdate). Before any blocking wait the owner must call
 * {@link Window.flush} and send what it returns (the flush-before-block corollary of L10).
 */
export class Window {
  #remaining: number;
  #pending = 0;
  #batch: number; // fixed at open; assigned again only by clone()

  /**
   * `opened(w)`: `remaining = w`, `pending = 0`, `batch = max(1, ⌊w/2⌋)`.
   *
   * @param window - the negotiated window, a safe natural number.
   */
  constructor(window: number) {
    assertCount(window, 'window');
    this.#remaining = window;
    this.#batch = batchFor(window);
  }

  /** What the sender may still send, as this receiver counts it. */
  get remaining(): number {
    return this.#remaining;
  }

  /** Consumed, not yet granted back. */
  get pending(): number {
    return this.#pending;
  }

  /** The grant threshold. */
  get batch(): number {
    return this.#batch;
  }

  /** One record arrived: `violation` (window unchanged) when nothing remains, else `accepted` with `remaining − 1`. */
  arrive(): Arrival {
    if (this.#remaining === 0) return Arrival.Violation;
    this.#remaining -= 1;
    return Arrival.Accepted;
  }

  /**
   * One record was consumed: `pending + 1`. Once `pending ≥ batch` everything pending is granted at once (a
   * flush); otherwise the grant is 0.
   *
   * @returns the grant to send now (0 = none).
   */
  consume(): number {
    this.#pending = checkedAdd(this.#pending, 1, 'pending credit');
    return this.#batch <= this.#pending ? this.flush() : 0;
  }

  /**
   * Grants everything pending: `remaining += pending`, `pending = 0`. With nothing pending it grants 0, and no
   * CreditUpdate should be sent.
   *
   * @returns the grant to send now (0 = none).
   */
  flush(): number {
    const grant = this.#pending;
    this.#remaining = checkedAdd(this.#remaining, grant, 'window');
    this.#pending = 0;
    return grant;
  }

  /**
   * A record that only continues an item already begun is granted back at once: grant 1, `remaining + 1`,
   * `pending` unchanged. Without it an item longer than the window could never finish arriving.
   *
   * @returns the grant to send now (always 1).
   */
  continued(): number {
    this.#remaining = checkedAdd(this.#remaining, 1, 'window');
    return 1;
  }

  /** An independent copy of this state (for model exploration and snapshots). */
  clone(): Window {
    const copy = new Window(0);
    copy.#remaining = this.#remaining;
    copy.#pending = this.#pending;
    copy.#batch = this.#batch;
    return copy;
  }
}
