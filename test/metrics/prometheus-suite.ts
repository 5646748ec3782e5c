/**
 * The Prometheus endpoint as a scraper meets it, shared by every runtime's HTTP server (Node's
 * `http`, `Deno.serve`, `Bun.serve`): two nodes stream over the memory transport, the server serves
 * their metrics, and a `fetch` reads them back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createNode, type LanemuxNode } from '../../src/index.ts';
import { prometheusHandler } from '../../src/metrics/prometheus-handler.ts';

/** A server of one runtime: serve `handler` on a free port; `close()` stops it. */
export type ServeFn = (handler: (request: Request) => Response) => Promise<{ url: string; close(): Promise<void> }>;

export function prometheusSuite(name: string, serve: ServeFn): void {
  describe(`Prometheus metrics served by ${name}`, () => {
    let a: LanemuxNode;
    let b: LanemuxNode;
    let server: { url: string; close(): Promise<void> };
    beforeAll(async () => {
      const network = createMemoryNetwork();
      a = await createNode({ transports: [memoryTransport({ network, name: 'a' })] });
      b = await createNode({ transports: [memoryTransport({ network })] });
      await b.connect(a.address);
      const anchor = a.createAnchor<string>();
      const sender = await b.attachAnchor(anchor.handle);
      for (let i = 0; i < 50; i++) await sender.send(`token ${i}`);
      await sender.finalize();
      let n = 0;
      for await (const _ of anchor) n++;
      expect(n).toBe(50);
      server = await serve(prometheusHandler([a, b]));
    });
    afterAll(async () => {
      await server?.close();
      await a?.close();
      await b?.close();
    });

    it('GET /metrics answers 200 in the text format: a # TYPE line per family, counters, gauges and a histogram', async () => {
      const res = await fetch(`${server.url}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/plain; version=0.0.4');
      const text = await res.text();
      expect(text).toMatch(/^# TYPE velo_streaming_mux_live_slots gauge\nvelo_streaming_mux_live_slots 0$/m);
      expect(text).toMatch(/^# TYPE velo_streaming_mux_records_sent_total counter$/m);
      expect(text).toMatch(/^velo_streaming_mux_records_sent_total\{record_type="data"\} [1-9]\d*$/m);
      expect(text).toMatch(/^# TYPE velo_streaming_mux_records_per_batch histogram$/m);
      expect(text).toMatch(/^velo_streaming_mux_records_per_batch_bucket\{direction="sent",le="\+Inf"\} \d+$/m);
      // Every sample line belongs to the family its # TYPE line opened (families are contiguous).
      let family = '';
      for (const line of text.trimEnd().split('\n')) {
        if (line.startsWith('# TYPE ')) family = line.split(' ')[2]!;
        else expect(line.startsWith(family)).toBe(true);
      }
    });

    it('another path answers 404 and a POST 405', async () => {
      const other = await fetch(`${server.url}/other`);
      expect(other.status).toBe(404);
      await other.body?.cancel();
      const post = await fetch(`${server.url}/metrics`, { method: 'POST', body: 'x' });
      expect(post.status).toBe(405);
      await post.body?.cancel();
    });
  });
}
