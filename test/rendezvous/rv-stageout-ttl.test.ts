// Regression (review finding): the sender's accept window runs from staging, not from the last pull, so a
// transfer still being pulled steadily (a large record over a slow link) is dropped mid-transfer.
import { describe, expect, it } from 'vitest';
import { PULL_CHUNK_MAX, StageOut } from '../../src/mux/rendezvous.ts';

describe('StageOut expiry', () => {
  it('a transfer whose pulls keep coming is not expired in the middle', () => {
    let now = 0;
    const out = new StageOut(
      { now: () => now, send: () => true, maxMessageSize: () => 16 * 1024 * 1024 },
      64 * 1024 * 1024,
      60_000,
    );
    const size = 128 * PULL_CHUNK_MAX; // 64 MiB
    const { id } = out.stage('peer', 0, new Uint8Array(size), '1:256:1');
    const pulled: number[] = [];
    // A 1 MiB/s link: one 512 KiB chunk every 500 ms; the sweep runs every 200 ms.
    for (let i = 0; i < 128; i++) {
      for (let t = 0; t < 500; t += 200) out.expire((now += 200));
      try {
        out.onPull('peer', { id, offset: i * PULL_CHUNK_MAX, length: PULL_CHUNK_MAX });
        pulled.push(i);
      } catch (e) {
        console.log('REVIEW failed at chunk', i, 'at', now, 'ms:', (e as Error).message);
        break;
      }
    }
    expect(pulled.length).toBe(128);
  });

  it('a transfer queued behind another one being pulled is still there when its turn comes', () => {
    let now = 0;
    const out = new StageOut(
      { now: () => now, send: () => true, maxMessageSize: () => 16 * 1024 * 1024 },
      64 * 1024 * 1024,
      60_000,
    );
    const first = out.stage('peer', 0, new Uint8Array(64 * PULL_CHUNK_MAX), '1:256:1').id; // 32 MiB
    const second = out.stage('peer', 1, new Uint8Array(4 * PULL_CHUNK_MAX), '1:512:2').id;
    for (let i = 0; i < 64; i++) {
      out.expire((now += 1_100)); // ~0.5 MB/s: 70 s for the first transfer
      out.onPull('peer', { id: first, offset: i * PULL_CHUNK_MAX, length: PULL_CHUNK_MAX });
    }
    out.expire((now += 200));
    expect(() => out.onPull('peer', { id: second, offset: 0, length: PULL_CHUNK_MAX })).not.toThrow();
  });
});

describe('StageOut.close (node shutdown)', () => {
  it('drops every staged transfer and frees its bytes, so nothing outlives the node', () => {
    const out = new StageOut({ now: () => 0, send: () => true, maxMessageSize: () => 1 << 20 }, 1 << 24, 60_000);
    out.stage('a', 0, new Uint8Array(1000), '1:0:1');
    out.stage('b', 1, new Uint8Array(2000), '1:256:2');
    expect(out.heldBytes).toBe(3000);
    out.close();
    expect(out.heldBytes).toBe(0);
    expect(out.pending).toBe(0);
    expect(() => out.onPull('a', { id: 1, offset: 0, length: 10 })).toThrow(/no staged transfer/);
  });
});
