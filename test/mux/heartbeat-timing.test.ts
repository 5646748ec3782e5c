// A producer heartbeats at the interval its consumer advertised (docs/protocol.md §10.8), not on its own
// 200 ms sweep tick, and an idle healthy stream survives a consumer that watches short windows.
import { afterEach, describe, expect, it } from 'vitest';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { RecordType } from '../../src/wire/constants.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { isHeartbeatFrame } from '../../src/wire/frame.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

/** A consumer with `consumerMux`, a default producer, and the times the producer wrote a heartbeat. */
async function watchedPair(consumerMux: Record<string, unknown>) {
  const runtime = new ManualRuntime();
  const [mc, mp] = LoopMessenger.pair();
  const consumer = await createNode({ messenger: mc, runtime, mux: consumerMux });
  const producer = await createNode({ messenger: mp, runtime });
  nodes.push(consumer, producer);
  const beats: number[] = [];
  const send = mp.sendBatch.bind(mp);
  mp.sendBatch = (peer: string, lane: number, payload: Uint8Array) => {
    const d = decodeBatch(payload);
    for (const r of d.records) if (r.type === RecordType.Data && isHeartbeatFrame(r.body!)) beats.push(runtime.now());
    return send(peer, lane, payload);
  };
  const anchor = consumer.createAnchor<string>();
  const sender = await producer.attachAnchor<string>(anchor.handle);
  await sender.send('first');
  await runtime.advance(1);
  expect((await anchor.next()).value).toBe('first');
  // A reader parked on the anchor takes each heartbeat, so its credit comes back.
  let outcome = 'pending';
  void anchor.next().then(
    () => (outcome = 'value'),
    (e: { code: string }) => (outcome = e.code),
  );
  return { runtime, consumer, sender, beats, outcome: () => outcome };
}

describe('heartbeat timing', () => {
  for (const interval of [50, 100, 150, 300, 500]) {
    it(`a producer heartbeats every ${interval} ms when its consumer advertises ${interval} ms`, async () => {
      const { runtime, beats } = await watchedPair({ heartbeatInterval: interval });
      await runtime.advance(interval * 12);
      expect(beats.length).toBeGreaterThanOrEqual(11);
      const gaps = beats.slice(1).map((t, i) => t - beats[i]!);
      // Up to a tenth early (a beat may share a wake), never late.
      for (const g of gaps) {
        expect(g).toBeGreaterThanOrEqual(interval * 0.9);
        expect(g).toBeLessThanOrEqual(interval);
      }
    });
  }

  it('a consumer advertising 50 ms and watching 50 ms windows keeps a healthy idle producer', async () => {
    const { runtime, consumer, sender, outcome } = await watchedPair({
      heartbeatInterval: 50,
      creditSweepInterval: 50,
    });
    await runtime.advance(5_000); // a hundred windows with nothing but heartbeats
    expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
    expect(outcome()).toBe('pending');
    expect(sender.closed).toBe(false);
  });

  it('an interval advertised below the floor is kept at the floor by both sides', async () => {
    const { runtime, consumer, sender, beats, outcome } = await watchedPair({
      heartbeatInterval: 1,
      creditSweepInterval: 1,
    });
    await runtime.advance(500);
    const gaps = beats.slice(1).map((t, i) => t - beats[i]!);
    expect(gaps.length).toBeGreaterThan(0);
    for (const g of gaps) expect(g).toBeGreaterThanOrEqual(9);
    expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
    expect(outcome()).toBe('pending');
    expect(sender.closed).toBe(false);
  });

  it("200 streams at 50 ms each beat every 50 ms from the node's one timer, not a timer per stream", async () => {
    const runtime = new ManualRuntime();
    const [mc, mp] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: mc, runtime, mux: { heartbeatInterval: 50 } });
    const producer = await createNode({ messenger: mp, runtime });
    nodes.push(consumer, producer);
    const beats = new Map<number, number>();
    const send = mp.sendBatch.bind(mp);
    mp.sendBatch = (peer: string, lane: number, payload: Uint8Array) => {
      for (const r of decodeBatch(payload).records)
        if (r.type === RecordType.Data && isHeartbeatFrame(r.body!)) beats.set(r.slot, (beats.get(r.slot) ?? 0) + 1);
      return send(peer, lane, payload);
    };
    const anchors = Array.from({ length: 200 }, () => consumer.createAnchor<string>());
    const senders = [];
    for (const a of anchors) {
      senders.push(await producer.attachAnchor<string>(a.handle));
      await runtime.advance(1); // opened a millisecond apart: their beats are due at 200 different times
    }
    for (const a of anchors) void a.next().catch(() => {});
    beats.clear();
    let peak = 0;
    for (let t = 0; t < 1_000; t += 5) {
      await runtime.advance(5);
      peak = Math.max(peak, runtime.timerCount);
    }
    expect(peak).toBeLessThan(20);
    expect(beats.size).toBe(200);
    for (const n of beats.values()) expect(n).toBeGreaterThanOrEqual(19); // 1,000 ms at 50 ms
    expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
    expect(senders.every((s) => !s.closed)).toBe(true);
  });
});
