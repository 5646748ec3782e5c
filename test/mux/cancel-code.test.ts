// A consumer's cancel reaches the producer as ERR_STREAM_CANCELLED (a StreamErrorCode) in every
// ordering: before the OpenSlot arrived, with records still unread, after reads, and when many
// cancels do not fit one reply batch. A genuinely unknown slot keeps its own code, with a message
// that says what happened.
import { afterEach, describe, expect, it } from 'vitest';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import type { Admission } from '../../src/messenger/types.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

/**
 * A loop messenger whose batches are admitted one macrotask later, each delivered on its own: the
 * peer may run a wake between two of them, as a TCP reader that gets them in separate reads does.
 */
class PacedLoop extends LoopMessenger {
  runtime: ManualRuntime | null = null;
  override sendBatch(peer: string, lane: number, payload: Uint8Array): Admission {
    const rt = this.runtime;
    if (rt === null) return super.sendBatch(peer, lane, payload);
    const copy = payload.slice();
    return new Promise<void>((resolve, reject) =>
      rt.macrotask(() => {
        const a = super.sendBatch(peer, lane, copy);
        if (a === true) resolve();
        else a.then(resolve, reject);
      }),
    );
  }
}

async function pair(mux: Record<string, unknown> = {}, paced = false) {
  const runtime = new ManualRuntime();
  const mc = new PacedLoop();
  const mp = new LoopMessenger();
  mc.remote = mp;
  mp.remote = mc;
  if (paced) mc.runtime = runtime;
  const consumer = await createNode({ messenger: mc, runtime, mux: { initialCredit: 4, ...mux } });
  const producer = await createNode({ messenger: mp, runtime, mux: { initialCredit: 4, ...mux } });
  nodes.push(consumer, producer);
  return { runtime, consumer, producer, mc, mp };
}

async function expectCancelled(sender: StreamSender<string>): Promise<void> {
  expect(sender.cancelSignal.aborted).toBe(true);
  expect((sender.cancelSignal.reason as { code?: string }).code).toBe('ERR_STREAM_CANCELLED');
  await expect(sender.send('after')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
}

async function isSettled(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return settled;
}

describe('a consumer cancel reaches the producer as ERR_STREAM_CANCELLED', () => {
  it('when the cancel comes right after the attach, before the OpenSlot reached the consumer', async () => {
    const { runtime, consumer, producer, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    mp.holdDelivery(); // the OpenSlot is written but not yet delivered
    const sender = await producer.attachAnchor<string>(anchor.handle);
    anchor.cancel();
    mp.resumeDelivery();
    await runtime.advance(50);
    await expectCancelled(sender);
  });

  it('when the cancel comes right after the attach and the producer sends at once', async () => {
    const { runtime, consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    anchor.cancel();
    await sender.send('x');
    await runtime.advance(50);
    await expectCancelled(sender);
  });

  it('when a record is still unread', async () => {
    const { runtime, consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('one');
    await sender.send('two');
    await runtime.advance(10);
    anchor.cancel();
    await runtime.advance(50);
    await expectCancelled(sender);
  });

  it('for a send that waits for credit when the cancel arrives', async () => {
    const { runtime, consumer, producer } = await pair({ slotByteBudget: 64 });
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    for (let i = 0; i < 4; i++) await sender.send(`r${i}`); // the whole credit, unread
    let waiting: Promise<void> | null = null;
    for (let i = 0; i < 40 && waiting === null; i++) {
      const p = sender.send('x'.repeat(16));
      if (!(await isSettled(p))) waiting = p;
    }
    expect(waiting).not.toBeNull();
    const outcome = waiting!.then(
      () => 'resolved',
      (e: { code: string }) => e.code,
    );
    await runtime.advance(10);
    anchor.cancel();
    await runtime.advance(50);
    expect(await outcome).toBe('ERR_STREAM_CANCELLED');
    await expectCancelled(sender);
  });

  it('after the consumer read every record', async () => {
    const { runtime, consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('one');
    await runtime.advance(10);
    expect((await anchor.next()).value).toBe('one');
    await runtime.advance(10);
    anchor.cancel();
    await runtime.advance(50);
    await expectCancelled(sender);
  });

  it('for every producer when more cancels are due than one reply batch carries', async () => {
    // 100 closes and lifecycles are 3,600 bytes of replies: several 1 KiB batches.
    const { runtime, consumer, producer } = await pair({ initialCredit: 2, maxBatchBytes: 1024 }, true);
    const anchors = Array.from({ length: 100 }, () => consumer.createAnchor<string>());
    const senders: StreamSender<string>[] = [];
    for (const a of anchors) senders.push(await producer.attachAnchor<string>(a.handle));
    await runtime.advance(10);
    for (const a of anchors) a.cancel();
    await runtime.advance(50);
    const codes = new Map<string, number>();
    for (const s of senders) {
      const c = s.cancelSignal.aborted ? ((s.cancelSignal.reason as { code?: string }).code ?? '?') : 'not aborted';
      codes.set(c, (codes.get(c) ?? 0) + 1);
    }
    expect([...codes]).toEqual([['ERR_STREAM_CANCELLED', 100]]);
  });

  it('a slot the consumer never bound keeps ERR_UNKNOWN_SLOT, with a message that says what happened', async () => {
    const { runtime, consumer, producer, mp } = await pair({ acceptWindow: 1_000, heartbeatInterval: 60_000 });
    const anchor = consumer.createAnchor<string>();
    mp.holdDelivery(); // the OpenSlot arrives after the accept window reaped the bind
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await runtime.advance(1_500);
    mp.resumeDelivery();
    await runtime.advance(50);
    const e = sender.cancelSignal.reason as { code?: string; message?: string };
    expect(e.code).toBe('ERR_UNKNOWN_SLOT');
    expect(e.message).toMatch(
      /^the consumer has no stream on Slot\(0x[0-9a-f]+\/0x[0-9a-f]+\) \(UnknownSlot\): .*accept window expired/,
    );
  });
});
