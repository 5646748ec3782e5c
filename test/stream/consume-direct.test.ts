// When a push-mode reader (`anchor.consume`) takes an item straight from ingress (`_direct`): only
// while it waits on its (empty) feed, not paused, not inside its own item callback, with no gap
// marker to stamp; what it takes that way is delivered exactly as its drain would deliver it.
import { afterEach, describe, expect, it } from 'vitest';
import { SlotBuffer } from '../../src/mux/slot-buffer.ts';
import type { AnchorHost } from '../../src/stream/anchor.ts';
import { StreamAnchor } from '../../src/stream/anchor.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { gapText } from '../../src/stream/live-feed.ts';
import { FrameKind } from '../../src/wire/frame.ts';
import { nodePair } from '../support/node-pair.ts';

const host: AnchorHost = { anchorDone: () => {}, anchorLifecycle: () => {}, anchorUnattached: () => {} };

/** An anchor fed by one buffer as a mux bind feeds it, read in push mode; drained once (so it waits). */
async function waiting(item: (v: string) => boolean | void = () => {}) {
  const anchor = new StreamAnchor<string>(host, 'h', 1n);
  const buffer = new SlotBuffer(8);
  anchor._feed(buffer, 'mux', null);
  const ctl = anchor.consume({ item });
  await Promise.resolve();
  return { anchor, buffer, ctl };
}

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

describe('direct delivery to a push-mode reader', () => {
  it('the reader registers on its feed; while it waits, an item offered reaches item() at once', async () => {
    const got: string[] = [];
    const { anchor, buffer } = await waiting((v) => void got.push(v));
    expect(buffer.direct).toBe(anchor);
    expect(anchor._direct(buffer, 'a')).toBe(true);
    expect(got).toEqual(['a']);
    expect(anchor._direct(buffer, 'b')).toBe(true);
    expect(got).toEqual(['a', 'b']);
  });

  it('refuses an item for another buffer, and while paused (by item() returning false or pause())', async () => {
    const got: string[] = [];
    const { anchor, buffer, ctl } = await waiting((v) => (got.push(v), v !== 'stop'));
    expect(anchor._direct(new SlotBuffer(8), 'x')).toBe(false);
    expect(anchor._direct(buffer, 'stop')).toBe(true);
    expect(ctl.paused).toBe(true);
    expect(anchor._direct(buffer, 'y')).toBe(false);
    ctl.resume();
    expect(anchor._direct(buffer, 'a')).toBe(true);
    ctl.pause();
    expect(anchor._direct(buffer, 'z')).toBe(false);
    expect(got).toEqual(['stop', 'a']);
  });

  it('refuses an item offered inside its own item callback (no re-entry)', async () => {
    const answers: boolean[] = [];
    const box: { anchor?: StreamAnchor<string>; buffer?: SlotBuffer } = {};
    const w = await waiting((v) => {
      if (v === 'a') answers.push(box.anchor!._direct(box.buffer!, 'nested'));
    });
    box.anchor = w.anchor;
    box.buffer = w.buffer;
    expect(w.anchor._direct(w.buffer, 'a')).toBe(true);
    expect(answers).toEqual([false]);
  });

  it('refuses an item while a gap marker waits to stamp the next one, which then carries it', async () => {
    const gaps: unknown[] = [];
    const anchor = new StreamAnchor<string>(host, 'h', 1n);
    const buffer = new SlotBuffer(8);
    anchor._feed(buffer, 'mux', null);
    anchor.consume({ item: (_v, gap) => void gaps.push(gap) });
    buffer.push(FrameKind.SenderError, gapText(3, 10), 1);
    await Promise.resolve();
    expect(anchor._direct(buffer, 'a')).toBe(false);
    buffer.push(FrameKind.Item, 'a', 1);
    await Promise.resolve();
    expect(gaps).toEqual([{ dropped: 3, durationMs: 10 }]);
  });

  it('a throwing item() taken directly cancels the stream and ends it once with ERR_CONSUMER_THREW', async () => {
    const ends: unknown[] = [];
    const anchor = new StreamAnchor<string>(host, 'h', 1n);
    const buffer = new SlotBuffer(8);
    anchor._feed(buffer, 'mux', null);
    anchor.consume({
      item: () => {
        throw new Error('boom');
      },
      end: (e) => void ends.push(e?.code),
    });
    await Promise.resolve();
    expect(anchor._direct(buffer, 'a')).toBe(true);
    await Promise.resolve();
    expect(ends).toEqual(['ERR_CONSUMER_THREW']);
    expect(anchor.finished).toBe(true);
    expect(anchor._direct(buffer, 'b')).toBe(false);
  });

  it('over a node pair, a waiting reader takes its items from ingress: no drain visit returns their credit', async () => {
    const { consumer, producer } = await nodePair(nodes, { initialCredit: 4 });
    const anchor = consumer.createAnchor<number>();
    const got: number[] = [];
    const ended = new Promise((resolve) => anchor.consume({ item: (v) => void got.push(v), end: resolve }));
    const sender = await producer.attachAnchor<number>(anchor.handle);
    for (let i = 0; i < 40; i++) await sender.send(i);
    await sender.finalize();
    expect(await ended).toBeNull();
    expect(got).toEqual(Array.from({ length: 40 }, (_, i) => i));
    // 40 items through a window of 4: every grant rode an arrival, none waited for a doorbell.
    expect(consumer.metricsRegistry.drainVisits).toBe(0);
  });
});
