import { describe, it, expect } from 'vitest';
import { createNode } from '../../src/stream/node.ts';
import { tcpTransport } from '../../src/transport/node-tcp.ts';

describe('tcp smoke', () => {
  it('1,024 streams x 100 tokens over one connection', async () => {
    const consumer = await createNode({ transports: [tcpTransport({ port: 0 })], mux: { initialCredit: 32 } });
    const producer = await createNode({ transports: [tcpTransport({ listen: false })], mux: { initialCredit: 32 } });
    await producer.connect(consumer.address);
    const X = 1024, N = 100;
    const anchors = Array.from({ length: X }, () => consumer.createAnchor<string>());
    const t0 = performance.now();
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    const t1 = performance.now();
    const reads = anchors.map(async (a, i) => {
      const got: string[] = [];
      for await (const t of a) got.push(t);
      return got.length === N && got.every((t, k) => t === `${i}:${k}`);
    });
    for (let k = 0; k < N; k++) {
      await Promise.all(senders.map((s, i) => s.send(`${i}:${k}`)));
    }
    await Promise.all(senders.map((s) => s.finalize()));
    const ok = await Promise.all(reads);
    const t2 = performance.now();
    console.log(`attach ${(t1 - t0).toFixed(0)} ms, stream ${(t2 - t1).toFixed(0)} ms`, producer.metrics()['velo_streaming_mux_batches_total{direction="sent"}']);
    expect(ok.every(Boolean)).toBe(true);
    await producer.close();
    await consumer.close();
  }, 60_000);
});
