// Issue 5, lifecycle stop and cancel (docs/protocol.md §10.3) over the in-process
// messenger: requestStop and cancel travel as LifecycleSlot records naming the session, cancel beats
// stop, a signal for an old session is ignored even after the slot's generation wrapped, a stop made
// before the OpenSlot is kept by the bind and delivered at claim, and an idle producer learns of a
// cancel without sending.
import { afterEach, describe, expect, it } from 'vitest';
import type { MessageHandler } from '../../src/messenger/types.ts';
import { createNode } from '../../src/stream/node.ts';
import type { LanemuxNode, NodeOptions } from '../../src/stream/node.ts';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { BatchEncoder } from '../../src/wire/encoder.ts';
import { LifecycleAction, RecordType } from '../../src/wire/constants.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { readAll } from '../support/read-all.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

/** A loop messenger that keeps its batch handlers, so a test can inject a crafted batch. */
class InjectableLoop extends LoopMessenger {
  readonly batchHandlers: MessageHandler[] = [];
  override registerBatchHandler(lane: number, handler: MessageHandler): void {
    this.batchHandlers[lane] = handler;
    super.registerBatchHandler(lane, handler);
  }
}

async function pair(mux: NodeOptions['mux'] = {}) {
  const mc = new LoopMessenger();
  const mp = new InjectableLoop();
  mc.remote = mp;
  mp.remote = mc;
  const consumer = await createNode({ messenger: mc, mux });
  const producer = await createNode({ messenger: mp, mux });
  nodes.push(consumer, producer);
  return { consumer, producer, mc, mp };
}

function records(m: LoopMessenger) {
  return m.sent.flatMap((b) => {
    const d = decodeBatch(b.payload);
    return d.records.map((r) => ({ ...r, lane: b.lane, epoch: d.header!.epoch, batchSeq: d.header!.batchSeq }));
  });
}

/** Lifecycle records the consumer wrote for one session. */
const lifecycles = (mc: LoopMessenger, session: bigint) =>
  records(mc)
    .filter((r) => r.type === RecordType.LifecycleSlot && r.sessionId === session)
    .map((r) => r.lifecycleAction);

const aborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted ? Promise.resolve() : new Promise((r) => signal.addEventListener('abort', () => r(), { once: true }));

/** Let the loop messenger and the batchers run (microtasks + a few macrotasks). */
const settle = async (rounds = 5): Promise<void> => {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
};

/** The producer's OpenSlot for a session: its slot id and lane. */
const openOf = (mp: LoopMessenger, session: bigint) =>
  records(mp).find((r) => r.type === RecordType.OpenSlot && r.sessionId === session)!;

describe('stop', () => {
  it('requestStop travels as one LifecycleSlot{stop} naming the session; the producer may send its tail and finalize', async () => {
    const { consumer, producer, mc, mp } = await pair({ initialCredit: 4 });
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    await s.send('t0');
    const it = anchor[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ done: false, value: 't0' });
    // Repeated stops in one tick are one signal.
    anchor.requestStop();
    anchor.requestStop();
    anchor.requestStop();
    await aborted(s.stopSignal);
    expect(s.cancelSignal.aborted).toBe(false);
    const session = anchor.bind!.sessionId;
    expect(lifecycles(mc, session)).toEqual([LifecycleAction.Stop]);
    // It names the producer's slot and rides the slot's lane.
    const open = openOf(mp, session);
    const rec = records(mc).find((r) => r.type === RecordType.LifecycleSlot)!;
    expect([rec.slot, rec.lane]).toEqual([open.slot, open.lane]);
    // The tail goes through, more than one window of it.
    for (let i = 1; i <= 12; i++) await s.send(`t${i}`);
    await s.finalize();
    const rest: string[] = [];
    for (let r = await it.next(); !r.done; r = await it.next()) rest.push(r.value);
    expect(rest).toEqual(Array.from({ length: 12 }, (_, i) => `t${i + 1}`));
    expect(await s.retired()).toBe('Sent');
  });

  it('a stop after the stream finished sends nothing', async () => {
    const { consumer, producer, mc } = await pair();
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    const session = anchor.bind!.sessionId;
    await s.finalize();
    expect(await readAll(anchor)).toEqual([]);
    anchor.requestStop();
    await settle();
    expect(lifecycles(mc, session)).toEqual([]);
  });
});

