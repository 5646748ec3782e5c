// Proof that a consumer applied a stream's terminal (docs/protocol.md §8.3): a PING on the stream's
// lane behind the batch that carried it. The queue alone, over a scripted ping, then two nodes.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { TerminalConfirmations, type ConfirmableStream } from '../../src/stream/terminal-confirm.ts';
import { cuttable } from '../support/cuttable-memory.ts';
import { collect } from '../support/collect.ts';
import { waitFor } from '../support/wait-for.ts';

/** A ping the test answers: each call is recorded with its own answer to settle. */
function scriptedPing(epoch = () => 1) {
  const calls: Array<{ peer: string; lane: number; answer: (ok: boolean) => void }> = [];
  const ping = (peer: string, lane: number) => {
    let settle!: (ok: boolean) => void;
    const answer = new Promise<unknown>((resolve, reject) => {
      settle = (ok) => (ok ? resolve(1) : reject(new Error('unanswered')));
    });
    calls.push({ peer, lane, answer: settle });
    return { epoch: epoch(), answer };
  };
  return { calls, ping };
}

const stream = (confirmed: number[], id: number): ConfirmableStream => ({
  terminalConfirmed: (gen) => confirmed.push(id * 100 + gen),
});
const turn = (): Promise<void> => new Promise((r) => setTimeout(r, 0));

describe('terminal confirmations (the queue)', () => {
  it('streams that finish while a PING is out wait for the next one: one PING in flight per (peer, lane)', async () => {
    const { calls, ping } = scriptedPing();
    const q = new TerminalConfirmations(ping);
    const confirmed: number[] = [];
    q.add('p', 1, 1, 7, stream(confirmed, 1));
    q.add('p', 1, 1, 7, stream(confirmed, 2));
    q.add('p', 2, 1, 7, stream(confirmed, 3));
    // Stream 1 sent lane 1's PING; stream 2 waits behind it; lane 2 has its own.
    expect(calls.map((c) => c.lane)).toEqual([1, 2]);
    expect(q.waiting).toBe(3);
    calls[0]!.answer(true);
    await turn();
    expect(confirmed).toEqual([107]);
    // Stream 2's own PING went out when the first came back.
    expect(calls.map((c) => c.lane)).toEqual([1, 2, 1]);
    calls[2]!.answer(true);
    calls[1]!.answer(true);
    await turn();
    expect(confirmed.sort()).toEqual([107, 207, 307]);
    expect(q.waiting).toBe(0);
  });

  it('an answer on another link (a newer epoch) confirms nothing: that PING did not follow the terminal', async () => {
    let epoch = 1;
    const { calls, ping } = scriptedPing(() => epoch);
    const q = new TerminalConfirmations(ping);
    const confirmed: number[] = [];
    q.add('p', 0, 1, 0, stream(confirmed, 1));
    epoch = 2;
    q.add('p', 0, 1, 0, stream(confirmed, 2)); // handed to link 1, but its PING goes on link 2
    calls[0]!.answer(true);
    await turn();
    calls[1]!.answer(true);
    await turn();
    expect(confirmed).toEqual([100]);
  });

  it('an unanswered PING confirms nothing, and the streams behind it still get a PING of their own', async () => {
    const { calls, ping } = scriptedPing();
    const q = new TerminalConfirmations(ping);
    const confirmed: number[] = [];
    q.add('p', 0, 1, 0, stream(confirmed, 1));
    q.add('p', 0, 1, 0, stream(confirmed, 2));
    calls[0]!.answer(false);
    await turn();
    expect(confirmed).toEqual([]);
    expect(calls).toHaveLength(2);
    calls[1]!.answer(true);
    await turn();
    expect(confirmed).toEqual([200]);
  });

  it('a peer with no link gets no PING and confirms nothing; closing forgets every waiting stream', async () => {
    const q = new TerminalConfirmations(() => undefined);
    const confirmed: number[] = [];
    q.add('gone', 0, 1, 0, stream(confirmed, 1));
    await turn();
    expect(confirmed).toEqual([]);
    expect(q.waiting).toBe(0);
    const { calls, ping } = scriptedPing();
    const q2 = new TerminalConfirmations(ping);
    q2.add('p', 0, 1, 0, stream(confirmed, 2));
    q2.close();
    calls[0]!.answer(true);
    await turn();
    expect(confirmed).toEqual([]);
    expect(q2.waiting).toBe(0);
  });
});

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;
const lingering = (n: LanemuxNode): number => metric(n, 'streaming_lingering_streams');

