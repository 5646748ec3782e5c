// An anchor has one reader, for `for await` loops too: two loops on one anchor used to split its
// items silently between them; the second reader now fails ERR_READER_ACTIVE, as a second
// consume() does. A loop that ended (done, a read that threw, a break) frees the anchor.
import { afterEach, describe, expect, it } from 'vitest';
import type { LanemuxNode } from '../../src/stream/node.ts';
import type { MpscEvent } from '../../src/stream/mpsc-anchor.ts';
import { nodePair } from '../support/node-pair.ts';
import { readAll } from '../support/read-all.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

/** Settle `p` into its value or its error, so a test can look at it after doing more. */
const outcome = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    (v) => ({ value: v }),
    (e: unknown) => e,
  );
const READER_ACTIVE = expect.objectContaining({ code: 'ERR_READER_ACTIVE' });

describe('one for-await reader per anchor', () => {
  it('a second loop fails ERR_READER_ACTIVE while the first reads, and the first gets every item; once it finished, a later loop sees the end', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createAnchor<string>();
    const first = readAll(anchor);
    const second = outcome(readAll(anchor));
    const sender = await producer.attachAnchor<string>(anchor.handle);
    for (const t of ['a', 'b', 'c', 'd']) await sender.send(t);
    await sender.finalize();
    expect(await second).toMatchObject({
      code: 'ERR_READER_ACTIVE',
      message: expect.stringContaining('already read by a for-await loop'),
    });
    expect(await first).toEqual(['a', 'b', 'c', 'd']);
    expect(await readAll(anchor)).toEqual([]);
  });

  it('next(), takeAvailable() and consume() are refused while a loop reads', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createAnchor<string>();
    const it = anchor[Symbol.asyncIterator]();
    const pending = it.next();
    const direct = outcome(anchor.next());
    expect(() => anchor.takeAvailable([])).toThrow(READER_ACTIVE);
    expect(() => anchor.consume({ item: () => {} })).toThrow(READER_ACTIVE);
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('only');
    await sender.finalize();
    expect(await direct).toMatchObject({ code: 'ERR_READER_ACTIVE' });
    expect(await pending).toEqual({ done: false, value: 'only' });
    expect(await it.next()).toEqual({ done: true, value: undefined });
  });

  it('a loop ended by a SenderError frees the anchor: another loop is refused before it, and a new loop reads past it', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    const got: string[] = [];
    const firstLoop = outcome(
      (async () => {
        for await (const t of anchor) got.push(t);
      })(),
    );
    const intruder = outcome(readAll(anchor));
    await sender.send('a');
    await sender.error('tokenizer hiccup');
    await sender.send('b');
    await sender.finalize();
    expect(await intruder).toMatchObject({ code: 'ERR_READER_ACTIVE' });
    expect(await firstLoop).toMatchObject({ code: 'ERR_SENDER_ERROR' });
    expect(got).toEqual(['a']);
    expect(await readAll(anchor)).toEqual(['b']);
  });

  it('breaking out of a loop cancels the stream and frees the anchor: inside the loop a second one is refused, after it a loop ends at once', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.send('a');
    await sender.send('b');
    for await (const t of anchor) {
      expect(t).toBe('a');
      expect(() => anchor[Symbol.asyncIterator]()).toThrow(READER_ACTIVE);
      break;
    }
    expect(await readAll(anchor)).toEqual([]);
    expect(anchor.finished).toBe(true);
  });
});

describe('one for-await reader per MPSC anchor', () => {
  it('a second loop fails ERR_READER_ACTIVE while the first reads, and the first gets every event', async () => {
    const { consumer, producer } = await nodePair(nodes);
    const anchor = consumer.createMpscAnchor<string>();
    const events: MpscEvent<string>[] = [];
    const first = (async () => {
      for await (const e of anchor) events.push(e);
    })();
    const stolen: MpscEvent<string>[] = [];
    const second = outcome(
      (async () => {
        for await (const e of anchor) stolen.push(e);
      })(),
    );
    expect(() => anchor.takeAvailable([])).toThrow(READER_ACTIVE);
    const s = await producer.attachMpscAnchor<string>(anchor.handle);
    await s.send('x');
    await s.send('y');
    await s.finalize();
    anchor.seal();
    await first;
    expect(await second).toMatchObject({ code: 'ERR_READER_ACTIVE' });
    expect(stolen).toEqual([]);
    expect(events.filter((e) => e.kind === 'item').map((e) => (e as { value: string }).value)).toEqual(['x', 'y']);
    expect(events.at(-1)?.kind).toBe('finalized');
  });
});
