// Re-attach after detach (docs/protocol.md §8 "Detach"): once `await sender.detach()` resolved, a new
// sender (the same producer or another one) attaches to the anchor at once, whether or not the
// consumer has read anything; the consumer then reads the first sender's items, then the next
// sender's, in order, with nothing lost and every credit window intact.
import { afterEach, describe, expect, it } from 'vitest';
import { createNode } from '../../src/stream/node.ts';
import type { LanemuxNode, NodeOptions } from '../../src/stream/node.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { closeAll, tcpNode } from '../integration/helpers.ts';
import { tcpStreamTransport } from '../../src/adapters/node-tcp-stream.ts';
import { readAll } from '../support/read-all.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
  await closeAll();
});

async function pair(mux: NodeOptions['mux'] = {}, producerMux: NodeOptions['mux'] = mux) {
  const [mc, mp] = LoopMessenger.pair();
  const requests: string[] = [];
  const request = mp.request.bind(mp);
  mp.request = (peer, name, body, o) => {
    requests.push(name);
    return request(peer, name, body, o);
  };
  const consumer = await createNode({ messenger: mc, mux });
  const producer = await createNode({ messenger: mp, mux: producerMux });
  nodes.push(consumer, producer);
  return { consumer, producer, mc, mp, requests };
}

/** Let queued microtasks and deliveries run (the loop messenger delivers on microtasks). */
async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

const stall = (n: LanemuxNode): number => n.metrics()['velo_streaming_mux_reader_stall_total'] ?? 0;
const lost = (n: LanemuxNode): number => n.metrics()['velo_streaming_mux_credit_lost_total'] ?? 0;

