/**
 * Live sources that cannot stall (docs/protocol.md §10.9 "Overruns"): `overrun: 'drop-oldest'`
 * keeps at most `overrunLimit` records waiting for credit and tells the consumer of every gap;
 * `'fail'` ends the stream with ERR_FEED_OVERRUN; the default `'block'` is unchanged. Two nodes over
 * a loop messenger on one manual clock; the consumer stalls (reads nothing) while the producer sends.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { GapMarker } from '../../src/stream/live-feed.ts';
import { createNode } from '../../src/stream/node.ts';
import type { AttachOptions, LanemuxNode } from '../../src/stream/node.ts';
import { RESUME_KEY } from '../../src/stream/resume-options.ts';
import { MESSENGER_MUX_KEY } from '../../src/wire/constants.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

const C = 4;
const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

async function pair(resume = false) {
  const runtime = new ManualRuntime();
  const keys = resume ? [MESSENGER_MUX_KEY, RESUME_KEY] : [MESSENGER_MUX_KEY];
  const [ma, mb] = LoopMessenger.pair({ transportKeys: keys }, { transportKeys: keys });
  const consumer = await createNode({ messenger: ma, runtime, mux: { initialCredit: C } });
  const producer = await createNode({ messenger: mb, runtime, mux: { initialCredit: C } });
  nodes.push(consumer, producer);
  return { runtime, consumer, producer };
}

/** Send `n` items `i0…`, one per millisecond, never awaiting a send longer than it takes to settle. */
async function sendLive(
  runtime: ManualRuntime,
  send: (item: string) => Promise<void>,
  n: number,
): Promise<{ settled: number; errors: unknown[] }> {
  let settled = 0;
  const errors: unknown[] = [];
  for (let i = 0; i < n; i++) {
    send(`i${i}`).then(
      () => settled++,
      (e: unknown) => errors.push(e),
    );
    await runtime.advance(1);
  }
  return { settled, errors };
}

/** Let `p` settle while the manual clock runs (replies and batches ride its macrotasks). */
async function drive<R>(runtime: ManualRuntime, p: Promise<R>): Promise<R> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 10_000 && !done; i++) await runtime.advance(1);
  return p;
}

/** Read the anchor to its end with `for await`, noting the gap of each item. */
async function readAnchor(
  runtime: ManualRuntime,
  anchor: AsyncIterable<string> & { readonly gap: GapMarker | null },
): Promise<Read> {
  const read: Read = [];
  await drive(
    runtime,
    (async () => {
      for await (const item of anchor) read.push({ item, gap: anchor.gap });
    })(),
  );
  return read;
}

/** The items read, each with the gap the anchor reports for it. */
type Read = Array<{ item: string; gap: GapMarker | null }>;

/** Every received item is in order; each gap is exactly the run of items missing before it. */
function checkGaps(read: Read, n: number): number {
  let expected = 0;
  let dropped = 0;
  for (const { item, gap } of read) {
    const i = Number(item.slice(1));
    expect(i).toBeGreaterThanOrEqual(expected);
    expect(gap?.dropped ?? 0).toBe(i - expected);
    dropped += i - expected;
    expected = i + 1;
  }
  expect(expected).toBe(n);
  return dropped;
}

