// Transparent resume across a lost link (docs/protocol.md §8.3): when the link between the same two
// peers drops and comes back within the resume window, every mux stream goes on where it stopped —
// nothing lost, repeated or reordered — and the application sees only a pause. Memory transport
// whose dialled connections the test cuts (in-flight bytes lost), then dials again.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import { ResumeFailedError } from '../../src/stream/errors.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { cuttable } from '../support/cuttable-memory.ts';
import { waitFor } from '../support/wait-for.ts';
import { within } from '../transport/helpers.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

/** A consumer node at memory://consumer and a producer node that dials it through a cuttable link. */
async function pair(consumerOptions: Partial<NodeOptions> = {}, producerOptions: Partial<NodeOptions> = {}) {
  const network = createMemoryNetwork();
  const { adapter, cut } = cuttable(network);
  const consumer = await createNode({
    transports: [memoryTransport({ network, name: 'consumer' })],
    ...consumerOptions,
  });
  const producer = await createNode({ transports: [adapter], ...producerOptions });
  nodes.push(consumer, producer);
  await producer.connect('memory://consumer');
  const reconnect = async (): Promise<void> => {
    await producer.connect('memory://consumer');
  };
  return { consumer, producer, cut, reconnect, network };
}

/** Read an anchor to its end: its items, or the error that ended it. */
async function collect<T>(anchor: StreamAnchor<T>): Promise<{ items: T[]; error: unknown }> {
  const items: T[] = [];
  try {
    for await (const v of anchor) items.push(v);
    return { items, error: null };
  } catch (error) {
    return { items, error };
  }
}

/** Send `n` numbered items, then finalize; the sender's own outcome. */
async function produce(sender: StreamSender<string>, n: number, from = 0): Promise<unknown> {
  try {
    for (let i = from; i < n; i++) await sender.send(`${i}`);
    await sender.finalize();
    return null;
  } catch (e) {
    return e;
  }
}

const numbered = (n: number): string[] => Array.from({ length: n }, (_, i) => `${i}`);

