// node.close(): it still writes a stream finalized just before (the consumer reads it, retired()
// is Sent), wakes a reader parked on a same-worker anchor, and leaves a messenger the caller
// passed in open.
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

describe('node.close()', () => {
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

  it('close() does not close a messenger the caller passed in', async () => {
    const [ma, mb] = LoopMessenger.pair();
    const node = await createNode({ messenger: ma });
    await node.close();
    expect(ma.closed).toBe(false);
    void mb;
  });
});
