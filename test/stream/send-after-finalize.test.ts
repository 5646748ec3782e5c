// Send after finalize rejects with one documented code, ERR_STREAM_CLOSED, on every path: the mux
// used to reject with its internal ERR_STREAM_ENDED (not in StreamErrorCode) and a same-worker sender
// with ERR_STREAM_CLOSED.
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, tcpNode } from '../integration/helpers.ts';

afterEach(closeAll);

describe('send after finalize', () => {
  it('rejects ERR_STREAM_CLOSED over the mux and from the same worker', async () => {
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const remote = await producer.attachAnchor<string>(consumer.createAnchor<string>().handle);
    const local = await consumer.attachAnchor<string>(consumer.createAnchor<string>().handle);
    for (const sender of [remote, local]) {
      await sender.send('x');
      await sender.finalize();
      await expect(sender.send('y')).rejects.toMatchObject({ code: 'ERR_STREAM_CLOSED' });
    }
  });
});
