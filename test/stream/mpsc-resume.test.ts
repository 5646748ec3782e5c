// Resume of MPSC senders across a lost link (docs/protocol.md §8.3): each MPSC sender is its own
// slot with its own item count, so when the link between a sender's node and the anchor's node
// drops and the same peer links again within the window, every sender goes on where it stopped and
// the anchor's reader sees only a pause. Memory transport whose dialled connections the test cuts.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { ResumeFailedError } from '../../src/stream/errors.ts';
import type { MpscAnchor, MpscEvent } from '../../src/stream/mpsc-anchor.ts';
import type { MpscSender } from '../../src/stream/mpsc-sender.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { cuttable } from '../support/cuttable-memory.ts';
import { waitFor } from '../support/wait-for.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;
const liveSlots = (n: LanemuxNode): number => metric(n, 'streaming_mux_live_slots');

/** A consumer at memory://consumer and `count` producer nodes, each dialling it through its own cuttable link. */
async function setup(
  count: number,
  consumerOptions: Partial<NodeOptions> = {},
  producerOptions: Partial<NodeOptions> = {},
) {
  const network = createMemoryNetwork();
  const consumer = await createNode({
    transports: [memoryTransport({ network, name: 'consumer' })],
    ...consumerOptions,
  });
  nodes.push(consumer);
  const producers: Array<{ node: LanemuxNode; cut: () => void; reconnect: () => Promise<void> }> = [];
  for (let i = 0; i < count; i++) {
    const { adapter, cut } = cuttable(network);
    const node = await createNode({ transports: [adapter], ...producerOptions });
    nodes.push(node);
    await node.connect('memory://consumer');
    producers.push({
      node,
      cut,
      reconnect: async () => {
        await node.connect('memory://consumer');
      },
    });
  }
  return { consumer, producers };
}

/** Every event of an MPSC anchor until it ends, with a running count of items read. */
function reader<T>(anchor: MpscAnchor<T>) {
  const events: MpscEvent<T>[] = [];
  const state = { items: 0, error: null as unknown, ended: false };
  const done = (async () => {
    try {
      for await (const e of anchor) {
        events.push(e);
        if (e.kind === 'item') state.items++;
      }
    } catch (error) {
      state.error = error;
    }
    state.ended = true;
  })();
  const itemsOf = (sender: number): T[] =>
    events.flatMap((e) => (e.kind === 'item' && e.sender === sender ? [e.value] : []));
  return { events, state, done, itemsOf };
}

/** Send `n` numbered items, then finalize; the sender's own outcome. */
async function produce(sender: MpscSender<string>, n: number): Promise<unknown> {
  try {
    for (let i = 0; i < n; i++) await sender.send(`${sender.senderId}:${i}`);
    await sender.finalize();
    return null;
  } catch (e) {
    return e;
  }
}

const numbered = (id: number, n: number): string[] => Array.from({ length: n }, (_, i) => `${id}:${i}`);

