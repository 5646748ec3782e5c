/**
 * How many free buffers a recycler (a pool that hands buffers out and takes them back once their
 * user is done) keeps: as many as its users held at once at their busiest, less those still held,
 * within a floor and a ceiling; back to the floor once every buffer has come back (the users went
 * idle). A fixed count either lets a busy moment's buffers go to the collector, to be allocated and
 * zeroed again a moment later, or keeps a quiet one's memory for good. Pure counting: the recycler
 * keeps the buffers.
 */
export class WorkingSet {
  /** Free buffers kept however few were held. */
  readonly floor: number;
  /** Most buffers, held and free together, the recycler keeps room for. */
  readonly ceiling: number;
  /** Buffers handed out and not yet back. */
  #lent = 0;
  /** The most handed out at once since every buffer last came back (floor ≤ peak ≤ ceiling). */
  #peak: number;

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
   * floor, or the busiest moment's count less those still out if that is more. A buffer that was
   * never handed out (given back twice) counts as back too, so the answer errs small.
   */
  gave(): number {
    if (this.#lent > 0) this.#lent--;
    if (this.#lent === 0) this.#peak = this.floor;
    const room = this.#peak - this.#lent;
    return room > this.floor ? room : this.floor;
  }
}
