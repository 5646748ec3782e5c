// Push-mode reading (`anchor.consume`): items in order through callbacks, one end, pause holds the
// sender to its credit, sender errors, drops, a throwing callback, one reader per anchor, and the
// feeds an anchor can have (mux attach, zero-RTT ticket, a same-node sender, a re-attach after
// Detached).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LanemuxError } from '../../src/errors.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import type { AnchorConsumer, AnchorConsumption, StreamAnchor } from '../../src/stream/anchor.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { nodePair } from '../support/node-pair.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

const pair = (mux = {}) => nodePair(nodes, mux);

/** Consume `anchor` into `items`; resolves with the error `end` got (null for a clean end). */
function collect<T>(anchor: StreamAnchor<T>, items: T[], extra: Partial<AnchorConsumer<T>> = {}) {
  let ends = 0;
  const ended = new Promise<LanemuxError | null>((resolve) => {
    anchor.consume({
      item: (v) => {
        items.push(v);
      },
      ...extra,
      end: (e) => {
        ends++;
        extra.end?.(e);
        resolve(e);
      },
    });
  });
  return { ended, ends: () => ends };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Turns of the event loop until `done()` holds (at most 200). */
async function turnsUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await tick();
  expect(done()).toBe(true);
}

/** The producer's cancelSignal fires, and its next send rejects ERR_STREAM_CANCELLED. */
async function producerCancelled(sender: StreamSender<never>): Promise<void> {
  const signal = sender.cancelSignal;
  if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  await expect(sender.send(undefined as never)).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
}

