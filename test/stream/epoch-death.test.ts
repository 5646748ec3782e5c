// End to end over the in-process messenger: a refused admission is epoch death, and the consumer
// sees SenderDropped once the new epoch's first batch arrives; anchor ids come from the runtime's CSPRNG.
import { afterEach, describe, expect, it } from 'vitest';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { parseHandle } from '../../src/stream/handle.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

describe('epoch death end to end', () => {
  it('a refused batch fails every producer of that lane once; the consumer reads SenderDropped when the new epoch arrives', async () => {
    const [mc, mp] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: mc, mux: { initialCredit: 8 } });
    const producer = await createNode({ messenger: mp, mux: { initialCredit: 8 } });
    nodes.push(consumer, producer);
    const a1 = consumer.createAnchor<string>();
    const a2 = consumer.createAnchor<string>();
    const s1 = await producer.attachAnchor<string>(a1.handle);
    const s2 = await producer.attachAnchor<string>(a2.handle);
    await s1.send('before');
    await s2.send('before');
    producer.flushBatch(); // written now (synchronous), before admission starts refusing
    mp.mode = 'refuse';
    const refused = s1.send('lost');
    await expect(refused).resolves.toBeUndefined(); // staged: the refusal comes at the write
    producer.flushBatch();
    await new Promise<void>((r) => s2.cancelSignal.addEventListener('abort', () => r()));
    expect(s1.closed && s2.closed).toBe(true);
    await expect(s1.send('x')).rejects.toMatchObject({ code: 'ERR_EPOCH_DEATH' });
    expect(producer.metrics()['velo_streaming_mux_epoch_deaths_total']).toBe(1);
    expect(producer.metricsRegistry.liveSlots).toBe(0);
    // The consumer has not heard anything yet; the next stream opens in the new epoch.
    mp.mode = 'open';
    const a3 = consumer.createAnchor<string>();
    const s3 = await producer.attachAnchor<string>(a3.handle);
    const r1 = a1[Symbol.asyncIterator]();
    expect(await r1.next()).toEqual({ done: false, value: 'before' });
    await expect(r1.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    const r2 = a2[Symbol.asyncIterator]();
    expect(await r2.next()).toEqual({ done: false, value: 'before' });
    await expect(r2.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    await s3.send('new epoch');
    await s3.finalize();
    const got: string[] = [];
    for await (const t of a3) got.push(t);
    expect(got).toEqual(['new epoch']);
  });
});

describe('anchor ids', () => {
  it('come from the runtime CSPRNG (bit 63 clear: single-sender)', async () => {
    const [mc] = LoopMessenger.pair();
    const base = systemRuntime();
    let calls = 0;
    const runtime = {
      ...base,
      randomBytes(out: Uint8Array) {
        calls++;
        out.fill(0xff);
      },
    };
    const node = await createNode({ messenger: mc, runtime });
    nodes.push(node);
    const before = calls;
    const a = node.createAnchor();
    expect(calls).toBe(before + 1);
    expect(parseHandle(a.handle).localId).toBe(0x7fff_ffff_ffff_ffffn);
    expect(a.localId).toBe(0x7fff_ffff_ffff_ffffn);
  });
});

describe('peer gone for an older link', () => {
  it('leaves the current link streams untouched', async () => {
    const [mc, mp] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: mc });
    const producer = await createNode({ messenger: mp });
    nodes.push(consumer, producer);
    const a = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(a.handle);
    await s.send('one');
    // Both sides hear that a link older than the current one (epoch 1) went away.
    mc.reportGone(0);
    mp.reportGone(0);
    await s.send('two');
    await s.finalize();
    const got: string[] = [];
    for await (const t of a) got.push(t);
    expect(got).toEqual(['one', 'two']);
    expect(producer.metrics()['velo_streaming_mux_epoch_deaths_total']).toBe(0);
  });
});

describe('malformed batches', () => {
  it('are counted in decode_errors_total, not dropped silently, and leave the streams alone', async () => {
    const [mc, mp] = LoopMessenger.pair();
    const consumer = await createNode({ messenger: mc });
    const producer = await createNode({ messenger: mp });
    nodes.push(consumer, producer);
    const a = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(a.handle);
    // A raw batch from the same peer on lane 0, in its current epoch (the producer's first, 1): the
    // header declares one record and none follows.
    const bad = Uint8Array.from([2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9]);
    await mp.sendBatch(mc.self.id, 0, bad);
    await mp.sendBatch(mc.self.id, 0, Uint8Array.of(1, 2, 3)); // shorter than a header
    await Promise.resolve();
    expect(consumer.metrics()['velo_streaming_mux_decode_errors_total']).toBe(2);
    await s.send('still fine');
    await s.finalize();
    const got: string[] = [];
    for await (const t of a) got.push(t);
    expect(got).toEqual(['still fine']);
  });
});
