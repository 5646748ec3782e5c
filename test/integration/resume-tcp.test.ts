// Over real TCP sockets: streams resume across many lost links (docs/protocol.md §8.3). A proxy
// between the two nodes plays the network and cuts both sides at random moments while 64 streams
// flow; after each cut the producer dials again. Every stream ends with exactly its items, in
// order; none hangs; live slots return to 0.
import { afterEach, describe, expect, it } from 'vitest';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { flowingStreams } from '../support/flowing-streams.ts';
import { seededRandom } from '../support/seeded-random.ts';
import { waitFor } from '../support/wait-for.ts';
import { closeAll, tcpNode } from './helpers.ts';
import { closeProxies, tcpProxy } from '../support/tcp-proxy.ts';

afterEach(async () => {
  try {
    await closeAll();
  } finally {
    await closeProxies();
  }
});

function portOf(node: LanemuxNode): number {
  return Number(new URL(node.address.replace('tcp://', 'http://')).port);
}

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

describe('resume over TCP', () => {
  it('random cuts while 64 streams flow, each followed by a reconnect: every stream exact, none hangs', {
    timeout: 60_000,
  }, async () => {
    const CUTS = 50;
    const random = seededRandom(20_261_207);
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    const link = await tcpProxy(portOf(consumer));
    const peer = await producer.connect(link.address);
    const flow = await flowingStreams(consumer, producer);
    let down = 0;
    const off = producer.onPeerState((e) => {
      if (e.peer === peer && e.type === 'down') down++;
    });
    for (let cut = 0; cut < CUTS; cut++) {
      // Let some records through (a random amount), then cut both sides.
      const seen = metric(consumer, 'streaming_mux_batches_total{direction="received"}');
      const more = 1 + Math.floor(random() * 20);
      await waitFor(() => metric(consumer, 'streaming_mux_batches_total{direction="received"}') >= seen + more);
      const before = down;
      link.cut();
      await waitFor(() => down > before);
      await producer.connect(link.address);
    }
    off();
    await flow.finish();
    expect(metric(producer, 'streaming_resumed_streams_total')).toBeGreaterThan(0);
    await waitFor(() => consumer.metricsRegistry.liveSlots === 0 && producer.metricsRegistry.liveSlots === 0);
  });
});