describe('push-mode reading (anchor.consume)', () => {
  it('delivers every item in order and calls end(null) once on finalize', async () => {
    const { consumer, producer } = await pair({ initialCredit: 4 });
    const anchor = consumer.createAnchor<string>();
    const got: string[] = [];
    const c = collect(anchor, got);
    const sender = await producer.attachAnchor<string>(anchor.handle);
    for (let i = 0; i < 200; i++) await sender.send(`t${i}`);
    await sender.finalize();
    expect(await c.ended).toBeNull();
    expect(got).toEqual(Array.from({ length: 200 }, (_, i) => `t${i}`));
    await tick();
    expect(c.ends()).toBe(1);
    expect(anchor.finished).toBe(true);
    expect(consumer.metricsRegistry.liveSlots + producer.metricsRegistry.liveSlots).toBe(0);
  });

  it('reads many streams fed by one batch without a promise per item', async () => {
    const { consumer, producer } = await pair({ initialCredit: 8 });
    const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<number>());
    const got = anchors.map(() => [] as number[]);
    const ends = anchors.map((a, i) => collect(a, got[i]!).ended);
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<number>(a.handle)));
    for (let pass = 0; pass < 20; pass++) {
      // One pass: every stream's send in the same task, so they share batches.
      await Promise.all(senders.map((s) => s.send(pass)));
    }
    await Promise.all(senders.map((s) => s.finalize()));
    expect(await Promise.all(ends)).toEqual(anchors.map(() => null));
    for (const g of got) expect(g).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('returning false pauses: unread items hold the sender to its credit until resume()', async () => {
    const C = 4;
    const { consumer, producer } = await pair({ initialCredit: C });
    const anchor = consumer.createAnchor<number>();
    const got: number[] = [];
    let ctl: ReturnType<StreamAnchor<number>['consume']> | null = null;
    const ended = new Promise<LanemuxError | null>((resolve) => {
      ctl = anchor.consume({ item: (v) => (got.push(v), v !== 0), end: resolve });
    });
    const sender = await producer.attachAnchor<number>(anchor.handle);
    let acked = 0;
    const sends = Array.from({ length: 3 * C }, (_, i) => sender.send(i).then(() => acked++));
    for (let i = 0; i < 20; i++) await tick();
    // Paused after item 0: the consumer took one record, so the sender may have C + 1 records out,
    // and nothing more reached the callback.
    expect(got).toEqual([0]);
    expect(ctl!.paused).toBe(true);
    // The consumer holds at most C records; the rest wait at the producer for credit.
    expect(anchor.credit!.outstanding).toBeLessThanOrEqual(C);
    expect(producer.metricsRegistry.withheldRecords).toBeGreaterThanOrEqual(3 * C - (C + 1));
    ctl!.resume();
    ctl!.resume();
    await Promise.all(sends);
    await sender.finalize();
    expect(await ended).toBeNull();
    expect(got).toEqual(Array.from({ length: 3 * C }, (_, i) => i));
    expect(acked).toBe(3 * C);
  });

  it('pause() from outside stops delivery at the next item; resume() delivers from a later microtask', async () => {
    const { consumer, producer } = await pair({ initialCredit: 8 });
    const anchor = consumer.createAnchor<number>();
    const got: number[] = [];
    const ctl = anchor.consume({ item: (v) => void got.push(v) });
    ctl.pause();
    const sender = await producer.attachAnchor<number>(anchor.handle);
    for (let i = 0; i < 5; i++) void sender.send(i);
    for (let i = 0; i < 10; i++) await tick();
    expect(got).toEqual([]);
    ctl.resume();
    // Never inside resume() itself.
    expect(got).toEqual([]);
    await tick();
    expect(got).toEqual([0, 1, 2, 3, 4]);
  });

  it('a SenderError goes to senderError and the stream goes on', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const got: string[] = [];
    const errors: string[] = [];
    const c = collect(anchor, got, { senderError: (e) => errors.push(`${e.code}: ${e.message}`) });
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    await sender.error('bad token');
    await sender.send('b');
    await sender.finalize();
    expect(await c.ended).toBeNull();
    expect(got).toEqual(['a', 'b']);
    expect(errors).toEqual(['ERR_SENDER_ERROR: bad token']);
  });

  it('without senderError, a SenderError ends the stream through end(error) and cancels it', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const got: string[] = [];
    const c = collect(anchor, got);
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    await sender.error('bad token');
    const e = await c.ended;
    expect(e?.code).toBe('ERR_SENDER_ERROR');
    expect(got).toEqual(['a']);
    expect(anchor.finished).toBe(true);
    // The producer learns of the cancel.
    await producerCancelled(sender);
  });

  it('a producer that goes away ends the stream with ERR_SENDER_DROPPED (retryable)', async () => {
    const { consumer, producer, link } = await pair();
    const anchor = consumer.createAnchor<string>();
    const got: string[] = [];
    const c = collect(anchor, got);
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    for (let i = 0; i < 5 && got.length === 0; i++) await tick();
    link.kill();
    const e = await c.ended;
    expect(e?.code).toBe('ERR_SENDER_DROPPED');
    expect(e?.retryable).toBe(true);
    expect(got).toEqual(['a']);
  });

  it('a throwing item callback cancels the stream and ends it with ERR_CONSUMER_THREW', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<number>();
    const boom = new Error('render failed');
    let calls = 0;
    const ended = new Promise<LanemuxError | null>((resolve) => {
      anchor.consume({
        item: (v) => {
          calls++;
          if (v === 1) throw boom;
        },
        end: resolve,
      });
    });
    const sender = await producer.attachAnchor<number>(anchor.handle);
    await sender.send(0);
    await sender.send(1);
    const e = await ended;
    expect(e?.code).toBe('ERR_CONSUMER_THREW');
    expect(e?.message).toContain('render failed');
    expect(e?.cause).toBe(boom);
    expect(calls).toBe(2);
    expect(anchor.finished).toBe(true);
    await producerCancelled(sender);
  });

  it('cancel() inside item stops delivery and ends once with null', async () => {
    const { consumer, producer } = await pair({ initialCredit: 16 });
    const anchor = consumer.createAnchor<number>();
    const got: number[] = [];
    const c = collect(anchor, got, {
      item: (v) => {
        got.push(v);
        if (v === 2) anchor.cancel();
      },
    });
    const sender = await producer.attachAnchor<number>(anchor.handle);
    for (let i = 0; i < 8; i++) void sender.send(i).catch(() => {});
    expect(await c.ended).toBeNull();
    for (let i = 0; i < 5; i++) await tick();
    expect(got).toEqual([0, 1, 2]);
    expect(c.ends()).toBe(1);
  });

  it('a paused consumer that cancels hears its end once, without a resume (no reader left waiting)', async () => {
    const { consumer, producer } = await pair({ initialCredit: 16 });
    const anchor = consumer.createAnchor<number>();
    const got: number[] = [];
    // Returning false after item 1 pauses; the consumer then gives up while paused.
    const c = collect(anchor, got, {
      item: (v) => {
        got.push(v);
        return v < 1;
      },
    });
    const sender = await producer.attachAnchor<number>(anchor.handle);
    for (let i = 0; i < 4; i++) void sender.send(i).catch(() => {});
    await turnsUntil(() => got.length === 2);
    anchor.cancel();
    expect(await c.ended).toBeNull();
    for (let i = 0; i < 5; i++) await tick();
    expect(got).toEqual([0, 1]);
    expect(c.ends()).toBe(1);
  });

  it('an anchor has one reader: next(), takeAvailable() and a second consume() throw ERR_READER_ACTIVE', async () => {
    const { consumer } = await pair();
    const anchor = consumer.createAnchor<number>();
    anchor.consume({ item: () => {} });
    expect(() => anchor.consume({ item: () => {} })).toThrow(expect.objectContaining({ code: 'ERR_READER_ACTIVE' }));
    expect(() => anchor.takeAvailable([])).toThrow(expect.objectContaining({ code: 'ERR_READER_ACTIVE' }));
    await expect(anchor.next()).rejects.toMatchObject({ code: 'ERR_READER_ACTIVE' });
  });

  it('works on a zero-RTT ticket, a same-node sender, and across a Detached and a second attach', async () => {
    const { consumer, producer } = await pair();
    // Zero-RTT: the OpenSlot claims the pre-bind.
    const a1 = consumer.createAnchor<string>();
    const g1: string[] = [];
    const c1 = collect(a1, g1);
    const s1 = await producer.openAnchorStream<string>(a1.handle, consumer.prebindAnchor(a1)!);
    await s1.send('z');
    await s1.finalize();
    expect(await c1.ended).toBeNull();
    expect(g1).toEqual(['z']);

    // Same node: the local feed.
    const a2 = consumer.createAnchor<string>();
    const g2: string[] = [];
    const c2 = collect(a2, g2);
    const s2 = await consumer.attachAnchor<string>(a2.handle);
    await s2.send('l1');
    await s2.send('l2');
    await s2.finalize();
    expect(await c2.ended).toBeNull();
    expect(g2).toEqual(['l1', 'l2']);

    // Detached, then another sender.
    const a3 = consumer.createAnchor<string>();
    const g3: string[] = [];
    const c3 = collect(a3, g3);
    const first = await producer.attachAnchor<string>(a3.handle);
    await first.send('one');
    await first.detach();
    for (let i = 0; i < 10; i++) await tick();
    const second = await producer.attachAnchor<string>(a3.handle);
    await second.send('two');
    await second.finalize();
    expect(await c3.ended).toBeNull();
    expect(g3).toEqual(['one', 'two']);
  });
});

