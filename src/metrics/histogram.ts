/** A fixed-bucket histogram: `observe` is a short scan over a small array, no allocation. */
export class Histogram {
  readonly bounds: readonly number[];
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    this.counts[i]! += 1;
    this.sum += value;
    this.count += 1;
  }

  /** Mean of the observations (0 when empty). */
  mean(): number {
    return this.count === 0 ? 0 : this.sum / this.count;
  }
}

/** Buckets of `records_per_batch`: 1, 2, 4 … 2,048 (12). */
export const RECORDS_PER_BATCH_BUCKETS: readonly number[] = Array.from({ length: 12 }, (_, i) => 2 ** i);