describe('resume over the mux', () => {
  it('64 streams flowing through a cut and a reconnect each complete with exactly their items, in order', async () => {
    const { consumer, producer, cut, reconnect } = await pair();
    const N = 400;
    const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    const reads = anchors.map((a) => collect(a));
    const writes = senders.map((s) => produce(s, N));
    // Cut while items flow, then dial again.
    await waitFor(() => metric(consumer, 'streaming_mux_batches_total{direction="received"}') > 20);
    cut();
    await reconnect();
    const results = await Promise.all(reads);
    expect(await Promise.all(writes)).toEqual(senders.map(() => null));
    for (const r of results) {
      expect(r.error).toBeNull();
      expect(r.items).toEqual(numbered(N));
    }
    expect(metric(producer, 'streaming_resumed_streams_total')).toBeGreaterThan(0);
    await waitFor(
      () => metric(consumer, 'streaming_mux_live_slots') === 0 && metric(producer, 'streaming_mux_live_slots') === 0,
    );
  });

  it('cuts while resumes are in flight (answers lost with the link): the producer names the stream again and every stream still completes exactly', async () => {
    const { consumer, producer, cut, reconnect } = await pair();
    const N = 300;
    const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    const reads = anchors.map((a) => collect(a));
    const writes = senders.map((s) => produce(s, N));
    await waitFor(() => metric(consumer, 'streaming_mux_batches_total{direction="received"}') > 20);
    cut();
    await reconnect();
    // Each time the consumer has answered some resume attaches (their answers and new binds may be
    // lost with the link), the link is cut again.
    for (let round = 1; round <= 10; round++) {
      const answered = metric(consumer, 'streaming_resumed_streams_total');
      await waitFor(() => metric(consumer, 'streaming_resumed_streams_total') > answered);
      cut();
      await reconnect();
    }
    const results = await Promise.all(reads);
    expect(await Promise.all(writes)).toEqual(senders.map(() => null));
    for (const r of results) {
      expect(r.error).toBeNull();
      expect(r.items).toEqual(numbered(N));
    }
    await waitFor(
      () => metric(consumer, 'streaming_mux_live_slots') === 0 && metric(producer, 'streaming_mux_live_slots') === 0,
    );
  });

  it('a cut longer than the resume window ends every stream retryable with the reason, on both sides; live slots return to 0', async () => {
    const { consumer, producer, cut } = await pair({ resume: { windowMs: 200 } }, { resume: { windowMs: 200 } });
    const anchors = Array.from({ length: 8 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    const reads = anchors.map((a) => collect(a));
    for (const s of senders) await s.send('before');
    await waitFor(() => anchors.every((a) => a.credit !== null));
    cut();
    // No reconnect: the window passes.
    const results = await Promise.all(reads);
    for (const r of results) {
      expect(r.error).toBeInstanceOf(ResumeFailedError);
      expect(r.error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true, reason: 'window' });
      expect(String((r.error as Error).message)).toMatch(/not resumed within 200 ms/);
    }
    const sent = await Promise.all(
      senders.map((s) =>
        s.send('after').then(
          () => null,
          (e: unknown) => e,
        ),
      ),
    );
    // A send during the suspension is queued; the sender fails when the window passes.
    await waitFor(() => senders.every((s) => s.closed));
    for (const s of senders)
      expect(s.cancelSignal.reason).toMatchObject({ code: 'ERR_SENDER_DROPPED', reason: 'window' });
    void sent;
    expect(metric(consumer, 'streaming_resume_failed_total{reason="window"}')).toBe(8);
    expect(metric(producer, 'streaming_resume_failed_total{reason="window"}')).toBe(8);
    await waitFor(
      () => metric(consumer, 'streaming_mux_live_slots') === 0 && metric(producer, 'streaming_mux_live_slots') === 0,
    );
  });

  it('toward a peer without resume (no lanemux-resume-v1 in its HELLO) a cut ends every stream Dropped as before', async () => {
    const { consumer, producer, cut, reconnect } = await pair({ resume: false });
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    const read = collect(anchor);
    await sender.send('a');
    await waitFor(() => anchor.credit !== null);
    cut();
    const r = await read;
    expect(r.error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true });
    expect(r.error).not.toBeInstanceOf(ResumeFailedError);
    await waitFor(() => sender.closed);
    await reconnect();
    expect(metric(producer, 'streaming_resumed_streams_total')).toBe(0);
  });

  it('a consumer far behind whose items the tiny replay ring evicted: the stream ends retryable "replay evicted"', async () => {
    const { consumer, producer, cut, reconnect } = await pair(
      { mux: { initialCredit: 4 } },
      { resume: { maxReplayBytesPerStream: 40 } },
    );
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    // The consumer reads nothing: four items fill its window, more wait at the producer.
    for (let i = 0; i < 8; i++) sender.trySend(`item-${i}`);
    await waitFor(() => anchor.credit?.remaining === 0);
    cut();
    await waitFor(() => !producer.metrics()['velo_streaming_mux_live_slots']);
    await reconnect();
    await waitFor(() => sender.closed);
    expect(sender.cancelSignal.reason).toMatchObject({ code: 'ERR_SENDER_DROPPED', reason: 'evicted' });
    expect(String((sender.cancelSignal.reason as Error).message)).toMatch(/replay evicted/);
    expect(metric(producer, 'streaming_resume_failed_total{reason="evicted"}')).toBe(1);
    // The consumer reads what it received, then the same reason.
    const r = await collect(anchor);
    expect(r.items).toEqual(['item-0', 'item-1', 'item-2', 'item-3']);
    expect(r.error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true, reason: 'evicted' });
  });

  it('a terminal lost with the link is sent again: the consumer reads every item and the end, with no error', async () => {
    const { consumer, producer, cut, reconnect } = await pair();
    const anchors = Array.from({ length: 16 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    for (const s of senders) {
      await s.send('a');
      await s.send('b');
      await s.finalize();
    }
    // The batches carrying the terminals are still on their way.
    cut();
    await reconnect();
    for (const a of anchors) expect(await collect(a)).toEqual({ items: ['a', 'b'], error: null });
    expect(metric(consumer, 'streaming_resumed_streams_total')).toBeGreaterThan(0);
  });

  it('bad resume options are one ConfigError naming the field', async () => {
    await expect(
      createNode({ transports: [memoryTransport({ network: createMemoryNetwork() })], resume: { windowMs: -1 } }),
    ).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG', fields: ['resume.windowMs'] });
  });

  it('a consumer that came back as another instance (it restarted): the producer ends retryable "restarted"', async () => {
    const { consumer, producer, cut, network } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    await waitFor(() => anchor.credit !== null);
    cut();
    await waitFor(() => metric(producer, 'streaming_mux_live_slots') === 0);
    // The same worker id at the same address, a new instance.
    await consumer.close();
    nodes.push(
      await createNode({ transports: [memoryTransport({ network, name: 'consumer' })], workerId: consumer.workerId }),
    );
    await producer.connect('memory://consumer');
    await waitFor(() => sender.closed);
    expect(sender.cancelSignal.reason).toBeInstanceOf(ResumeFailedError);
    expect(sender.cancelSignal.reason).toMatchObject({
      code: 'ERR_SENDER_DROPPED',
      retryable: true,
      reason: 'restarted',
    });
    expect(metric(producer, 'streaming_resume_failed_total{reason="restarted"}')).toBe(1);
  });

  it('a producer that came back as another instance (it restarted): the consumer ends its suspended stream at once, retryable "restarted", not when the window passes', async () => {
    const { consumer, producer, cut, network } = await pair({ resume: { windowMs: 60_000 } });
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    await sender.send('b');
    const read = collect(anchor);
    await waitFor(() => metric(consumer, 'streaming_mux_live_slots') === 1);
    cut();
    await waitFor(() => metric(consumer, 'streaming_mux_live_slots') === 0);
    // The same worker id dials again from a new process instance: its replay rings are gone.
    await producer.close();
    const again = await createNode({
      transports: [memoryTransport({ network })],
      workerId: producer.workerId,
    });
    nodes.push(again);
    await again.connect('memory://consumer');
    const r = await within(read, 5_000, 'the suspended stream ending (its window is 60 s)');
    expect(r.items).toEqual(['a', 'b']);
    expect(r.error).toBeInstanceOf(ResumeFailedError);
    expect(r.error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true, reason: 'restarted' });
    expect(metric(consumer, 'streaming_resume_failed_total{reason="restarted"}')).toBe(1);
    expect(metric(consumer, 'streaming_mux_live_binds')).toBe(0);
  });

  it('the producer\'s address answers as another worker after a crash (a restart with a new id): the consumer\'s suspended stream ends at once, "restarted"', async () => {
    const network = createMemoryNetwork();
    const server = await createNode({ transports: [memoryTransport({ network, name: 'server' })] });
    nodes.push(server);
    const { adapter, cut } = cuttable(network);
    const page = await createNode({ transports: [adapter], resume: { windowMs: 60_000 } });
    nodes.push(page);
    await page.connect('memory://server', { reconnect: { initialDelayMs: 20, jitterMs: 0, maxDelayMs: 50 } });
    const anchor = page.createAnchor<string>();
    const sender = await server.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    const reader = anchor[Symbol.asyncIterator]();
    expect((await reader.next()).value).toBe('a');
    // The server process dies without a word, and a new one (a new worker id) takes its address.
    cut();
    await waitFor(() => metric(page, 'streaming_mux_live_slots') === 0);
    await server.close();
    const restarted = await createNode({ transports: [memoryTransport({ network, name: 'server' })] });
    nodes.push(restarted);
    const error = await within(
      reader.next().then(
        () => null,
        (e: unknown) => e,
      ),
      5_000,
      'the suspended stream ending (its window is 60 s)',
    );
    expect(error).toBeInstanceOf(ResumeFailedError);
    expect(error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true, reason: 'restarted' });
    expect((error as Error).message).toContain(
      `replaced at its address by worker ${restarted.workerId.toString(16).padStart(16, '0')}`,
    );
    expect(metric(page, 'streaming_mux_live_binds')).toBe(0);
  });

  it('a stream the consumer is not reading resumes, keeps what was sent while the link was down, and reads on in order', async () => {
    const { consumer, producer, cut, reconnect } = await pair({ mux: { initialCredit: 8 } });
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    for (let i = 0; i < 5; i++) await sender.send(`${i}`);
    await waitFor(() => anchor.credit?.outstanding === 5);
    cut();
    await waitFor(
      () => metric(producer, 'streaming_mux_live_slots') === 0 && metric(consumer, 'streaming_mux_live_slots') === 0,
    );
    // Sends go on while the link is down.
    for (let i = 5; i < 9; i++) await sender.send(`${i}`);
    await reconnect();
    await waitFor(() => metric(producer, 'streaming_resumed_streams_total') === 1);
    const w = produce(sender, 40, 9);
    const r = await collect(anchor);
    expect(await w).toBeNull();
    expect(r).toEqual({ items: numbered(40), error: null });
    expect(metric(consumer, 'streaming_resumed_streams_total')).toBe(1);
  });
});
