// Received byte items are copied out of their batch; above V8's on-heap size (64 B) into a stream's
// slab, not an ArrayBuffer each. The slab alone, then byte items of every size class between two nodes.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { ItemSlab, ON_HEAP_BYTES, SLAB_MAX_BYTES } from '../../src/wire/item-slab.ts';
import { collect } from '../support/collect.ts';

/** `n` bytes counting up from `seed`. */
const pattern = (n: number, seed: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (seed + i) & 0xff);

describe('ItemSlab', () => {
  it('items of 65 B up to a quarter slab share one buffer; each is a view of exactly its bytes', () => {
    const slab = new ItemSlab();
    const src = pattern(1000, 3);
    const a = slab.copy(src, 0, 100);
    const b = slab.copy(src, 100, 200);
    expect(a.buffer).toBe(b.buffer);
    expect(a.byteLength).toBe(100);
    expect(b.byteOffset).toBe(a.byteOffset + 100);
    expect(a).toEqual(src.subarray(0, 100));
    expect(b).toEqual(src.subarray(100, 200));
  });

  it('a copy never aliases its source: the batch can be reused once it is decoded', () => {
    const slab = new ItemSlab();
    const src = pattern(4000, 9);
    const sizes = [ON_HEAP_BYTES, ON_HEAP_BYTES + 1, 300, SLAB_MAX_BYTES / 4, SLAB_MAX_BYTES / 4 + 1];
    let at = 0;
    const copies = sizes.map((n) => {
      const c = slab.copy(src, at, at + n);
      at += n;
      return c;
    });
    const expected = copies.map((c) => Uint8Array.from(c));
    src.fill(0);
    expect(copies.map((c) => Uint8Array.from(c))).toEqual(expected);
    for (const c of copies) expect(c.buffer).not.toBe(src.buffer);
  });

  it('items of at most 64 B and above a quarter slab get a buffer of their own, sized to them', () => {
    const slab = new ItemSlab();
    const src = pattern(SLAB_MAX_BYTES, 1);
    for (const n of [0, 1, ON_HEAP_BYTES, SLAB_MAX_BYTES / 4 + 1]) {
      const c = slab.copy(src, 5, 5 + n);
      expect(c.buffer.byteLength).toBe(n);
      expect(c).toEqual(src.subarray(5, 5 + n));
    }
  });

  it('slabs start at four items and double up to the largest slab, so a quiet stream holds a small one', () => {
    const slab = new ItemSlab();
    const src = pattern(100, 0);
    const sizes: number[] = [];
    let last: ArrayBufferLike | null = null;
    for (let i = 0; i < 400; i++) {
      const c = slab.copy(src, 0, 100);
      if (c.buffer !== last) {
        last = c.buffer;
        sizes.push(c.buffer.byteLength);
      }
    }
    expect(sizes.slice(0, 6)).toEqual([400, 800, 1600, 3200, 6400, SLAB_MAX_BYTES]);
    expect(Math.max(...sizes)).toBe(SLAB_MAX_BYTES);
  });

  it('a later item that does not fit in the slab opens a new one; earlier views keep their bytes', () => {
    const slab = new ItemSlab();
    const first = slab.copy(pattern(100, 1), 0, 100);
    const big = slab.copy(pattern(2000, 2), 0, 2000);
    expect(big.buffer).not.toBe(first.buffer);
    expect(first).toEqual(pattern(100, 1));
    expect(big).toEqual(pattern(2000, 2));
  });
});

describe('byte items between two nodes', () => {
  const nodes: LanemuxNode[] = [];
  afterEach(async () => {
    await Promise.all(nodes.splice(0).map((n) => n.close()));
  });

  it('arrive with their bytes, in order, at every size class; the 65–2048-byte items of a stream share buffers, never with another stream', async () => {
    const network = createMemoryNetwork();
    const consumer = await createNode({ transports: [memoryTransport({ network, name: 'consumer' })] });
    const producer = await createNode({ transports: [memoryTransport({ network })] });
    nodes.push(consumer, producer);
    await producer.connect('memory://consumer');
    const anchors = Array.from({ length: 3 }, () => consumer.createAnchor<Uint8Array>());
    const reads = anchors.map((a) => collect(a));
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<Uint8Array>(a.handle)));
    const sizes = [1, 64, 65, 128, 700, 2048, 2049, 10_000];
    const sent: Uint8Array[][] = senders.map(() => []);
    for (let round = 0; round < 40; round++) {
      for (let s = 0; s < senders.length; s++) {
        const n = sizes[(round + s) % sizes.length]!;
        const item = pattern(n, round * 7 + s);
        sent[s]!.push(item);
        await senders[s]!.send(item);
      }
    }
    await Promise.all(senders.map((s) => s.finalize()));
    const got = await Promise.all(reads);
    for (let s = 0; s < senders.length; s++) {
      expect(got[s]!.error).toBeNull();
      // Compared after every item of every stream arrived: a slab reused too early would show here.
      expect(got[s]!.items.map((v) => Uint8Array.from(v))).toEqual(sent[s]);
    }
    // Streams do not share slabs: what one stream keeps pins only its own items.
    const buffers = got.map((g) => new Set(g.items.filter((v) => v.byteLength === 128).map((v) => v.buffer)));
    for (const b of buffers[0]!) expect(buffers[1]!.has(b) || buffers[2]!.has(b)).toBe(false);
    // The 65–2048-byte items of a stream came in fewer buffers than items.
    const pooled = got[0]!.items.filter((v) => v.byteLength > ON_HEAP_BYTES && v.byteLength <= 2048);
    expect(new Set(pooled.map((v) => v.buffer)).size).toBeLessThan(pooled.length);
  });
});
