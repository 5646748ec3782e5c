import { describe, it, expect, afterEach } from 'vitest';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

async function pair(mux = {}, extra = {}) {
  const [a, b] = LoopMessenger.pair();
  const consumer = await createNode({ messenger: a, mux, ...extra });
  const producer = await createNode({ messenger: b, mux, ...extra });
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
    await new Promise<void>((r) =>
      sender.cancelSignal.aborted ? r() : sender.cancelSignal.addEventListener('abort', () => r()),
    );
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

const aborted = (s: AbortSignal) =>
  new Promise<void>((r) => (s.aborted ? r() : s.addEventListener('abort', () => r())));

describe('streams over the mux: a cancel relay, concurrent next(), unattached anchors, unawaited sends', () => {
  it('cancelling an upstream anchor from a downstream cancel listener does not starve the other streams from that peer', async () => {
    const { consumer: x, producer: y } = await pair({ initialCredit: 4 });
    const a2 = y.createAnchor<string>();
    const s2 = await x.attachAnchor<string>(a2.handle);
    const a1 = x.createAnchor<string>();
    const a3 = x.createAnchor<string>();
    await y.attachAnchor<string>(a1.handle);
    const p3 = await y.attachAnchor<string>(a3.handle);
    s2.cancelSignal.addEventListener('abort', () => a1.cancel()); // a relay: downstream gone → cancel upstream
    a2.cancel();
    await aborted(s2.cancelSignal);
    const got: string[] = [];
    const reading = (async () => {
      for await (const t of a3) got.push(t);
    })();
    for (let i = 0; i < 20; i++) await p3.send(`t${i}`);
    await p3.finalize();
    await reading;
    expect(got).toHaveLength(20);
  });

  it('two concurrent next() calls both resolve', async () => {
    const { consumer: x, producer: y } = await pair();
    const a = x.createAnchor<string>();
    const s = await y.attachAnchor<string>(a.handle);
    const n1 = a.next();
    const n2 = a.next();
    await s.send('one');
    await s.send('two');
    const got = await Promise.all([n1, n2]);
    expect(got.map((r) => r.value).sort()).toEqual(['one', 'two']);
  });

  it('an anchor nobody attaches to ends with SenderDropped after the unattached timeout and is forgotten', async () => {
    const { consumer: x } = await pair({}, { unattachedTimeout: 30 });
    const anchors = Array.from({ length: 100 }, () => x.createAnchor());
    expect(x.metrics()['velo_streaming_active_anchors']).toBe(100);
    const ends = await Promise.allSettled(anchors.map((a) => a.next()));
    expect(
      ends.every((e) => e.status === 'rejected' && (e.reason as { code: string }).code === 'ERR_SENDER_DROPPED'),
    ).toBe(true);
    expect(x.metrics()['velo_streaming_active_anchors']).toBe(0);
  });

  it('send() without await is bounded: past twice the byte budget it is refused with ERR_BACKPRESSURE', async () => {
    const { consumer: x, producer: y } = await pair({ initialCredit: 4, slotByteBudget: 1024 });
    const a = y.createAnchor<string>();
    const s = await x.attachAnchor<string>(a.handle);
    let refused = 0;
    for (let i = 0; i < 1000; i++) {
      s.send('x'.repeat(100)).catch((e: { code: string }) => {
        if (e.code === 'ERR_BACKPRESSURE') refused++;
      });
    }
    await new Promise<void>((r) => queueMicrotask(r));
    await Promise.resolve();
    expect(refused).toBeGreaterThan(900);
    expect(x.metrics()['velo_streaming_mux_withheld_records']).toBeLessThan(30);
    // The stream itself is fine: the consumer reads what was accepted, then the producer goes on.
    a.cancel();
  });
});
