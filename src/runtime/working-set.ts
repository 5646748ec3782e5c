/**
 * How many free buffers a recycler (a pool that hands buffers out and takes them back once their
 * user is done) keeps: as many as its users held at once at their busiest lately, less those still
 * held, within a floor and a ceiling. A fixed count either lets a busy moment's buffers go to the
 * collector, to be allocated and zeroed again a moment later, or keeps a quiet one's memory for good.
 * "Lately": the busiest count falls by one for each peak's worth of buffers given back while fewer
 * than half of it are out, and to the floor once every buffer is back, so a recycler whose users
 * went quiet (or hold a few buffers for good) lets the rest go as traffic comes and goes. Pure counting: the recycler keeps the
 * buffers.
 */
export class WorkingSet {
  /** Free buffers kept however few were held. */
  readonly floor: number;
  /** Most free buffers the recycler keeps, however many are held (the busiest count never passes it). */
  readonly ceiling: number;
  /** Buffers handed out and not yet back. */
  #lent = 0;
  /** The most handed out at once lately (floor ≤ peak ≤ ceiling). */
  #peak: number;
  /** Buffers given back while fewer than half the peak were out, since the peak last fell. */
  #quiet = 0;

  constructor(floor: number, ceiling: number) {
    this.floor = floor;
    this.ceiling = Math.max(floor, ceiling);
    this.#peak = floor;
  }

  /** Buffers handed out and not yet back. */
  get lent(): number {
    return this.#lent;
  }

  /** A buffer was handed out (kept or new). */
  took(): void {
    const n = ++this.#lent;
    if (n > this.#peak) this.#peak = n < this.ceiling ? n : this.ceiling;
  }

  /**
   * A buffer came back: how many free buffers the recycler may hold now, this one included: the
   * floor, or the busiest count less those still out if that is more. Every call counts one buffer
   * back: the recycler must not call it twice for one buffer.
   */
  gave(): number {
    if (this.#lent > 0) this.#lent--;
    if (this.#lent === 0) {
      this.#peak = this.floor;
      this.#quiet = 0;
    } else if (this.#peak > this.floor && this.#peak > 2 * this.#lent && ++this.#quiet >= this.#peak) {
      // A busy cycle gives back about a peak's worth and takes it again: the peak holds through it.
      this.#peak--;
      this.#quiet = 0;
    }
    const room = this.#peak - this.#lent;
    return room > this.floor ? room : this.floor;
  }
}
