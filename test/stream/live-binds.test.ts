/** `node.metrics()` reports `live_binds`: the binds the consumer holds, which must return to 0 when streams end. */
import { afterEach, describe, expect, it } from 'vitest';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { nodePair } from '../support/node-pair.ts';
import { readAll } from '../support/read-all.ts';
import { waitFor } from '../support/wait-for.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

const binds = (n: LanemuxNode) => n.metrics()['velo_streaming_mux_live_binds'];

describe('live_binds', () => {
  it('counts one bind per attached stream and returns to 0 once the streams end', async () => {
    const { consumer, producer } = await nodePair(nodes);
    expect(binds(consumer)).toBe(0);
    const anchors = [consumer.createAnchor<string>(), consumer.createAnchor<string>()];
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    expect(binds(consumer)).toBe(2);
    expect(binds(producer)).toBe(0);
    for (const s of senders) {
      await s.send('x');
      await s.finalize();
    }
    for (const a of anchors) expect(await readAll(a)).toEqual(['x']);
    await waitFor(() => binds(consumer) === 0, 5_000, 'live_binds back to 0');
  });
});