describe('re-attach after detach, the consumer not reading', () => {
  it("same worker: a new sender attaches right after await detach(); the consumer reads each sender's items in attach order", async () => {
    const { consumer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const first = await consumer.attachAnchor<string>(anchor.handle);
    await first.send('a1');
    await first.send('a2');
    await first.detach();
    const second = await consumer.attachAnchor<string>(anchor.handle);
    await second.send('b1');
    await second.detach();
    const third = await consumer.attachAnchor<string>(anchor.handle);
    await third.send('c1');
    await third.finalize();
    expect(await readAll(anchor)).toEqual(['a1', 'a2', 'b1', 'c1']);
    expect(await first.retired()).toBe('Sent');
    expect(await third.retired()).toBe('Sent');
  });

  it('same worker: a sender that has not detached still makes a second attach ERR_ALREADY_ATTACHED', async () => {
    const { consumer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const first = await consumer.attachAnchor<string>(anchor.handle);
    await first.send('a');
    await expect(consumer.attachAnchor(anchor.handle)).rejects.toMatchObject({ code: 'ERR_ALREADY_ATTACHED' });
    await first.detach();
    const second = await consumer.attachAnchor<string>(anchor.handle);
    await expect(consumer.attachAnchor(anchor.handle)).rejects.toMatchObject({ code: 'ERR_ALREADY_ATTACHED' });
    await second.finalize();
    expect(await readAll(anchor)).toEqual(['a']);
  });

  it('over the mux: the producer re-attaches right after await detach(); unread records keep their order and credit holds each sender to its own window', async () => {
    const { consumer, producer, requests } = await pair({ initialCredit: 2 });
    const anchor = consumer.createAnchor<string>();
    const first = await producer.attachAnchor<string>(anchor.handle);
    await first.send('a1');
    await first.send('a2');
    await first.detach();
    expect(requests).toContain('_anchor_detach');
    const second = await producer.attachAnchor<string>(anchor.handle);
    for (const x of ['b1', 'b2', 'b3', 'b4', 'b5']) await second.send(x);
    await settle();
    // Nobody reads: the first sender's records (and its Detached) wait in its buffer, and the second
    // sender may have only its own window of 2 out; the rest wait with it.
    expect(anchor.bind!.buffer.length).toBe(3);
    expect(producer.metricsRegistry.withheldRecords).toBe(3);
    const reading = readAll(anchor);
    await second.finalize();
    expect(await reading).toEqual(['a1', 'a2', 'b1', 'b2', 'b3', 'b4', 'b5']);
    expect(await second.retired()).toBe('Sent');
    for (const n of [consumer, producer]) {
      expect(stall(n)).toBe(0);
      expect(lost(n)).toBe(0);
    }
    await settle();
    expect(consumer.metricsRegistry.liveSlots + producer.metricsRegistry.liveSlots).toBe(0);
    expect(consumer.metricsRegistry.activeAnchors).toBe(0);
  });

  it('over the mux: the re-attach does not wait for the Detached record (still unadmitted) to reach the consumer', async () => {
    const { consumer, producer, mp } = await pair({}, { asyncOpenAck: true });
    const anchor = consumer.createAnchor<string>();
    const first = await producer.attachAnchor<string>(anchor.handle);
    await first.send('a1');
    await settle();
    // From here the producer's batches wait at admission: the Detached record does not travel.
    mp.mode = 'stall';
    await first.send('a2');
    await first.detach();
    const second = await producer.attachAnchor<string>(anchor.handle);
    await second.send('b1');
    await second.finalize();
    expect(mp.stalledCount).toBeGreaterThan(0);
    const reading = readAll(anchor);
    mp.release();
    expect(await reading).toEqual(['a1', 'a2', 'b1']);
  });

  it('over TCP: the same producer and another producer re-attach right after await detach(), while nobody reads', async () => {
    const consumer = await tcpNode({ mux: { initialCredit: 4 } });
    const p1 = await tcpNode({ listen: false });
    const p2 = await tcpNode({ listen: false });
    await p1.connect(consumer.address);
    await p2.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const s1 = await p1.attachAnchor<string>(anchor.handle);
    for (const x of ['a1', 'a2', 'a3']) await s1.send(x);
    await s1.detach();
    const s2 = await p2.attachAnchor<string>(anchor.handle);
    for (const x of ['b1', 'b2']) await s2.send(x);
    await s2.detach();
    const s3 = await p1.attachAnchor<string>(anchor.handle);
    await s3.send('c1');
    await s3.finalize();
    expect(await readAll(anchor)).toEqual(['a1', 'a2', 'a3', 'b1', 'b2', 'c1']);
    expect(await s3.retired()).toBe('Sent');
  });

  it('over the per-stream path: the producer re-attaches right after await detach(); the consumer reads both senders in order', async () => {
    const [mc, mp] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: mc, perStream: tcpStreamTransport(), mux: { enabled: false } });
    const producer = await createNode({ messenger: mp, perStream: tcpStreamTransport(), mux: { enabled: false } });
    nodes.push(consumer, producer);
    const anchor = consumer.createAnchor<string>();
    const first = await producer.attachAnchor<string>(anchor.handle);
    expect(first.negotiatedTransport).toBe('tcp-stream');
    await first.send('a1');
    await first.send('a2');
    await first.detach();
    const second = await producer.attachAnchor<string>(anchor.handle);
    await second.send('b1');
    await second.finalize();
    expect(await readAll(anchor)).toEqual(['a1', 'a2', 'b1']);
  });

  it('a cancel while senders wait behind a detached one fails them all; an attach to the cancelled anchor is refused', async () => {
    const { consumer, producer } = await pair({ initialCredit: 2 });
    const anchor = consumer.createAnchor<string>();
    const first = await producer.attachAnchor<string>(anchor.handle);
    await first.send('a1');
    await first.detach();
    const second = await producer.attachAnchor<string>(anchor.handle);
    await second.send('b1');
    const local = anchor.handle;
    await settle();
    anchor.cancel();
    await new Promise<void>((r) =>
      second.cancelSignal.aborted ? r() : second.cancelSignal.addEventListener('abort', () => r(), { once: true }),
    );
    await expect(second.send('b2')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    await expect(producer.attachAnchor(local)).rejects.toMatchObject({ code: 'ERR_ATTACH_REFUSED' });
    await settle();
    expect(consumer.metricsRegistry.liveSlots + producer.metricsRegistry.liveSlots).toBe(0);
    expect(consumer.metricsRegistry.activeAnchors).toBe(0);
  });

  it("a sender that goes away behind a detached one ends the stream ERR_SENDER_DROPPED after both senders' items", async () => {
    const { consumer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const first = await consumer.attachAnchor<string>(anchor.handle);
    await first.send('a1');
    await first.detach();
    const ac = new AbortController();
    const second = await consumer.attachAnchor<string>(anchor.handle, { signal: ac.signal });
    await second.send('b1');
    ac.abort();
    const got: string[] = [];
    await expect(
      (async () => {
        for await (const x of anchor) got.push(x);
      })(),
    ).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    expect(got).toEqual(['a1', 'b1']);
  });

  it('a sender whose link dies before its Detached arrives ends the stream there; a sender waiting behind it is let go at once', async () => {
    const { consumer, producer, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    const first = await producer.attachAnchor<string>(anchor.handle);
    await first.send('a1');
    await settle();
    mp.mode = 'stall';
    await first.detach();
    // Waiting behind the remote sender: a same-worker one.
    const second = await consumer.attachAnchor<string>(anchor.handle);
    await second.send('b1');
    mp.kill();
    await new Promise<void>((r) =>
      second.cancelSignal.aborted ? r() : second.cancelSignal.addEventListener('abort', () => r(), { once: true }),
    );
    await expect(second.send('b2')).rejects.toMatchObject({ code: 'ERR_STREAM_CLOSED' });
    expect(await second.retired()).toBe('Discarded');
    expect(consumer.metricsRegistry.activeAnchors, 'the anchor is forgotten with its dropped sender').toBe(0);
    const got: string[] = [];
    await expect(
      (async () => {
        for await (const x of anchor) got.push(x);
      })(),
    ).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    expect(got).toEqual(['a1']);
  });

  it('at most 4 senders wait behind the one the consumer reads: the next attach is refused, and accepted again once it reads', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<number>();
    for (let i = 0; i < 5; i++) {
      const s = await producer.attachAnchor<number>(anchor.handle);
      await s.send(i);
      await s.detach();
    }
    await expect(producer.attachAnchor(anchor.handle)).rejects.toMatchObject({
      code: 'ERR_ATTACH_REFUSED',
      message: /not read/,
    });
    await expect(consumer.attachAnchor(anchor.handle)).rejects.toMatchObject({
      code: 'ERR_ATTACH_REFUSED',
      message: /not read/,
    });
    const it = anchor[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ done: false, value: 0 });
    expect(await it.next()).toEqual({ done: false, value: 1 });
    const last = await producer.attachAnchor<number>(anchor.handle);
    await last.send(5);
    await last.finalize();
    const rest: number[] = [];
    for (let r = await it.next(); !r.done; r = await it.next()) rest.push(r.value);
    expect(rest).toEqual([2, 3, 4, 5]);
  });
});