describe('cancel', () => {
  it('an idle producer learns of a cancel without sending: both signals fire, further sends fail, delivery ends', async () => {
    const { consumer, producer, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    await s.send('one');
    const it = anchor[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ done: false, value: 'one' });
    await settle();
    const before = mp.sent.length;
    anchor.cancel();
    await aborted(s.cancelSignal);
    expect(s.stopSignal.aborted).toBe(true);
    expect(mp.sent.length, 'the producer wrote nothing to learn it').toBe(before);
    await expect(s.send('two')).rejects.toBeDefined();
    expect(await it.next()).toEqual({ done: true, value: undefined });
    expect(producer.metricsRegistry.liveSlots).toBe(0);
  });

  it('cancel travels as a LifecycleSlot{cancel} naming the session (issue: stop and cancel travel as LifecycleSlot records)', async () => {
    const { consumer, producer, mc, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    await s.send('one');
    await settle();
    const session = anchor.bind!.sessionId;
    anchor.cancel();
    await aborted(s.cancelSignal);
    await settle();
    const open = openOf(mp, session);
    const recs = records(mc).filter((r) => r.type === RecordType.LifecycleSlot && r.sessionId === session);
    expect(
      recs.map((r) => [r.slot, r.lifecycleAction]),
      'LifecycleSlot records for the cancelled session',
    ).toEqual([[open.slot, LifecycleAction.Cancel]]);
  });

  it('cancel beats stop: a stop and a cancel in one tick reach the producer as a cancel', async () => {
    const { consumer, producer, mc } = await pair();
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    await s.send('one');
    await settle();
    const session = anchor.bind!.sessionId;
    anchor.requestStop();
    anchor.cancel();
    await aborted(s.cancelSignal);
    expect(s.stopSignal.aborted).toBe(true);
    await expect(s.send('two')).rejects.toBeDefined();
    await settle();
    // On the wire: the session's last lifecycle word is cancel (INBOX-02 coalesces stop+cancel into cancel).
    expect(lifecycles(mc, session).at(-1), 'last LifecycleSlot action for the session').toBe(LifecycleAction.Cancel);
  });

  it('a crafted [cancel, stop] pair for one session in one batch is a cancel at the producer (cancel beats stop on ingress)', async () => {
    const { consumer, producer, mc, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    await s.send('x');
    await anchor.next();
    await settle();
    const session = anchor.bind!.sessionId;
    const open = openOf(mp, session);
    inject(mc, mp, open.lane, (enc) => {
      enc.appendLifecycleSlot(open.slot, 0, session, LifecycleAction.Cancel);
      enc.appendLifecycleSlot(open.slot, 0, session, LifecycleAction.Stop);
    });
    await aborted(s.cancelSignal);
    expect(s.stopSignal.aborted).toBe(true);
    await expect(s.send('y')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
  });
});

describe('old sessions and early signals', () => {
  it('a signal for an old session is ignored even after the slot generation wrapped (INBOX-01)', async () => {
    const { consumer, producer, mc, mp } = await pair();
    // Stream 0 takes index 0 at generation g; each later stream reuses index 0 at the next generation.
    const first = { slot: -1, session: 0n };
    let live: { anchor: StreamAnchor<string>; sender: StreamSender<string>; slot: number; session: bigint } | null =
      null;
    for (let i = 0; i < 300 && live === null; i++) {
      const anchor = consumer.createAnchor<string>();
      const sender = await producer.attachAnchor<string>(anchor.handle);
      const session = anchor.bind!.sessionId;
      const slot = openOf(mp, session).slot;
      if (i === 0) Object.assign(first, { slot, session });
      else if (slot === first.slot) {
        live = { anchor, sender, slot, session };
        break;
      }
      await sender.finalize();
      expect(await readAll(anchor)).toEqual([]);
    }
    expect(live, 'index 0 came back with the first generation').not.toBeNull();
    const { anchor, sender } = live!;
    expect(live!.session).not.toBe(first.session);
    // Same SlotId, old session: both a stop and a cancel are ignored.
    const open = openOf(mp, live!.session);
    inject(mc, mp, open.lane, (enc) => {
      enc.appendLifecycleSlot(first.slot, 0, first.session, LifecycleAction.Cancel);
      enc.appendLifecycleSlot(first.slot, 0, first.session, LifecycleAction.Stop);
    });
    await settle();
    expect(sender.stopSignal.aborted).toBe(false);
    expect(sender.cancelSignal.aborted).toBe(false);
    await sender.send('still alive');
    // The same crafted record with the live session does reach the producer (the path is real).
    inject(mc, mp, open.lane, (enc) => enc.appendLifecycleSlot(live!.slot, 0, live!.session, LifecycleAction.Stop));
    await aborted(sender.stopSignal);
    expect(sender.cancelSignal.aborted).toBe(false);
    await sender.finalize();
    expect(await readAll(anchor)).toEqual(['still alive']);
  });

  it('a stop made before the OpenSlot arrives is kept by the pre-bind and delivered at claim', async () => {
    const { consumer, producer } = await pair({ initialCredit: 2 });
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    anchor.requestStop();
    const s = await producer.openAnchorStream<string>(anchor.handle, ticket);
    await aborted(s.stopSignal);
    expect(s.cancelSignal.aborted).toBe(false);
    const read = readAll(anchor);
    for (const t of ['tail 1', 'tail 2', 'tail 3', 'tail 4']) await s.send(t);
    await s.finalize();
    expect(await read).toEqual(['tail 1', 'tail 2', 'tail 3', 'tail 4']);
  });

  it('a stop made after the attach answer but before its OpenSlot arrives is delivered at claim', async () => {
    const { consumer, producer, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    mp.holdDelivery(); // the producer's batches (its OpenSlot) wait; the attach request does not
    const s = await producer.attachAnchor<string>(anchor.handle);
    expect(anchor.bind!.claimed).toBe(false);
    anchor.requestStop();
    await settle();
    expect(s.stopSignal.aborted).toBe(false);
    mp.resumeDelivery();
    await aborted(s.stopSignal);
    expect(s.cancelSignal.aborted).toBe(false);
    await s.send('tail');
    await s.finalize();
    expect(await readAll(anchor)).toEqual(['tail']);
  });

  it('a cancel made before the OpenSlot arrives ends the producer at claim, without a send', async () => {
    const { consumer, producer, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    anchor.cancel();
    const s = await producer.openAnchorStream<string>(anchor.handle, ticket);
    const written = mp.sent.length;
    await aborted(s.cancelSignal);
    expect(mp.sent.length).toBe(written);
    await expect(s.send('x')).rejects.toBeDefined();
    expect(await anchor.next()).toEqual({ done: true, value: undefined });
  });
});

describe('same-worker senders', () => {
  it('a same-worker producer learns of a cancel without sending (cancelSignal fires; sends fail)', async () => {
    const { consumer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const s = await consumer.attachAnchor<string>(anchor.handle);
    expect(s.cancelSignal).toBeInstanceOf(AbortSignal);
    await s.send('one');
    expect(await anchor.next()).toEqual({ done: false, value: 'one' });
    anchor.cancel();
    await settle();
    expect(s.cancelSignal.aborted, 'cancelSignal of an idle same-worker producer').toBe(true);
    await expect(s.send('two')).rejects.toBeDefined();
  });

  it('a same-worker producer sees requestStop on its stopSignal, and may still send its tail', async () => {
    const { consumer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const s = await consumer.attachAnchor<string>(anchor.handle);
    expect(s.stopSignal).toBeInstanceOf(AbortSignal);
    anchor.requestStop();
    await settle();
    expect(s.stopSignal.aborted, 'stopSignal of a same-worker producer').toBe(true);
    expect(s.cancelSignal.aborted).toBe(false);
    await s.send('tail');
    await s.finalize();
    expect(await readAll(anchor)).toEqual(['tail']);
  });
});

/**
 * Hand the producer a batch as if the consumer wrote it on `lane`: the consumer's epoch and next
 * batch_seq on that lane, or epoch 1 / seq 0 when it has written nothing there yet (epochs start at 1,
 * so a later real batch is never older than the crafted one).
 */
function inject(mc: LoopMessenger, mp: InjectableLoop, lane: number, fill: (enc: BatchEncoder) => void): void {
  const last = mc.sent
    .filter((b) => b.lane === lane)
    .map((b) => decodeBatch(b.payload).header!)
    .at(-1);
  const enc = new BatchEncoder();
  enc.begin(last?.epoch ?? 1n, last === undefined ? 0 : (last.batchSeq + 1) >>> 0, lane);
  fill(enc);
  const payload = enc.finish().slice();
  mp.batchHandlers[lane]!(mc.self.id, lane, payload);
}
