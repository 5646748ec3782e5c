/**
 * lanemux metrics as OpenTelemetry instruments (`lanemux/otel`). Every family of `node.metrics()`
 * becomes an asynchronous instrument read in one batch callback per collection, so the hot paths keep
 * bumping plain fields and OpenTelemetry costs nothing between collections.
 *
 * Names keep the reference's, so dashboards built on them map over: a counter's instrument is its
 * family name without `_total` (an OpenTelemetry → Prometheus exporter adds the suffix back), a gauge
 * keeps its name, and a histogram (OpenTelemetry has no asynchronous histogram) is three counters:
 * `<name>_bucket` (cumulative, attribute `le`), `<name>_sum` and `<name>_count`. Labels become attributes.
 * `@opentelemetry/api` is an optional peer dependency; this module imports only its types.
 */
import type { BatchObservableResult, Meter, Observable, ObservableCounter, ObservableGauge } from '@opentelemetry/api';
import { collect, type MetricsSource, toFamilies } from './exposition.ts';

/** What {@link observeWithOpenTelemetry} returns. */
export interface OpenTelemetryBinding {
  /** The instrument names registered so far (families that appear later are added at the next collection). */
  readonly instruments: readonly string[];
  /** Stop observing: the batch callbacks are removed from the meter. */
  close(): void;
}

/** Options of {@link observeWithOpenTelemetry}. */
export interface OpenTelemetryOptions {
  /** Extra attributes on every observation (for example `{ 'service.instance.id': … }`). Defaults to none. */
  readonly attributes?: Readonly<Record<string, string | number | boolean>>;
}

type Instrument = ObservableCounter | ObservableGauge;

/**
 * Expose one or more nodes' metrics through an OpenTelemetry `Meter`
 * (`observeWithOpenTelemetry(node, metrics.getMeter('lanemux'))`).
 */
export function observeWithOpenTelemetry(
  sources: MetricsSource | readonly MetricsSource[],
  meter: Meter,
  options: OpenTelemetryOptions = {},
): OpenTelemetryBinding {
  const extra = options.attributes ?? {};
  const instruments = new Map<string, Instrument>();
  const names: string[] = [];
  let registered: Observable[] = [];

  /** Observe every series into `result` (null: only learn the families); true when a new instrument appeared. */
  const observeAll = (result: BatchObservableResult | null): boolean => {
    let grew = false;
    for (const f of toFamilies(collect(sources))) {
      const kind = f.kind === 'gauge' ? 'gauge' : 'counter';
      for (const s of f.samples) {
        const name = f.kind === 'counter' ? s.name.replace(/_total$/, '') : s.name;
        let inst = instruments.get(name);
        if (inst === undefined) {
          const description = `lanemux ${s.name}`;
          inst =
            kind === 'counter'
              ? meter.createObservableCounter(name, { description })
              : meter.createObservableGauge(name, { description });
          instruments.set(name, inst);
          names.push(name);
          grew = true;
          // Not in this callback's list yet: observed from the next collection on.
          continue;
        }
        result?.observe(inst, s.value, { ...s.labels, ...extra });
      }
    }
    return grew;
  };

  const callback = (result: BatchObservableResult): void => {
    // A family that appears later (a first resume failure, say) joins the callback's list.
    if (observeAll(result)) reregister();
  };
  const reregister = (): void => {
    if (registered.length > 0) meter.removeBatchObservableCallback(callback, registered);
    registered = [...instruments.values()];
    meter.addBatchObservableCallback(callback, registered);
  };

  observeAll(null);
  reregister();
  return {
    instruments: names,
    close() {
      if (registered.length > 0) meter.removeBatchObservableCallback(callback, registered);
      registered = [];
    },
  };
}
