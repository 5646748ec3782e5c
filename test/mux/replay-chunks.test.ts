// The process-wide free list of replay-log chunks (src/mux/replay-chunks.ts).
import { beforeEach, describe, expect, it, vi } from 'vitest';

type Chunks = typeof import('../../src/mux/replay-chunks.ts');
const SIZE = 65_536;
// The list is module state: each test gets a fresh module, none kept.
let m: Chunks;
beforeEach(async () => {
  vi.resetModules();
  m = await import('../../src/mux/replay-chunks.ts');
});

describe('replay chunks', () => {
  it('keeps what 16 busy lanes give back at once, so their next chunks are not fresh allocations', () => {
    // 16 lanes' logs, four 64 KiB chunks each, all confirmed in one round.
    const freed = Array.from({ length: 64 }, () => m.takeBuffer(SIZE));
    for (const b of freed) m.giveBuffer(b);
    // Sixteen kept would have let 48 of the 64 go to the collector, to be allocated again.
    expect(m.keptBuffers()).toBe(64);
    const again = Array.from({ length: 64 }, () => m.takeBuffer(SIZE));
    expect(again.every((b) => freed.includes(b))).toBe(true);
  });

  it('never keeps more than its bound', () => {
    const freed = Array.from({ length: m.REPLAY_BUFFERS_KEPT + 40 }, () => m.takeBuffer(SIZE));
    for (const b of freed) m.giveBuffer(b);
    expect(m.keptBuffers()).toBe(m.REPLAY_BUFFERS_KEPT);
  });

  it('keeps a buffer given back twice only once, so it is never handed to two writers', () => {
    const b = m.takeBuffer(SIZE);
    m.giveBuffer(b);
    m.giveBuffer(b);
    expect(m.keptBuffers()).toBe(1);
    expect(m.takeBuffer(SIZE)).toBe(b);
    expect(m.takeBuffer(SIZE)).not.toBe(b);
  });

  it('never keeps a size it does not recycle', () => {
    m.giveBuffer(m.takeBuffer(20_000));
    m.giveBuffer(m.takeBuffer(4096));
    m.giveBuffer(m.takeBuffer(131_072));
    expect(m.keptBuffers()).toBe(0);
  });
});
