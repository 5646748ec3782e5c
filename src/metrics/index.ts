/**
 * Metrics with the reference's series names.
 *
 * @packageDocumentation
 */
export { MuxMetrics, DropReason, WakeSource } from './mux-metrics.ts';
export type { MuxMetricsOptions } from './mux-metrics.ts';
export { Histogram, RECORDS_PER_BATCH_BUCKETS } from './histogram.ts';