describe('MPSC senders resume across a lost link', () => {
  it('3 senders on 2 nodes sending 2,000 items each through 20 cuts: each sender exact and in order, no drop, live slots back to 0', async () => {
    const { consumer, producers } = await setup(2);
    const anchor = consumer.createMpscAnchor<string>();
    const [a, b] = producers;
    const senders = [
      await a!.node.attachMpscAnchor<string>(anchor.handle),
      await a!.node.attachMpscAnchor<string>(anchor.handle),
      await b!.node.attachMpscAnchor<string>(anchor.handle),
    ];
    anchor.seal();
    const r = reader(anchor);
    const N = 2000;
    const writes = senders.map((s) => produce(s, N));
    // Cut one link or the other (every third time both) each time another 250 items were read.
    for (let cut = 1; cut <= 20; cut++) {
      await waitFor(() => r.state.items >= cut * 250 || r.state.ended, 10_000, `${cut * 250} items read`);
      const which = cut % 3 === 0 ? producers : [producers[cut % 2]!];
      for (const p of which) p.cut();
      for (const p of which) await p.reconnect();
    }
    await r.done;
    expect(r.state.error).toBeNull();
    expect(await Promise.all(writes)).toEqual([null, null, null]);
    for (const s of senders) expect(r.itemsOf(s.senderId)).toEqual(numbered(s.senderId, N));
    // Every sender's part ended finalized: no dropped event, nothing else.
    const ends = r.events.filter((e) => e.kind !== 'item');
    expect(ends.map((e) => e.kind)).toEqual(['finalized', 'finalized', 'finalized']);
    // At least one sender resumed per cut.
    expect(metric(consumer, 'streaming_resumed_streams_total')).toBeGreaterThanOrEqual(20);
    await waitFor(() => liveSlots(consumer) === 0 && producers.every((p) => liveSlots(p.node) === 0));
  }, 60_000);

  it('cuts while resumes are in flight (answers lost with the link): each sender names its stream again and still arrives exact', async () => {
    const { consumer, producers } = await setup(1);
    const p = producers[0]!;
    const anchor = consumer.createMpscAnchor<string>();
    const senders = await Promise.all(Array.from({ length: 8 }, () => p.node.attachMpscAnchor<string>(anchor.handle)));
    anchor.seal();
    const r = reader(anchor);
    const N = 600;
    const writes = senders.map((s) => produce(s, N));
    await waitFor(() => r.state.items >= 200);
    p.cut();
    await p.reconnect();
    // Each time the consumer has answered some resume attaches (answers and new binds may be lost), cut again.
    for (let round = 1; round <= 10 && !r.state.ended; round++) {
      const answered = metric(consumer, 'streaming_resumed_streams_total');
      await waitFor(() => metric(consumer, 'streaming_resumed_streams_total') > answered || r.state.ended);
      p.cut();
      await p.reconnect();
    }
    await r.done;
    expect(await Promise.all(writes)).toEqual(senders.map(() => null));
    for (const s of senders) expect(r.itemsOf(s.senderId)).toEqual(numbered(s.senderId, N));
    expect(r.events.filter((e) => e.kind !== 'item').every((e) => e.kind === 'finalized')).toBe(true);
    await waitFor(() => liveSlots(consumer) === 0 && liveSlots(p.node) === 0);
  });

  it('a cut longer than the resume window ends each sender retryable with reason "window", on both sides', async () => {
    const resume = { resume: { windowMs: 200 } };
    const { consumer, producers } = await setup(2, resume, resume);
    const anchor = consumer.createMpscAnchor<string>();
    const senders = [
      await producers[0]!.node.attachMpscAnchor<string>(anchor.handle),
      await producers[0]!.node.attachMpscAnchor<string>(anchor.handle),
      await producers[1]!.node.attachMpscAnchor<string>(anchor.handle),
    ];
    anchor.seal();
    for (const s of senders) await s.send('before');
    await waitFor(() => anchor.buffered === 3);
    for (const p of producers) p.cut();
    // No reconnect: the window passes. Each sender's item is read, then its end.
    const r = reader(anchor);
    await r.done;
    expect(r.state.error).toBeNull();
    for (const s of senders) {
      expect(r.itemsOf(s.senderId)).toEqual(['before']);
      const end = r.events.find((e) => e.kind !== 'item' && e.sender === s.senderId);
      expect(end?.kind).toBe('dropped');
      const error = (end as { error: unknown }).error;
      expect(error).toBeInstanceOf(ResumeFailedError);
      expect(error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true, reason: 'window' });
      expect(String((error as Error).message)).toMatch(/not resumed within 200 ms/);
    }
    await waitFor(() => senders.every((s) => s.closed));
    for (const s of senders) {
      expect(s.cancelSignal.reason).toBeInstanceOf(ResumeFailedError);
      expect(s.cancelSignal.reason).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true, reason: 'window' });
    }
    expect(metric(consumer, 'streaming_resume_failed_total{reason="window"}')).toBe(3);
    expect(producers.reduce((n, p) => n + metric(p.node, 'streaming_resume_failed_total{reason="window"}'), 0)).toBe(3);
    await waitFor(() => liveSlots(consumer) === 0 && producers.every((p) => liveSlots(p.node) === 0));
  });

  it('a sender far behind whose items the tiny replay ring evicted ends retryable "replay evicted" on both sides; the other goes on', async () => {
    const { consumer, producers } = await setup(
      1,
      { mux: { initialCredit: 4 } },
      { resume: { maxReplayBytesPerStream: 40 } },
    );
    const p = producers[0]!;
    const anchor = consumer.createMpscAnchor<string>();
    const [behind, fine] = [
      await p.node.attachMpscAnchor<string>(anchor.handle),
      await p.node.attachMpscAnchor<string>(anchor.handle),
    ];
    anchor.seal();
    // Nothing is read: four items fill the window of `behind`, more wait at its producer.
    for (let i = 0; i < 8; i++) behind!.trySend(`item-${i}`);
    await fine!.send('ok-0');
    await waitFor(() => anchor.buffered === 5);
    p.cut();
    await waitFor(() => liveSlots(p.node) === 0);
    await p.reconnect();
    await waitFor(() => behind!.closed);
    expect(behind!.cancelSignal.reason).toMatchObject({
      code: 'ERR_SENDER_DROPPED',
      retryable: true,
      reason: 'evicted',
    });
    expect(String((behind!.cancelSignal.reason as Error).message)).toMatch(/replay evicted/);
    await fine!.send('ok-1');
    await fine!.finalize();
    const r = reader(anchor);
    await r.done;
    expect(r.itemsOf(behind!.senderId)).toEqual(['item-0', 'item-1', 'item-2', 'item-3']);
    const end = r.events.find((e) => e.kind !== 'item' && e.sender === behind!.senderId);
    expect(end).toMatchObject({ kind: 'dropped', error: { code: 'ERR_SENDER_DROPPED', reason: 'evicted' } });
    expect(r.itemsOf(fine!.senderId)).toEqual(['ok-0', 'ok-1']);
    expect(r.events.filter((e) => e.kind !== 'item' && e.sender === fine!.senderId)).toEqual([
      { kind: 'finalized', sender: fine!.senderId },
    ]);
  });

  it('toward a peer without resume (no lanemux-resume-v1 in its HELLO) a cut drops each sender as before', async () => {
    const { consumer, producers } = await setup(1, { resume: false });
    const anchor = consumer.createMpscAnchor<string>();
    const p = producers[0]!;
    const senders = [
      await p.node.attachMpscAnchor<string>(anchor.handle),
      await p.node.attachMpscAnchor<string>(anchor.handle),
    ];
    anchor.seal();
    for (const s of senders) await s.send('a');
    await waitFor(() => anchor.buffered === 2);
    p.cut();
    const r = reader(anchor);
    await r.done;
    for (const s of senders) {
      const end = r.events.find((e) => e.kind !== 'item' && e.sender === s.senderId);
      expect(end?.kind).toBe('dropped');
      const error = (end as { error: unknown }).error;
      expect(error).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true });
      expect(error).not.toBeInstanceOf(ResumeFailedError);
    }
    await waitFor(() => senders.every((s) => s.closed));
    await p.reconnect();
    expect(metric(p.node, 'streaming_resumed_streams_total')).toBe(0);
    expect(metric(consumer, 'streaming_resumed_streams_total')).toBe(0);
  });

  it('a suspended sender keeps its place on a sealed anchor: the reader waits, sees no end, and reads on after the resume; a stop asked meanwhile reaches it', async () => {
    const { consumer, producers } = await setup(1, { mux: { initialCredit: 8 } });
    const anchor = consumer.createMpscAnchor<string>();
    const p = producers[0]!;
    const sender = await p.node.attachMpscAnchor<string>(anchor.handle);
    anchor.seal();
    for (let i = 0; i < 5; i++) await sender.send(`${sender.senderId}:${i}`);
    await waitFor(() => anchor.buffered === 5);
    p.cut();
    await waitFor(() => liveSlots(consumer) === 0 && liveSlots(p.node) === 0);
    // The unread records stay; the sender still counts; sends go on while the link is down.
    expect(anchor.senders).toBe(1);
    expect(anchor.finished).toBe(false);
    // A stop asked meanwhile reaches the sender once it resumed.
    anchor.requestStop();
    for (let i = 5; i < 9; i++) await sender.send(`${sender.senderId}:${i}`);
    await p.reconnect();
    await waitFor(() => metric(p.node, 'streaming_resumed_streams_total') === 1);
    await waitFor(() => sender.stopSignal.aborted);
    const r = reader(anchor);
    for (let i = 9; i < 40; i++) await sender.send(`${sender.senderId}:${i}`);
    await sender.finalize();
    await r.done;
    expect(r.itemsOf(sender.senderId)).toEqual(numbered(sender.senderId, 40));
    expect(r.events.at(-1)).toEqual({ kind: 'finalized', sender: sender.senderId });
  });
});
