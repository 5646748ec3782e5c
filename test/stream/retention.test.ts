// What a node keeps of a finished stream: nothing. After streams end (read to their end, with or
// without a lost link and a resume on the way), no anchor, bind or buffer of theirs is reachable
// from the nodes (a WeakRef to each anchor is empty after a real collection), however few streams
// came before: no queue waits for a later compaction or deadline to let them go.
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { cuttable } from '../support/cuttable-memory.ts';
import { waitFor } from '../support/wait-for.ts';

setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

/** Full collections a few turns apart (weak references are cleared between turns). */
async function gc(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    collect();
    await new Promise((r) => setImmediate(r));
  }
}

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

async function pair() {
  const network = createMemoryNetwork();
  const { adapter, cut } = cuttable(network);
  const consumer = await createNode({ transports: [memoryTransport({ network, name: 'consumer' })] });
  const producer = await createNode({ transports: [adapter] });
  nodes.push(consumer, producer);
  await producer.connect('memory://consumer', { reconnect: { initialDelayMs: 1, jitterMs: 0 } });
  return { consumer, producer, cut };
}

/** `n` streams of `items` items each, read to their end; weak references to their anchors. */
async function streams(
  consumer: LanemuxNode,
  producer: LanemuxNode,
  n: number,
  items: number,
  midway?: () => void,
): Promise<WeakRef<object>[]> {
  const refs: WeakRef<object>[] = [];
  const runs: Promise<void>[] = [];
  for (let k = 0; k < n; k++) {
    const anchor = consumer.createAnchor<string>();
    refs.push(new WeakRef(anchor));
    runs.push(
      (async () => {
        const sender = await producer.attachAnchor<string>(anchor.handle);
        const read = (async () => {
          let got = 0;
          for await (const _ of anchor) got++;
          expect(got).toBe(items);
        })();
        for (let i = 0; i < items; i++) await sender.send(`${i}`);
        await sender.finalize();
        await read;
      })(),
    );
  }
  if (midway) {
    await waitFor(() => metric(consumer, 'streaming_mux_batches_total{direction="received"}') > 2);
    midway();
  }
  await Promise.all(runs);
  return refs;
}

const kept = (refs: WeakRef<object>[]): number => refs.filter((r) => r.deref() !== undefined).length;

describe('a finished stream is let go', () => {
  it('after 50 streams end, none of their anchors is still reachable from either node', async () => {
    const { consumer, producer } = await pair();
    const refs = await streams(consumer, producer, 50, 20);
    await waitFor(() => metric(consumer, 'streaming_mux_live_binds') === 0);
    await gc();
    expect(kept(refs)).toBe(0);
  });

  it('after 50 streams resumed across a cut end, none of their anchors is still reachable', async () => {
    const { consumer, producer, cut } = await pair();
    const refs = await streams(consumer, producer, 50, 200, cut);
    expect(metric(consumer, 'streaming_resumed_streams_total')).toBeGreaterThan(0);
    await waitFor(() => metric(consumer, 'streaming_mux_live_binds') === 0);
    await gc();
    expect(kept(refs)).toBe(0);
  });
});