describe("overrun: 'drop-oldest'", () => {
  for (const resume of [false, true]) {
    it(`a stalled consumer: send() never waits, at most overrunLimit records wait, and the consumer sees every kept record in order with exact gap markers${resume ? ' (resumable stream)' : ''}`, async () => {
      const { runtime, consumer, producer } = await pair(resume);
      const anchor = consumer.createAnchor<string>();
      const sender = await producer.attachAnchor<string>(anchor.handle, { overrun: 'drop-oldest', overrunLimit: 8 });
      const n = 100;
      const { settled, errors } = await sendLive(runtime, (x) => sender.send(x), n);
      expect(errors).toEqual([]);
      expect(settled).toBe(n);
      // C records hold the consumer's credit, one waits in the slot for the next credit, 8 in the sender.
      const dropped = n - C - 1 - 8;
      expect(sender.overruns).toBe(dropped);
      expect(producer.metricsRegistry.withheldRecords).toBeLessThanOrEqual(1);
      expect(producer.metrics()['velo_streaming_overruns_total']).toBe(dropped);
      await sender.finalize();
      const read = await readAnchor(runtime, anchor);
      expect(checkGaps(read, n)).toBe(dropped);
      // The one gap: i5 … i91 (sent at 5 … 91 ms), before i92 (sent at 92 ms).
      expect(read.filter((r) => r.gap !== null)).toEqual([
        { item: `i${C + 1 + dropped}`, gap: { dropped, durationMs: dropped } },
      ]);
      expect(read.map((r) => r.item).slice(0, C + 1)).toEqual(['i0', 'i1', 'i2', 'i3', 'i4']);
      expect(read).toHaveLength(n - dropped);
    });
  }

  it('a consumer that reads now and then sees one marker per gap, each with its own count, in push mode', async () => {
    const { runtime, consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle, { overrun: 'drop-oldest', overrunLimit: 3 });
    const read: Read = [];
    let ended = false;
    const c = anchor.consume({
      item: (item, gap) => {
        read.push({ item, gap });
      },
      end: () => {
        ended = true;
      },
    });
    c.pause();
    await sendLive(runtime, (x) => sender.send(x), 30);
    c.resume();
    await runtime.advance(5);
    c.pause();
    await sendLive(runtime, (x) => sender.send(`${x.slice(0, 1)}${Number(x.slice(1)) + 30}`), 30);
    c.resume();
    await runtime.advance(5);
    await sender.finalize();
    await runtime.advance(5);
    expect(ended).toBe(true);
    const dropped = checkGaps(read, 60);
    const gaps = read.filter((r) => r.gap !== null);
    expect(gaps).toHaveLength(2);
    expect(gaps.reduce((a, r) => a + r.gap!.dropped, 0)).toBe(dropped);
    expect(sender.overruns).toBe(dropped);
  });

  it('an MPSC sender: its item event carries the gap', async () => {
    const { runtime, consumer, producer } = await pair();
    const anchor = consumer.createMpscAnchor<string>();
    const sender = await producer.attachMpscAnchor<string>(anchor.handle, { overrun: 'drop-oldest', overrunLimit: 2 });
    await sendLive(runtime, (x) => sender.send(x), 20);
    await sender.finalize();
    anchor.seal();
    const read: Read = [];
    await drive(
      runtime,
      (async () => {
        for await (const e of anchor) if (e.kind === 'item') read.push({ item: e.value, gap: e.gap ?? null });
      })(),
    );
    const dropped = checkGaps(read, 20);
    expect(dropped).toBe(20 - C - 1 - 2);
    expect(sender.overruns).toBe(dropped);
  });

  it('a same-node stream: the anchor buffer is its credit, and the gap is marked the same way', async () => {
    const runtime = new ManualRuntime();
    const node = await createNode({ messenger: new LoopMessenger(), runtime });
    nodes.push(node);
    const anchor = node.createAnchor<string>();
    const sender = await node.attachAnchor<string>(anchor.handle, { overrun: 'drop-oldest', overrunLimit: 4 });
    const n = 300;
    await sendLive(runtime, (x) => sender.send(x), n);
    await sender.finalize();
    const read = await readAnchor(runtime, anchor);
    const dropped = checkGaps(read, n);
    expect(dropped).toBeGreaterThan(0);
    expect(sender.overruns).toBe(dropped);
  });

  it('takeAvailable stops at an item after a gap, so anchor.gap describes the last item it returned', async () => {
    const { runtime, consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle, { overrun: 'drop-oldest', overrunLimit: 2 });
    await sendLive(runtime, (x) => sender.send(x), 12);
    await sender.finalize();
    const calls: Array<{ out: string[]; gap: GapMarker | null }> = [];
    for (let i = 0; i < 100 && !anchor.finished; i++) {
      const out: string[] = [];
      if (anchor.takeAvailable(out) > 0) calls.push({ out, gap: anchor.gap });
      await runtime.advance(1);
    }
    // i5…i9 were dropped (the ring kept i10, i11): i10 ends its call, and i11 comes in a later one.
    expect(calls.flatMap((c) => c.out)).toEqual(['i0', 'i1', 'i2', 'i3', 'i4', 'i10', 'i11']);
    const stamped = calls.filter((c) => c.gap !== null);
    expect(stamped).toHaveLength(1);
    expect(stamped[0]!.out.at(-1)).toBe('i10');
    expect(stamped[0]!.gap).toEqual({ dropped: 5, durationMs: 5 });
  });
});

