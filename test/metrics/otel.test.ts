// lanemux metrics through OpenTelemetry (`lanemux/otel`), read back with the OpenTelemetry SDK's own
// metric reader: names, kinds and attributes as documented, values live at each collection.
import { AggregationTemporality, DataPointType, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import type { MetricData } from '@opentelemetry/sdk-metrics';
import { describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createNode } from '../../src/index.ts';
import { observeWithOpenTelemetry } from '../../src/metrics/otel.ts';

/** A pull reader: `collect()` runs every observable callback now. */
class PullReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
  async metrics(): Promise<Map<string, MetricData>> {
    const { resourceMetrics, errors } = await this.collect();
    expect(errors).toEqual([]);
    const out = new Map<string, MetricData>();
    for (const scope of resourceMetrics.scopeMetrics) for (const m of scope.metrics) out.set(m.descriptor.name, m);
    return out;
  }
}

function setup(): { reader: PullReader; provider: MeterProvider } {
  const reader = new PullReader();
  return { reader, provider: new MeterProvider({ readers: [reader] }) };
}

describe('OpenTelemetry instruments', () => {
  it('a streaming node shows as counters (no _total), gauges and a histogram as bucket/sum/count, labels as attributes', async () => {
    const network = createMemoryNetwork();
    const a = await createNode({ transports: [memoryTransport({ network, name: 'a' })] });
    const b = await createNode({ transports: [memoryTransport({ network })] });
    const { reader, provider } = setup();
    const binding = observeWithOpenTelemetry(a, provider.getMeter('lanemux'), { attributes: { node: 'a' } });
    try {
      await b.connect(a.address);
      const anchor = a.createAnchor<string>();
      const sender = await b.attachAnchor(anchor.handle);
      for (let i = 0; i < 20; i++) await sender.send(`t${i}`);
      await sender.finalize();
      for await (const _ of anchor);

      const m = await reader.metrics();
      const received = m.get('velo_streaming_mux_batches');
      expect(received?.dataPointType).toBe(DataPointType.SUM);
      expect(received && 'isMonotonic' in received && received.isMonotonic).toBe(true);
      const points = received!.dataPoints as Array<{ attributes: Record<string, unknown>; value: number }>;
      const rec = points.find((p) => p.attributes['direction'] === 'received');
      expect(rec?.value).toBeGreaterThan(0);
      expect(rec?.attributes['node']).toBe('a');

      const live = m.get('velo_streaming_mux_live_slots');
      expect(live?.dataPointType).toBe(DataPointType.GAUGE);
      expect((live!.dataPoints[0] as { value: number }).value).toBe(0);

      const buckets = m.get('velo_streaming_mux_records_per_batch_bucket');
      const le = (buckets!.dataPoints as Array<{ attributes: Record<string, unknown> }>).map((p) => p.attributes['le']);
      expect(le).toContain('+Inf');
      expect(m.has('velo_streaming_mux_records_per_batch_count')).toBe(true);
      expect(m.has('velo_streaming_mux_batches_total')).toBe(false);
      expect(binding.instruments).toContain('velo_streaming_mux_live_slots');
    } finally {
      binding.close();
      await a.close();
      await b.close();
    }
  });

  it('values are read at each collection; a family that appears later is observed from the next one; close() stops', async () => {
    const series: Record<string, number> = { demo_things_total: 1 };
    const { reader, provider } = setup();
    const binding = observeWithOpenTelemetry({ metrics: () => ({ ...series }) }, provider.getMeter('t'));
    const value = (m: Map<string, MetricData>, name: string): number | undefined =>
      (m.get(name)?.dataPoints[0] as { value: number } | undefined)?.value;
    expect(value(await reader.metrics(), 'demo_things')).toBe(1);
    series['demo_things_total'] = 5;
    series['demo_late_total{reason="x"}'] = 2;
    const second = await reader.metrics();
    expect(value(second, 'demo_things')).toBe(5);
    expect(binding.instruments).toContain('demo_late');
    expect(value(await reader.metrics(), 'demo_late')).toBe(2);
    binding.close();
    series['demo_things_total'] = 9;
    expect(value(await reader.metrics(), 'demo_things')).not.toBe(9);
  });
});
