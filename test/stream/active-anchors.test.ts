// velo_streaming_active_anchors returns to 0 at node.close() whatever state the anchors were in: with
// no sender, answered on the per-stream path but never dialled, MPSC, or streaming (it used to keep
// counting the first three).
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, tcpNode } from '../integration/helpers.ts';

afterEach(closeAll);

const gauge = 'velo_streaming_active_anchors';

describe('active_anchors at close', () => {
  it('returns to 0 for anchors without a sender, MPSC anchors and streaming anchors', async () => {
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    consumer.createAnchor<string>();
    consumer.createAnchor<string>();
    consumer.createMpscAnchor<string>();
    const live = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(live.handle);
    await sender.send('x');
    expect(consumer.metrics()[gauge]).toBe(4);
    await consumer.close();
    expect(consumer.metrics()[gauge]).toBe(0);
  });
});