describe("overrun: 'fail'", () => {
  it('the record past the limit ends the stream with ERR_FEED_OVERRUN for producer and consumer', async () => {
    const { runtime, consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle, { overrun: 'fail', overrunLimit: 8 });
    const { errors } = await sendLive(runtime, (x) => sender.send(x), 20);
    // i0…i3 spent the credit, i4 waits in the slot, i5…i12 in the sender: i13 overran, and every later send fails too.
    expect(errors).toHaveLength(20 - 13);
    expect(errors.every((e) => (e as { code?: string }).code === 'ERR_FEED_OVERRUN')).toBe(true);
    expect(sender.closed).toBe(true);
    expect(sender.cancelSignal.aborted).toBe(true);
    expect(sender.overruns).toBe(1);
    expect(producer.metrics()['velo_streaming_overruns_total']).toBe(1);
    const read: string[] = [];
    let end: unknown = null;
    await drive(
      runtime,
      (async () => {
        for await (const item of anchor) read.push(item);
      })(),
    ).catch((e: unknown) => (end = e));
    expect(read).toEqual(['i0', 'i1', 'i2', 'i3', 'i4']);
    expect(end).toMatchObject({ code: 'ERR_FEED_OVERRUN' });
  });
});

describe('overrun options', () => {
  it("the default is 'block': records beyond credit wait in the slot, none is dropped, no gap is reported", async () => {
    const { runtime, consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle, { overrunLimit: 2 });
    let settled = 0;
    for (let i = 0; i < 10; i++) void sender.send(`i${i}`).then(() => settled++);
    await runtime.advance(10);
    // Beyond its credit the slot withholds records up to its byte budget: no send is dropped.
    expect(producer.metricsRegistry.withheldRecords).toBe(10 - C);
    await sender.finalize();
    const read = await readAnchor(runtime, anchor);
    expect(read.map((r) => r.item)).toEqual(Array.from({ length: 10 }, (_, i) => `i${i}`));
    expect(read.every((r) => r.gap === null)).toBe(true);
    expect(settled).toBe(10);
    expect(sender.overruns).toBe(0);
    expect(producer.metrics()['velo_streaming_overruns_total']).toBe(0);
  });

  it('a bad overrun or overrunLimit rejects the attach with ERR_INVALID_CONFIG naming the field', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const bad: AttachOptions[] = [
      { overrun: 'drop-newest' as never },
      { overrun: 'drop-oldest', overrunLimit: 0 },
      { overrun: 'fail', overrunLimit: 1.5 },
      { overrun: 'fail', overrunLimit: 65_537 },
    ];
    for (const options of bad) {
      await expect(producer.attachAnchor(anchor.handle, options)).rejects.toMatchObject({
        code: 'ERR_INVALID_CONFIG',
      });
    }
    // Nothing was attached: a good attach still works.
    const sender = await producer.attachAnchor<string>(anchor.handle, { overrun: 'fail' });
    expect(sender.closed).toBe(false);
  });

  it('the gap marker is a SenderError of a reserved text: a well-formed one stamps the next item, a malformed one stays a sender error', async () => {
    // An old consumer reads every one of them as a sender error: the loss is never silent.
    const { runtime, consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const sender = await producer.attachAnchor<string>(anchor.handle);
    await sender.error('lanemux-gap: 3 dropped over 7 ms');
    await sender.send('after');
    await sender.error('lanemux-gap: not a number');
    await sender.finalize();
    await runtime.advance(5);
    const first = await anchor.next();
    expect(first).toEqual({ done: false, value: 'after' });
    expect(anchor.gap).toEqual({ dropped: 3, durationMs: 7 });
    await expect(anchor.next()).rejects.toMatchObject({ code: 'ERR_SENDER_ERROR' });
  });
});
