// Review regressions for push-mode reading (`anchor.consume`): a consumer's `senderError` callback
// that throws, and a `pause()` made inside `senderError`.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LanemuxError } from '../../src/errors.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import type { AnchorConsumption } from '../../src/stream/anchor.ts';
import { nodePair } from '../support/node-pair.ts';

const nodes: LanemuxNode[] = [];
/** Errors the drain queue re-threw from a microtask (captured so they cannot crash the run). */
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

afterEach(async () => {
  globalThis.queueMicrotask = realQueueMicrotask;
  for (const n of nodes.splice(0)) await n.close();
});

const pair = () => nodePair(nodes);

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('review: consume() callbacks', () => {
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
    const outcome = pending.then((r) => ({ resolved: r }), (e: unknown) => ({ rejected: e }));
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
