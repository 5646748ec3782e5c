// A live resumable stream's items are kept by its lane's replay log (docs/protocol.md §8.3), not by a
// ring of its own: let go once a PING behind their batch is answered, handed back to the stream when
// the link is lost. Two nodes over a memory link the test cuts at an exact message.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { Kind } from '../../src/messenger/envelope.ts';
import { REPLAY_PING_SPACING_MS } from '../../src/mux/batcher-replay.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { collect } from '../support/collect.ts';
import { type CutTrap, cuttable, loseNext } from '../support/cuttable-memory.ts';
import { waitFor } from '../support/wait-for.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

const metric = (n: LanemuxNode, name: string): number => n.metrics()[`velo_${name}`] ?? 0;

async function pair(trap?: CutTrap, options: Partial<NodeOptions> = {}) {
  const network = createMemoryNetwork();
  const { adapter, cut } = cuttable(network, 'network cut', trap);
  const consumer = await createNode({ transports: [memoryTransport({ network, name: 'consumer' })], ...options });
  const producer = await createNode({ transports: [adapter], ...options });
  nodes.push(consumer, producer);
  await producer.connect('memory://consumer');
  return { consumer, producer, cut, reconnect: () => producer.connect('memory://consumer') };
}

const numbered = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `${from + i}`);

