// The Prometheus endpoint on Node: `http.createServer(nodePrometheusListener(node))`, and the
// fetch-style handler called directly (what Hono or any WHATWG server does with it).
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createNode } from '../../src/index.ts';
import { nodePrometheusListener, prometheusHandler } from '../../src/metrics/prometheus-handler.ts';
import { prometheusSuite } from './prometheus-suite.ts';

prometheusSuite('node:http', async (handler) => {
  // node:http speaks IncomingMessage/ServerResponse: bridge it to the fetch-style handler.
  const server = createServer(async (req, res) => {
    const response = handler(new Request(`http://localhost${req.url ?? '/'}`, { method: req.method ?? 'GET' }));
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(await response.text());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
});

describe('nodePrometheusListener', () => {
  it('serves GET /metrics from http.createServer with the text format, 404 elsewhere, HEAD without a body', async () => {
    const network = createMemoryNetwork();
    const node = await createNode({ transports: [memoryTransport({ network, name: 'n' })] });
    const server = createServer(nodePrometheusListener(node));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    try {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
      expect(await res.text()).toMatch(/^# TYPE velo_streaming_active_anchors gauge$/m);
      const head = await fetch(`http://127.0.0.1:${port}/metrics`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe('');
      expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(404);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
      await node.close();
    }
  });

  it('a custom path is the only one served', async () => {
    const handler = prometheusHandler({ metrics: () => ({ x_total: 3 }) }, { path: '/lanemux' });
    const ok = handler(new Request('http://h/lanemux'));
    expect(await ok.text()).toBe('# TYPE x_total counter\nx_total 3\n');
    expect(handler(new Request('http://h/metrics')).status).toBe(404);
  });
});
