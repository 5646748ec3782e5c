// Regression (review finding) (peer-wide variant): even with the per-slot hold sized by credit, six streams that
// each send an 8 MiB record and then 30 x 50 KiB (within credit) overflow the receiver's 8 MiB peer budget.
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, tcpNode } from '../integration/helpers.ts';
import { readAll } from '../support/read-all.ts';

afterEach(closeAll);

describe('hold after singletons, peer-wide', () => {
  it('six streams with big records and credit-bound tails all complete', async () => {
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const anchors = Array.from({ length: 6 }, () => consumer.createAnchor<Uint8Array>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<Uint8Array>(a.handle)));
    const reads = anchors.map((a) =>
      readAll(a).then(
        (v) => v.length,
        () => -1,
      ),
    );
    await Promise.all(
      senders.map(async (s) => {
        await s.send(new Uint8Array(8 * 1024 * 1024));
        for (let i = 0; i < 30; i++) await s.send(new Uint8Array(50 * 1024));
        await s.finalize();
      }),
    );
    const counts = await Promise.all(reads);
    expect(counts).toEqual([31, 31, 31, 31, 31, 31]);
  }, 30_000);
});
