// Re-attach from a resume token after a page reload (docs/protocol.md §8.5): a producer that keeps
// history lets a new node take a stream from an offset and read the rest, live, exactly once. The
// "page" is a consumer node dialling the producer through a link the test cuts (a reload: the old
// page is gone without a goodbye); the "reloaded page" is a fresh node.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';
import { cuttable } from '../support/cuttable-memory.ts';
import { waitFor } from '../support/wait-for.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

const HISTORY: Partial<NodeOptions> = { resume: { history: true } };

/** A producer ("server") with history, and a way to make "pages" that dial it. */
async function server(options: Partial<NodeOptions> = HISTORY) {
  const network = createMemoryNetwork();
  const producer = await createNode({ transports: [memoryTransport({ network, name: 'server' })], ...options });
  nodes.push(producer);
  const page = async () => {
    const { adapter, cut } = cuttable(network, 'page reloaded');
    const node = await createNode({ transports: [adapter] });
    nodes.push(node);
    const peer = await node.connect('memory://server');
    return { node, peer, cut };
  };
  return { producer, page };
}

/** The page asks for a stream: an anchor and its ticket; the server opens it. */
async function open(
  page: LanemuxNode,
  producer: LanemuxNode,
): Promise<{ anchor: StreamAnchor<string>; sender: StreamSender<string> }> {
  const anchor = page.createAnchor<string>();
  const ticket = page.prebindAnchor(anchor)!;
  const sender = await producer.openAnchorStream<string>(anchor.handle, ticket);
  return { anchor, sender };
}

async function readN<T>(anchor: StreamAnchor<T>, n: number): Promise<T[]> {
  const out: T[] = [];
  const it = anchor[Symbol.asyncIterator]();
  while (out.length < n) {
    const r = await it.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

async function readAll<T>(anchor: StreamAnchor<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of anchor) out.push(v);
  return out;
}

async function produce(sender: StreamSender<string>, n: number): Promise<unknown> {
  try {
    for (let i = 0; i < n; i++) await sender.send(`${i}`);
    await sender.finalize();
    return null;
  } catch (e) {
    return e;
  }
}

const numbered = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `${from + i}`);

