// Regressions from the code review of the stream layer: each failed before its fix.
import { afterEach, describe, expect, it } from 'vitest';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

async function pair(mux = {}, extra = {}) {
  const [a, b] = LoopMessenger.pair();
  const x = await createNode({ messenger: a, mux, ...extra });
  const y = await createNode({ messenger: b, mux, ...extra });
  nodes.push(x, y);
  return { x, y, a, b };
}

const aborted = (s: AbortSignal) => new Promise<void>((r) => (s.aborted ? r() : s.addEventListener('abort', () => r())));

describe('review regressions: streams', () => {
  it('cancelling an upstream anchor from a downstream cancel listener does not starve the other streams from that peer', async () => {
    const { x, y } = await pair({ initialCredit: 4 });
    const a2 = y.createAnchor<string>();
    const s2 = await x.attachAnchor<string>(a2.handle);
    const a1 = x.createAnchor<string>();
    const a3 = x.createAnchor<string>();
    await y.attachAnchor<string>(a1.handle);
    const p3 = await y.attachAnchor<string>(a3.handle);
    s2.cancelSignal.addEventListener('abort', () => a1.cancel()); // a relay: downstream gone → cancel upstream
    a2.cancel();
    await aborted(s2.cancelSignal);
    const got: string[] = [];
    const reading = (async () => {
      for await (const t of a3) got.push(t);
    })();
    for (let i = 0; i < 20; i++) await p3.send(`t${i}`);
    await p3.finalize();
    await reading;
    expect(got).toHaveLength(20);
  });

  it('close() right after finalize() still writes the stream: the consumer reads it and retired() is Sent', async () => {
    const { x, y } = await pair();
    const a = y.createAnchor<string>();
    const s = await x.attachAnchor<string>(a.handle);
    const reading = (async () => {
      const out: string[] = [];
      for await (const t of a) out.push(t);
      return out;
    })();
    await s.send('a');
    await s.finalize();
    const retired = s.retired();
    await x.close();
    expect(await retired).toBe('Sent');
    expect(await reading).toEqual(['a']);
  });

  it('close() wakes a reader parked on a same-worker anchor', async () => {
    const { x } = await pair();
    const a = x.createAnchor<string>();
    await x.attachAnchor<string>(a.handle);
    const next = a.next();
    await Promise.resolve();
    await x.close();
    await expect(next).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
  });

  it('two concurrent next() calls both resolve', async () => {
    const { x, y } = await pair();
    const a = x.createAnchor<string>();
    const s = await y.attachAnchor<string>(a.handle);
    const n1 = a.next();
    const n2 = a.next();
    await s.send('one');
    await s.send('two');
    const got = await Promise.all([n1, n2]);
    expect(got.map((r) => r.value).sort()).toEqual(['one', 'two']);
  });

  it('an anchor nobody attaches to ends with SenderDropped after the unattached timeout and is forgotten', async () => {
    const { x } = await pair({}, { unattachedTimeout: 30 });
    const anchors = Array.from({ length: 100 }, () => x.createAnchor());
    expect(x.metrics()['velo_streaming_active_anchors']).toBe(100);
    const ends = await Promise.allSettled(anchors.map((a) => a.next()));
    expect(ends.every((e) => e.status === 'rejected' && (e.reason as { code: string }).code === 'ERR_SENDER_DROPPED')).toBe(true);
    expect(x.metrics()['velo_streaming_active_anchors']).toBe(0);
  });

  it('send() without await is bounded: past twice the byte budget it is refused with ERR_BACKPRESSURE', async () => {
    const { x, y } = await pair({ initialCredit: 4, slotByteBudget: 1024 });
    const a = y.createAnchor<string>();
    const s = await x.attachAnchor<string>(a.handle);
    let refused = 0;
    for (let i = 0; i < 1000; i++) {
      s.send('x'.repeat(100)).catch((e: { code: string }) => {
        if (e.code === 'ERR_BACKPRESSURE') refused++;
      });
    }
    await new Promise<void>((r) => queueMicrotask(r));
    await Promise.resolve();
    expect(refused).toBeGreaterThan(900);
    expect(x.metrics()['velo_streaming_mux_withheld_records']).toBeLessThan(30);
    // The stream itself is fine: the consumer reads what was accepted, then the producer goes on.
    a.cancel();
  });

  it('close() does not close a messenger the caller passed in', async () => {
    const [ma, mb] = LoopMessenger.pair();
    const node = await createNode({ messenger: ma });
    await node.close();
    expect(ma.closed).toBe(false);
    void mb;
  });
});
