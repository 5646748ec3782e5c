/**
 * A metrics snapshot (`node.metrics()`: `name{labels}` → value) as metric families: the parsed
 * series grouped under their family with its kind, and the Prometheus text exposition format
 * (version 0.0.4) of them. Pure: no I/O, no clock.
 */

/** How a family is exposed: `_total` series are counters, `_bucket`/`_sum`/`_count` with `le` a histogram. */
export type MetricKind = 'counter' | 'gauge' | 'histogram';

/** One series of a family. */
export interface MetricSample {
  /** The series name as written (for a histogram: the family name plus `_bucket`, `_sum` or `_count`). */
  readonly name: string;
  /** Label name → value, in the order written. */
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** A family: every series sharing one base name. */
export interface MetricFamily {
  readonly name: string;
  readonly kind: MetricKind;
  readonly samples: readonly MetricSample[];
}

/** The source of a snapshot: a lanemux node, or anything that answers the same way. */
export interface MetricsSource {
  metrics(): Record<string, number>;
}

/** The content type of {@link toPrometheusText}'s output. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const LABEL = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
const HISTOGRAM_PART = /_(bucket|sum|count)$/;

/** Split `name{a="x",b="y"}` into its name and labels. */
export function parseSeries(series: string): { name: string; labels: Record<string, string> } {
  const brace = series.indexOf('{');
  if (brace < 0) return { name: series, labels: {} };
  const labels: Record<string, string> = {};
  for (const m of series.slice(brace + 1, -1).matchAll(LABEL))
    labels[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  return { name: series.slice(0, brace), labels };
}

/**
 * Group a snapshot into families, in the order each family first appears. A family is a histogram
 * when it has `_bucket` series with an `le` label; its `_sum` and `_count` series join it.
 */
export function toFamilies(snapshot: Readonly<Record<string, number>>): MetricFamily[] {
  const parsed = Object.entries(snapshot).map(([k, value]) => ({ ...parseSeries(k), value }));
  const histograms = new Set<string>();
  for (const s of parsed)
    if (s.name.endsWith('_bucket') && s.labels['le'] !== undefined) histograms.add(s.name.slice(0, -'_bucket'.length));
  const families = new Map<string, { name: string; kind: MetricKind; samples: MetricSample[] }>();
  for (const s of parsed) {
    const base = s.name.replace(HISTOGRAM_PART, '');
    const name = histograms.has(base) ? base : s.name;
    const kind: MetricKind = histograms.has(base) ? 'histogram' : s.name.endsWith('_total') ? 'counter' : 'gauge';
    let f = families.get(name);
    if (f === undefined) families.set(name, (f = { name, kind, samples: [] }));
    f.samples.push({ name: s.name, labels: s.labels, value: s.value });
  }
  return [...families.values()];
}

const escapeLabel = (v: string): string => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const formatValue = (v: number): string =>
  Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v);

/** The families in the Prometheus text format: a `# TYPE` line per family, its series together. */
export function toPrometheusText(families: readonly MetricFamily[]): string {
  const out: string[] = [];
  for (const f of families) {
    out.push(`# TYPE ${f.name} ${f.kind}`);
    for (const s of f.samples) {
      const labels = Object.entries(s.labels);
      const l = labels.length === 0 ? '' : `{${labels.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}`;
      out.push(`${s.name}${l} ${formatValue(s.value)}`);
    }
  }
  return `${out.join('\n')}\n`;
}

/** Every source's snapshot merged (a later source's series replace an earlier one's of the same name). */
export function collect(sources: MetricsSource | readonly MetricsSource[]): Record<string, number> {
  const list = Array.isArray(sources) ? sources : [sources as MetricsSource];
  return list.length === 1 ? list[0]!.metrics() : Object.assign({}, ...list.map((s) => s.metrics()));
}