describe('re-attach from a resume token', () => {
  it('a reloaded page re-attaches mid-stream from its offset and reads the rest of the text exactly once', async () => {
    const { producer, page } = await server();
    const first = await page();
    const { anchor, sender } = await open(first.node, producer);
    const token = sender.resumeToken;
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    const writing = produce(sender, 300);
    const before = await readN(anchor, 50);
    expect(before).toEqual(numbered(0, 50));
    // The reload: the page is gone without a goodbye.
    first.cut();
    const second = await page();
    const again = await second.node.reattach<string>(second.peer, token!, { offset: before.length });
    expect(await readAll(again)).toEqual(numbered(50, 300));
    expect(await writing).toBeNull();
    await waitFor(() => (producer.metrics()['velo_streaming_mux_live_slots'] ?? 0) === 0);
  });

  it('a stream that finished while the page reloaded is read to its end from the offset', async () => {
    const { producer, page } = await server();
    const first = await page();
    const { anchor, sender } = await open(first.node, producer);
    expect(await produce(sender, 20)).toBeNull();
    expect(await readN(anchor, 7)).toEqual(numbered(0, 7));
    first.cut();
    const second = await page();
    const again = await second.node.reattach<string>(second.peer, sender.resumeToken!, { offset: 7 });
    expect(await readAll(again)).toEqual(numbered(7, 20));
  });

  it('the token works while the first page is still linked: the stream moves to the new page', async () => {
    const { producer, page } = await server();
    const first = await page();
    const { anchor, sender } = await open(first.node, producer);
    const writing = produce(sender, 100);
    expect(await readN(anchor, 10)).toEqual(numbered(0, 10));
    const second = await page();
    const again = await second.node.reattach<string>(second.peer, sender.resumeToken!, { offset: 10 });
    expect(await readAll(again)).toEqual(numbered(10, 100));
    expect(await writing).toBeNull();
  });

  it('an offset older than the history keeps is refused, saying which item it no longer holds', async () => {
    const { producer, page } = await server({
      resume: { history: { bytesPerStream: 256 }, maxReplayBytesPerStream: 256 },
    });
    const first = await page();
    const { anchor, sender } = await open(first.node, producer);
    expect(await produce(sender, 60)).toBeNull();
    await readN(anchor, 60);
    first.cut();
    const second = await page();
    await expect(second.node.reattach(second.peer, sender.resumeToken!, { offset: 2 })).rejects.toMatchObject({
      code: 'ERR_ATTACH_REFUSED',
      message: expect.stringContaining('no longer holds item 3'),
    });
  });

  it('a wrong token, or a producer without history, is refused with a clear error and nothing else changes', async () => {
    const { producer, page } = await server();
    const first = await page();
    const { anchor, sender } = await open(first.node, producer);
    const writing = produce(sender, 40);
    const second = await page();
    await expect(second.node.reattach(second.peer, '0'.repeat(32), { offset: 0 })).rejects.toMatchObject({
      code: 'ERR_ATTACH_REFUSED',
      message: expect.stringContaining('no stream for this resume token'),
    });
    // The first page's stream is untouched.
    expect(await readAll(anchor)).toEqual(numbered(0, 40));
    expect(await writing).toBeNull();

    const plain = await server({});
    const p = await plain.page();
    const s = await open(p.node, plain.producer);
    expect(s.sender.resumeToken).toBeNull();
    await expect(p.node.reattach(p.peer, 'a'.repeat(32), { offset: 0 })).rejects.toMatchObject({
      code: 'ERR_ATTACH_REFUSED',
      message: expect.stringContaining('keeps no stream history'),
    });
  });

  it('a full node-wide budget lets the oldest finished stream’s history go first, not a live one’s', async () => {
    const { producer, page } = await server({ resume: { history: true, maxReplayBytes: 4_000 } });
    const first = await page();
    const done = await open(first.node, producer);
    expect(await produce(done.sender, 100)).toBeNull();
    await readAll(done.anchor);
    const live = await open(first.node, producer);
    const writing = produce(live.sender, 400);
    await readN(live.anchor, 200);
    first.cut();
    const second = await page();
    await expect(second.node.reattach(second.peer, done.sender.resumeToken!, { offset: 0 })).rejects.toMatchObject({
      code: 'ERR_ATTACH_REFUSED',
    });
    const again = await second.node.reattach<string>(second.peer, live.sender.resumeToken!, { offset: 200 });
    expect(await readAll(again)).toEqual(numbered(200, 400));
    expect(await writing).toBeNull();
  });
});

describe('how long a finished stream stays re-attachable (manual clock)', () => {
  it('a finished stream is re-attachable within resume.history.keepMs of its end, and refused after', async () => {
    const rt = new ManualRuntime();
    /** Let the manual clock run 1 ms at a time until `p` settles. */
    const tick = async <T>(p: Promise<T>): Promise<T> => {
      let settled = false;
      p.then(
        () => (settled = true),
        () => (settled = true),
      );
      for (let i = 0; i < 10_000 && !settled; i++) await rt.advance(1);
      return p;
    };
    const network = createMemoryNetwork();
    const producer = await createNode({
      transports: [memoryTransport({ network, name: 'server' })],
      runtime: rt,
      resume: { windowMs: 1_000, history: { keepMs: 5_000 } },
    });
    const page = await createNode({ transports: [memoryTransport({ network, listen: false })], runtime: rt });
    nodes.push(producer, page);
    const peer = await tick(page.connect('memory://server'));
    const a = await tick(open(page, producer));
    const b = await tick(open(page, producer));
    await tick(Promise.all([produce(a.sender, 5), produce(b.sender, 5)]));
    await tick(Promise.all([readAll(a.anchor), readAll(b.anchor)]));
    await rt.advance(3_000);
    const again = await tick(page.reattach<string>(peer, a.sender.resumeToken!, { offset: 2 }));
    expect(await tick(readAll(again))).toEqual(numbered(2, 5));
    await rt.advance(3_000);
    await expect(tick(page.reattach(peer, b.sender.resumeToken!, { offset: 2 }))).rejects.toMatchObject({
      code: 'ERR_ATTACH_REFUSED',
      message: expect.stringContaining('no stream for this resume token'),
    });
  });
});
