// A read (`next()`, a `for await` loop, `readable`) parked on its empty feed takes the next item
// straight from ingress (`_direct`), as a waiting push-mode reader does: one promise per item, and
// its credit returns with the batch that carried it. Anything else that reaches the feed (a
// terminal, a sender error, a gap marker, a cancel, a new feed) settles the read as before.
import { afterEach, describe, expect, it } from 'vitest';
import { SlotBuffer } from '../../src/mux/slot-buffer.ts';
import type { AnchorHost } from '../../src/stream/anchor.ts';
import { StreamAnchor } from '../../src/stream/anchor.ts';
import { gapText } from '../../src/stream/live-feed.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { FrameKind } from '../../src/wire/frame.ts';
import { nodePair } from '../support/node-pair.ts';

const host: AnchorHost = { anchorDone: () => {}, anchorLifecycle: () => {}, anchorUnattached: () => {} };

/** An anchor fed by one buffer as a mux bind feeds it, nobody reading yet. */
function fed() {
  const anchor = new StreamAnchor<string>(host, 'h', 1n);
  const buffer = new SlotBuffer(8);
  anchor._feed(buffer, 'mux', null);
  return { anchor, buffer };
}

/** How a promise settled, observed at once so a rejection is never unhandled. */
const outcome = <T>(p: Promise<T>) =>
  p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

describe('direct delivery to a parked read', () => {
  it('a next() on the empty feed registers there, and an item offered resolves it at once without entering the buffer', async () => {
    const { anchor, buffer } = fed();
    expect(anchor._direct(buffer, 'early')).toBe(false); // nobody waits yet
    const read = anchor.next();
    expect(buffer.direct).toBe(anchor);
    expect(anchor._direct(new SlotBuffer(8), 'x')).toBe(false); // another buffer
    expect(anchor._direct(buffer, 'a')).toBe(true);
    expect(buffer.length).toBe(0);
    expect(await read).toEqual({ done: false, value: 'a' });
    // Settled: the next offer waits for the next read.
    expect(anchor._direct(buffer, 'b')).toBe(false);
  });

  it('two reads at once get the items in order: the first parked, the second waiting behind it', async () => {
    const { anchor, buffer } = fed();
    const first = anchor.next();
    const second = anchor.next();
    expect(anchor._direct(buffer, 'a')).toBe(true);
    buffer.push(FrameKind.Item, 'b', 1);
    expect(await first).toEqual({ done: false, value: 'a' });
    expect(await second).toEqual({ done: false, value: 'b' });
  });

  it('a terminal, a sender error and a cancel settle a parked read as they would a waiting one', async () => {
    const done = fed();
    const end = done.anchor.next();
    done.buffer.push(FrameKind.Finalized, undefined, 0);
    expect(await end).toEqual({ done: true, value: undefined });

    const failed = fed();
    const it = failed.anchor[Symbol.asyncIterator]();
    const err = outcome(it.next());
    failed.buffer.push(FrameKind.SenderError, 'model crashed', 1);
    expect(await err).toMatchObject({ error: { code: 'ERR_SENDER_ERROR' } });
    // The loop reads on past the error, parked again.
    const after = it.next();
    expect(failed.anchor._direct(failed.buffer, 'next')).toBe(true);
    expect(await after).toEqual({ done: false, value: 'next' });

    const cancelled = fed();
    const read = cancelled.anchor.next();
    cancelled.anchor.cancel();
    expect(await read).toEqual({ done: true, value: undefined });
    expect(cancelled.anchor._direct(cancelled.buffer, 'late')).toBe(false);
  });

  it('refuses an item while a gap marker waits to stamp the next one, which then carries it', async () => {
    const { anchor, buffer } = fed();
    const read = anchor.next();
    buffer.push(FrameKind.SenderError, gapText(3, 10), 1);
    await Promise.resolve();
    expect(anchor._direct(buffer, 'a')).toBe(false);
    buffer.push(FrameKind.Item, 'a', 1);
    expect(await read).toEqual({ done: false, value: 'a' });
    expect(anchor.gap).toEqual({ dropped: 3, durationMs: 10 });
  });

  it('a read parked on a feed whose sender detached reads the next sender’s feed', async () => {
    const { anchor, buffer } = fed();
    const read = anchor.next();
    buffer.push(FrameKind.Detached, undefined, 0);
    await Promise.resolve();
    const next = new SlotBuffer(8);
    anchor._feed(next, 'mux', null);
    next.push(FrameKind.Item, 'from the second sender', 1);
    expect(await read).toEqual({ done: false, value: 'from the second sender' });
    expect(anchor._direct(buffer, 'stale')).toBe(false); // the old feed no longer reaches it
  });

  it('consume() refuses a parked next() at once and takes the items itself', async () => {
    const { anchor, buffer } = fed();
    const read = outcome(anchor.next());
    const got: string[] = [];
    anchor.consume({ item: (v) => void got.push(v) });
    expect(await read).toMatchObject({ error: { code: 'ERR_READER_ACTIVE' } });
    await Promise.resolve();
    expect(anchor._direct(buffer, 'a')).toBe(true);
    expect(got).toEqual(['a']);
  });

  it('over a node pair, a for-await loop in lockstep takes every item from ingress: no drain visit returns their credit', async () => {
    const { consumer, producer } = await nodePair(nodes, { initialCredit: 4 });
    const anchor = consumer.createAnchor<number>();
    const got: number[] = [];
    let seen: () => void = () => {};
    const reading = (async () => {
      for await (const v of anchor) {
        got.push(v);
        seen();
      }
    })();
    const sender = await producer.attachAnchor<number>(anchor.handle);
    // One item per batch, the next sent once the loop has read it (a decode engine's pass in lockstep).
    for (let i = 0; i < 40; i++) {
      const read = new Promise<void>((resolve) => {
        seen = resolve;
      });
      await sender.send(i);
      await read;
    }
    await sender.finalize();
    await reading;
    expect(got).toEqual(Array.from({ length: 40 }, (_, i) => i));
    // Each item found its read parked: every grant rode the arrival that carried the item.
    expect(consumer.metricsRegistry.drainVisits).toBe(0);
  });
});
