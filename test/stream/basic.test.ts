import { describe, it, expect, afterEach } from 'vitest';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

async function pair(mux = {}) {
  const [a, b] = LoopMessenger.pair();
  const consumer = await createNode({ messenger: a, mux });
  const producer = await createNode({ messenger: b, mux });
  nodes.push(consumer, producer);
  return { consumer, producer, a, b };
}

describe('streams over the mux (loop messenger)', () => {
  it('delivers items in order and ends on finalize', async () => {
    const { consumer, producer } = await pair({ initialCredit: 4 });
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    expect(sender.negotiatedTransport).toBe('messenger-mux-v2');
    const got: string[] = [];
    const reading = (async () => {
      for await (const t of anchor) got.push(t);
    })();
    for (let i = 0; i < 100; i++) await sender.send(`tok${i}`);
    await sender.finalize();
    await reading;
    expect(got).toEqual(Array.from({ length: 100 }, (_, i) => `tok${i}`));
    expect(await sender.retired()).toBe('Sent');
    expect(consumer.metrics()['velo_streaming_mux_reader_stall_total']).toBe(0);
    expect(consumer.metricsRegistry.liveSlots + producer.metricsRegistry.liveSlots).toBe(0);
  });

  it('anchors and nodes are async-disposable where the runtime has Symbol.asyncDispose', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    const dispose = (Symbol as { asyncDispose?: symbol }).asyncDispose!;
    await (anchor as unknown as Record<symbol, () => Promise<void>>)[dispose]!();
    expect(anchor.finished).toBe(true);
    await new Promise<void>((r) => (sender.cancelSignal.aborted ? r() : sender.cancelSignal.addEventListener('abort', () => r())));
    await expect(sender.send('x')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    await (producer as unknown as Record<symbol, () => Promise<void>>)[dispose]!();
    expect(() => producer.createAnchor()).toThrow(/closed/);
  });

  it('takeAvailable reads what is buffered without a promise per item; waitAvailable parks until more arrives', async () => {
    const { consumer, producer } = await pair({ initialCredit: 64 });
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    const got: string[] = [];
    const reading = (async () => {
      while (!anchor.finished) {
        if (anchor.takeAvailable(got) === 0) await anchor.waitAvailable();
      }
    })();
    for (let i = 0; i < 500; i++) await sender.send(`t${i}`);
    await sender.finalize();
    await reading;
    expect(got).toEqual(Array.from({ length: 500 }, (_, i) => `t${i}`));
  });

  it('cancel wakes a reader parked on an empty buffer', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    await producer.attachAnchor<string>(anchor.handle);
    const reading = anchor.next();
    await Promise.resolve();
    anchor.cancel();
    expect(await reading).toEqual({ done: true, value: undefined });
  });
});

