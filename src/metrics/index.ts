/**
 * Metrics with the reference's series names, their Prometheus text, and HTTP handlers serving it
 * (`lanemux/otel` has the OpenTelemetry bridge).
 *
 * @packageDocumentation
 */
export { MuxMetrics, DropReason, WakeSource } from './mux-metrics.ts';
export type { MuxMetricsOptions } from './mux-metrics.ts';
export { Histogram, RECORDS_PER_BATCH_BUCKETS } from './histogram.ts';
export { toFamilies, toPrometheusText, parseSeries, PROMETHEUS_CONTENT_TYPE } from './exposition.ts';
export type { MetricFamily, MetricKind, MetricSample, MetricsSource } from './exposition.ts';
export { prometheusHandler, prometheusText, nodePrometheusListener } from './prometheus-handler.ts';
export type { PrometheusHandlerOptions, NodeRequestLike, NodeResponseLike } from './prometheus-handler.ts';
