// The Node TCP adapter's write pool: batch-sized frames reuse memory the socket has written.
import { afterEach, describe, expect, it } from 'vitest';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { WRITE_POOL_KEEP, WRITE_POOL_MAX, WRITE_POOL_MIN, WritePool } from '../../src/adapters/write-pool.ts';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { waitFor } from '../support/wait-for.ts';
import { intact, readTag, tagged } from './helpers.ts';

describe('WritePool', () => {
  it('hands a written frame’s memory to the next frame of its size class', () => {
    const pool = new WritePool();
    const ab = pool.take(5000);
    expect(ab.byteLength).toBe(8192);
    const frame = new Uint8Array(ab, 0, 5000);
    expect(pool.owner(frame)).toBe(ab);
    pool.give(ab);
    // Any frame of the 4–8 KiB class takes it; another class does not.
    expect(pool.take(20_000)).not.toBe(ab);
    expect(pool.take(4097)).toBe(ab);
  });

  it('pools only 4 KiB to 64 KiB frames that start a class-sized buffer', () => {
    const pool = new WritePool();
    expect(pool.pooled(WRITE_POOL_MIN - 1)).toBe(false);
    expect(pool.pooled(WRITE_POOL_MIN)).toBe(true);
    expect(pool.pooled(WRITE_POOL_MAX)).toBe(true);
    expect(pool.pooled(WRITE_POOL_MAX + 1)).toBe(false);
    expect(pool.take(WRITE_POOL_MIN).byteLength).toBe(WRITE_POOL_MIN);
    expect(pool.take(WRITE_POOL_MAX).byteLength).toBe(WRITE_POOL_MAX);
    // A view inside a larger buffer, or a buffer of no class's size, is not the pool's.
    expect(pool.owner(new Uint8Array(new ArrayBuffer(8192), 16, 5000))).toBeNull();
    expect(pool.owner(new Uint8Array(6000))).toBeNull();
    expect(pool.owner(new Uint8Array(100))).toBeNull();
  });

  it('keeps a bounded number of free buffers per class', () => {
    const pool = new WritePool();
    const taken = Array.from({ length: WRITE_POOL_KEEP + 5 }, () => pool.take(10_000));
    for (const ab of taken) pool.give(ab);
    expect(pool.freeCount).toBe(WRITE_POOL_KEEP);
  });
});

describe('Node TCP write path with pooled frames', () => {
  const open: Messenger[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((m) => m.close()));
  });

  it('delivers every batch intact and in order while frame memory is reused', async () => {
    const opts = { maxMessageSize: 256 * 1024, healthCheck: false, transportKeys: ['messenger-mux-v2'] } as const;
    const server = await createMessenger({ transports: [tcpTransport({ host: '127.0.0.1', port: 0 })], ...opts });
    const client = await createMessenger({ transports: [tcpTransport({ listen: false })], ...opts });
    open.push(server, client);
    const got: number[] = [];
    server.registerBatchHandler(0, (_from, _lane, payload) => {
      expect(intact(payload)).toBe(true);
      got.push(readTag(payload).seq);
    });
    const peer = await client.connect(server.addresses[0] as string);
    const n = 400;
    // Sizes across every pooled class (and around it), far more frames than the pool keeps, sent
    // in bursts without waiting so that frames are in flight while others are written.
    for (let seq = 0; seq < n; seq++) {
      const size = [3000, 4100, 9000, 17_000, 33_000, 60_000, 70_000][seq % 7] as number;
      const payload = tagged(size, 0, seq);
      const a = client.sendBatch(peer.id, 0, payload);
      payload.fill(0xee);
      if (a !== true || seq % 16 === 15) await (a === true ? new Promise((r) => setImmediate(r)) : a);
    }
    await waitFor(() => got.length === n, 5_000, 'all batches');
    expect(got).toEqual(Array.from({ length: n }, (_, i) => i));
  });
});
