// An attach whose OpenSlot never reaches the consumer is ended by the stream watchdog after
// detectionMultiplier heartbeat windows (docs/protocol.md §10.8), like an attached slot gone silent:
// the consumer reads ERR_SENDER_DROPPED (retryable) and the firing is counted, long before the
// accept window would have reaped the bind.
import { afterEach, describe, expect, it } from 'vitest';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

describe('an attach whose OpenSlot is lost', () => {
  it('is ended by the stream watchdog after three heartbeat windows, not by the accept window', async () => {
    const runtime = new ManualRuntime();
    const [mc, mp] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: mc, runtime, mux: { heartbeatInterval: 1_000 } });
    const producer = await createNode({ messenger: mp, runtime });
    nodes.push(consumer, producer);
    const anchor = consumer.createAnchor<string>();
    mp.holdDelivery(); // nothing the producer writes arrives: its OpenSlot is lost
    await producer.attachAnchor<string>(anchor.handle);
    let outcome: { code: string; retryable?: boolean } | 'pending' | 'value' = 'pending';
    void anchor.next().then(
      () => (outcome = 'value'),
      (e: { code: string; retryable?: boolean }) => (outcome = e),
    );
    await runtime.advance(2_500); // two windows
    expect(outcome).toBe('pending');
    expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
    await runtime.advance(1_000); // the third
    expect(outcome).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true });
    expect(consumer.metricsRegistry.watchdogFirings).toBe(1);
    expect(consumer.metricsRegistry.unclaimedBindReaped).toBe(0);
    expect(consumer.metricsRegistry.liveSlots).toBe(0);
  });

  it('an attach whose OpenSlot arrives is not counted against the watchdog', async () => {
    const runtime = new ManualRuntime();
    const [mc, mp] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: mc, runtime, mux: { heartbeatInterval: 1_000 } });
    const producer = await createNode({ messenger: mp, runtime });
    nodes.push(consumer, producer);
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    let outcome = 'pending';
    void anchor.next().then(
      () => (outcome = 'value'),
      (e: { code: string }) => (outcome = e.code),
    );
    await runtime.advance(10_000);
    expect(outcome).toBe('pending');
    expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
    expect(sender.closed).toBe(false);
  });
});