describe('push-mode reading: senderError callbacks that throw or pause, a next() parked before consume()', () => {
  // Errors the drain queue re-threw from a microtask (captured so they cannot crash the run).
  let stray: unknown[] = [];
  const realQueueMicrotask = globalThis.queueMicrotask;
  beforeEach(() => {
    stray = [];
    globalThis.queueMicrotask = (cb: () => void) =>
      realQueueMicrotask(() => {
        try {
          cb();
        } catch (e) {
          stray.push(e);
        }
      });
  });
  // Runs before the file's afterEach closes the nodes, as the restore did before.
  afterEach(() => {
    globalThis.queueMicrotask = realQueueMicrotask;
  });

  it('a throwing senderError callback ends the stream (like a throwing item) instead of leaving it hung', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const got: string[] = [];
    let endedWith: LanemuxError | null | undefined;
    let ends = 0;
    anchor.consume({
      item: (v) => void got.push(v),
      senderError: () => {
        throw new Error('handler bug');
      },
      end: (e) => {
        ends++;
        endedWith = e;
      },
    });
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    await sender.error('bad token');
    await sender.send('b').catch(() => {});
    for (let i = 0; i < 50 && ends === 0; i++) await tick();
    // The stream ends once, with an error, and is cancelled (its credit and bind released).
    expect(ends).toBe(1);
    expect(endedWith?.code).toBe('ERR_CONSUMER_THREW');
    expect(anchor.finished).toBe(true);
    expect(got).toEqual(['a']);
    // The throw must not escape as an uncaught exception (a process crash under Node's default).
    expect(stray).toEqual([]);
  });

  it('pause() called inside senderError stops delivery before the next item', async () => {
    const { consumer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const got: string[] = [];
    const errors: string[] = [];
    let ctl: AnchorConsumption | null = null;
    ctl = anchor.consume({
      item: (v) => void got.push(v),
      senderError: (e) => {
        errors.push(e.message);
        ctl!.pause();
      },
    });
    // A same-node sender writes straight into the anchor's channel: all four frames are there
    // when the anchor's drain runs.
    const sender = await consumer.attachAnchor<string>(anchor.handle);
    void sender.send('a');
    void sender.error('bad token');
    void sender.send('b');
    void sender.send('c');
    for (let i = 0; i < 10; i++) await tick();
    expect(errors).toEqual(['bad token']);
    expect(ctl.paused).toBe(true);
    // Paused: nothing after the error may reach item().
    expect(got).toEqual(['a']);
    ctl.resume();
    for (let i = 0; i < 10; i++) await tick();
    expect(got).toEqual(['a', 'b', 'c']);
  });

  it('a next() already pending when consume() starts does not take an item from the push-mode reader', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<number>();
    // Parked on the empty feed before push mode starts.
    const pending = anchor.next();
    // Settled later; observe it now so a rejection is never unhandled.
    const outcome = pending.then(
      (r) => ({ resolved: r }),
      (e: unknown) => ({ rejected: e }),
    );
    const got: number[] = [];
    const ended = new Promise<LanemuxError | null>((resolve) => {
      anchor.consume({ item: (v) => void got.push(v), end: resolve });
    });
    const sender = await producer.attachAnchor<number>(anchor.handle);
    await sender.send(1);
    await sender.send(2);
    await sender.finalize();
    expect(await ended).toBeNull();
    // One reader: every item reaches the consumer; the parked next() is refused, not fed.
    expect(got).toEqual([1, 2]);
    expect(await outcome).toMatchObject({ rejected: { code: 'ERR_READER_ACTIVE' } });
  });
});