async function pair(options: Partial<NodeOptions> = {}) {
  const network = createMemoryNetwork();
  const { adapter, cut } = cuttable(network);
  const consumer = await createNode({ transports: [memoryTransport({ network, name: 'consumer' })], ...options });
  const producer = await createNode({ transports: [adapter], ...options });
  nodes.push(consumer, producer);
  await producer.connect('memory://consumer');
  return { consumer, producer, cut, reconnect: () => producer.connect('memory://consumer') };
}

describe('a finished resumable stream and its replay ring', () => {
  it('lets its ring go once the consumer is known to have its terminal, long before the resume window passes', async () => {
    // A window of 10 minutes: without the confirmation the streams would linger past the test's timeout.
    const { consumer, producer } = await pair({ resume: { windowMs: 600_000 } });
    const anchors = Array.from({ length: 32 }, () => consumer.createAnchor<string>());
    const reads = anchors.map((a) => collect(a));
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    for (const s of senders) await s.send('x');
    await Promise.all(senders.map((s) => s.finalize()));
    for (const r of await Promise.all(reads)) expect(r).toEqual({ items: ['x'], error: null });
    await waitFor(() => lingering(producer) === 0, 5_000, 'no lingering stream');
  });

  it('a link cut after the confirmation resumes nothing: the consumer already had every terminal', async () => {
    const { consumer, producer, cut, reconnect } = await pair({ resume: { windowMs: 600_000 } });
    const anchor = consumer.createAnchor<string>();
    const read = collect(anchor);
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    await sender.finalize();
    expect(await read).toEqual({ items: ['a'], error: null });
    await waitFor(() => lingering(producer) === 0, 5_000, 'no lingering stream');
    cut();
    await reconnect();
    // A stream attached and finished over the new link: a resume attach would have gone before it.
    const next = consumer.createAnchor<string>();
    const nextRead = collect(next);
    const nextSender = await producer.attachAnchor<string>(next.handle);
    await nextSender.finalize();
    expect(await nextRead).toEqual({ items: [], error: null });
    expect(metric(producer, 'streaming_resumed_streams_total')).toBe(0);
    expect(metric(consumer, 'streaming_resumed_streams_total')).toBe(0);
    expect(metric(producer, 'streaming_resume_failed_total{reason="refused"}')).toBe(0);
  });

  it('with history on (a re-attach after a page reload) a finished stream keeps its ring: the confirmation does not end it', async () => {
    const { consumer, producer } = await pair({ resume: { windowMs: 600_000, history: true } });
    const anchor = consumer.createAnchor<string>();
    const read = collect(anchor);
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    await sender.finalize();
    expect(await read).toEqual({ items: ['a'], error: null });
    // An attach after the terminal (one lane: its answer comes back behind any PING the terminal
    // sent): the finished stream still lingers, the new one does not yet.
    const next = consumer.createAnchor<string>();
    await producer.attachAnchor<string>(next.handle);
    expect(lingering(producer)).toBe(1);
  });

  it('a stream whose item went by rendezvous (pulled off the lane) keeps its ring: a PING on the lane cannot vouch for it', async () => {
    const { consumer, producer } = await pair({ resume: { windowMs: 600_000 } });
    const anchor = consumer.createAnchor<Uint8Array>();
    const read = collect(anchor);
    const sender = await producer.attachAnchor<Uint8Array>(anchor.handle);
    await sender.send(new Uint8Array(100_000).fill(7)); // over the 64 KiB batch cap
    await sender.finalize();
    const { items, error } = await read;
    expect(error).toBeNull();
    expect(items.map((v) => v.byteLength)).toEqual([100_000]);
    expect(metric(producer, 'streaming_mux_rendezvous_singletons_total')).toBeGreaterThan(0);
    const next = consumer.createAnchor<string>();
    await producer.attachAnchor<string>(next.handle);
    expect(lingering(producer)).toBe(1);
  });
});