describe('the lane replay log', () => {
  it('lets a live stream’s items go once the consumer is known to have them: replay_bytes falls to 0 while the stream stays open', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    const got: string[] = [];
    anchor.consume({ item: (v) => void got.push(v) });
    for (const v of numbered(0, 200)) await sender.send(v);
    await waitFor(() => got.length === 200, 5_000, 'every item read');
    await waitFor(() => metric(producer, 'streaming_replay_bytes') === 0, 5_000, 'nothing kept for replay');
    expect(sender.closed).toBe(false);
    await sender.finalize();
  });

  it('a lane whose batches each carry a few items PINGs at most once per REPLAY_PING_SPACING_MS, not once per batch', async () => {
    const seen = { batches: 0, pings: 0 };
    const trap: CutTrap = {
      outbound: (head) => {
        if (head[0] === Kind.Batch) seen.batches++;
        else if (head[0] === Kind.Ping) seen.pings++;
        return false;
      },
    };
    const { consumer, producer } = await pair(trap);
    const anchor = consumer.createAnchor<string>();
    const got: string[] = [];
    let arrived: () => void = () => {};
    anchor.consume({
      item: (v) => {
        got.push(v);
        arrived();
      },
    });
    const sender = await producer.attachAnchor<string>(anchor.handle);
    const start = { batches: seen.batches, pings: seen.pings, at: performance.now() };
    for (const v of numbered(0, 200)) {
      // Each item is its own batch: the next is sent once the consumer has read this one.
      const read = new Promise<void>((r) => (arrived = r));
      await sender.send(v);
      await read;
    }
    const elapsed = performance.now() - start.at;
    expect(seen.batches - start.batches).toBeGreaterThanOrEqual(200);
    expect(seen.pings - start.pings).toBeLessThanOrEqual(1 + Math.ceil(elapsed / REPLAY_PING_SPACING_MS));
    // The last items are let go by a PING the spacing held back, not kept until the next batch.
    await waitFor(() => metric(producer, 'streaming_replay_bytes') === 0, 5_000, 'nothing kept for replay');
    await sender.finalize();
  });

  it('a full replay budget ends only finished streams that hold a ring: those whose items wait in the log stay kept', async () => {
    // No PONG ever reaches the producer: nothing is confirmed, finished streams linger, the log only grows.
    const trap: CutTrap = { swallow: (b) => b[0] === Kind.Pong };
    const { consumer, producer } = await pair(trap, { resume: { windowMs: 600_000, maxReplayBytes: 8192 } });
    for (let i = 0; i < 4; i++) {
      const anchor = consumer.createAnchor<string>();
      anchor.consume({ item: () => {} });
      const sender = await producer.attachAnchor<string>(anchor.handle);
      await sender.send('x');
      await sender.finalize();
    }
    await waitFor(() => metric(producer, 'streaming_lingering_streams') === 4, 5_000, 'four finished streams kept');
    const anchor = consumer.createAnchor<Uint8Array>();
    const got: number[] = [];
    anchor.consume({ item: (v) => void got.push(v[0]!) });
    const sender = await producer.attachAnchor<Uint8Array>(anchor.handle);
    for (let i = 0; i < 400; i++) await sender.send(new Uint8Array(64).fill(i & 0xff));
    await waitFor(() => got.length === 400, 5_000, 'every item read');
    // The log dropped its own oldest items to stay within the budget; ending the finished streams
    // would have freed nothing.
    expect(metric(producer, 'streaming_replay_bytes')).toBeLessThanOrEqual(8192 + 64 + 16);
    expect(metric(producer, 'streaming_lingering_streams')).toBe(4);
    await sender.finalize();
  });

  it('a batch lost with the link: its items, kept in the log, are sent again and read exactly once, in order', async () => {
    const { state, trap } = loseNext(Kind.Batch, 'outbound');
    const { consumer, producer, reconnect } = await pair(trap);
    const anchors = Array.from({ length: 8 }, () => consumer.createAnchor<string>());
    const reads = anchors.map((a) => collect(a));
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    for (const s of senders) for (const v of numbered(0, 10)) await s.send(v);
    await waitFor(() => metric(producer, 'streaming_replay_bytes') === 0, 5_000, 'the first items confirmed');
    // The next batch (every stream's items 10..19) is lost, and the link with it.
    state.armed = true;
    for (const s of senders) for (const v of numbered(10, 20)) await s.send(v);
    await waitFor(() => state.fired === 1, 5_000, 'the batch lost');
    await reconnect();
    await Promise.all(senders.map((s) => s.finalize()));
    for (const r of await Promise.all(reads)) expect(r).toEqual({ items: numbered(0, 20), error: null });
    expect(metric(producer, 'streaming_resumed_streams_total')).toBe(8);
  });

  it('a PONG lost with the link confirms nothing, and nothing the consumer had is sent twice', async () => {
    const { state, trap } = loseNext(Kind.Pong, 'inbound');
    const { consumer, producer, reconnect } = await pair(trap);
    const anchor = consumer.createAnchor<string>();
    const read = collect(anchor);
    const sender = await producer.attachAnchor<string>(anchor.handle);
    state.armed = true;
    for (const v of numbered(0, 30)) await sender.send(v);
    await waitFor(() => state.fired === 1, 5_000, 'the PONG lost');
    await reconnect();
    for (const v of numbered(30, 40)) await sender.send(v);
    await sender.finalize();
    expect(await read).toEqual({ items: numbered(0, 40), error: null });
    expect(metric(producer, 'streaming_resumed_streams_total')).toBe(1);
  });

  it.each([1, 3, 6])(
    'a rendezvous record released from a backlog takes what waits behind it into the ring too: batch %i after it lost, nothing lost or repeated',
    async (n) => {
      // Credit 4 (static): most items wait in the slot's queue when the big one is released from it.
      const state = { big: false, batches: 0, fired: 0 };
      const trap: CutTrap = {
        outbound: (head, body) => {
          const len = head.byteLength + (body?.byteLength ?? 0);
          if (len > 50_000) state.big = true;
          else if (state.big && state.fired === 0 && head[0] === Kind.Batch && len > 60 && ++state.batches === n) {
            state.fired++;
            return true;
          }
          return false;
        },
      };
      const { consumer, producer, reconnect } = await pair(trap, { mux: { initialCredit: 4, autoCredit: false } });
      const anchor = consumer.createAnchor<Uint8Array>();
      const read = collect(anchor);
      const sender = await producer.attachAnchor<Uint8Array>(anchor.handle);
      const small = (i: number) => new Uint8Array(8).fill(i);
      const sends: Promise<void>[] = [];
      for (let i = 0; i < 30; i++) sends.push(sender.send(small(i)));
      sends.push(sender.send(new Uint8Array(100_000).fill(200)));
      for (let i = 30; i < 60; i++) sends.push(sender.send(small(i)));
      await waitFor(() => state.fired === 1, 5_000, 'a batch lost');
      await reconnect();
      await Promise.all(sends);
      await sender.finalize();
      const { items, error } = await read;
      expect(error).toBeNull();
      expect(items.map((v) => (v.byteLength > 8 ? 'big' : String(v[0])))).toEqual([
        ...numbered(0, 30),
        'big',
        ...numbered(30, 60),
      ]);
    },
  );

  it('a stream whose record goes by rendezvous takes its items from the log into its own ring: a cut after it loses nothing', async () => {
    const { state, trap } = loseNext(Kind.Batch, 'outbound');
    const { consumer, producer, reconnect } = await pair(trap);
    const anchor = consumer.createAnchor<Uint8Array>();
    const read = collect(anchor);
    const sender = await producer.attachAnchor<Uint8Array>(anchor.handle);
    const small = (n: number) => new Uint8Array(8).fill(n);
    for (let i = 0; i < 5; i++) await sender.send(small(i));
    await sender.send(new Uint8Array(100_000).fill(9)); // over the 64 KiB batch cap
    state.armed = true;
    for (let i = 10; i < 15; i++) await sender.send(small(i));
    await waitFor(() => state.fired === 1, 5_000, 'a batch lost');
    await reconnect();
    await sender.finalize();
    const { items, error } = await read;
    expect(error).toBeNull();
    expect(items.map((v) => `${v.byteLength}:${v[0]}`)).toEqual([
      ...[0, 1, 2, 3, 4].map((i) => `8:${i}`),
      '100000:9',
      ...[10, 11, 12, 13, 14].map((i) => `8:${i}`),
    ]);
  });
});
