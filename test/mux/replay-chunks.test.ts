// The process-wide free list of replay-log chunks (src/mux/replay-chunks.ts): how many it keeps
// follows how many are lent out, between a floor and a ceiling.
import { beforeEach, describe, expect, it, vi } from 'vitest';

type Chunks = typeof import('../../src/mux/replay-chunks.ts');
const SIZE = 65_536;
// The list is module state: each test gets a fresh module, none kept and none lent.
let m: Chunks;
beforeEach(async () => {
  vi.resetModules();
  m = await import('../../src/mux/replay-chunks.ts');
});

describe('replay chunks', () => {
  it('keeps what many busy logs give back while others still hold theirs, so their next chunks are not fresh allocations', () => {
    // 80 chunks lent out across lanes' logs; PINGs answered on some lanes free 40 while 40 stay lent.
    const lentOut = Array.from({ length: 80 }, () => m.takeBuffer(SIZE));
    const freed = lentOut.splice(0, 40);
    for (const b of freed) m.giveBuffer(b);
    // A fixed 16 would have let 24 of the 40 go to the collector, to be allocated again.
    expect(m.keptBuffers()).toBe(40);
    // The next chunks the logs take are those very buffers.
    const again = Array.from({ length: 40 }, () => m.takeBuffer(SIZE));
    expect(m.keptBuffers()).toBe(0);
    expect(again.every((b) => freed.includes(b))).toBe(true);
  });

  it('falls back to the floor once every chunk is given back (the node went idle)', () => {
    const lentOut = Array.from({ length: 100 }, () => m.takeBuffer(SIZE));
    for (const b of lentOut) m.giveBuffer(b);
    expect(m.keptBuffers()).toBe(m.REPLAY_BUFFERS_KEPT);
  });

  it('never keeps more than the ceiling, however many are lent out', () => {
    const lentOut = Array.from({ length: m.REPLAY_BUFFERS_KEPT_MAX + 100 }, () => m.takeBuffer(SIZE));
    const held = lentOut.pop()!;
    for (const b of lentOut) {
      m.giveBuffer(b);
      expect(m.keptBuffers()).toBeLessThanOrEqual(m.REPLAY_BUFFERS_KEPT_MAX);
    }
    expect(m.keptBuffers()).toBeGreaterThan(m.REPLAY_BUFFERS_KEPT);
    m.giveBuffer(held);
    expect(m.keptBuffers()).toBe(m.REPLAY_BUFFERS_KEPT);
  });

  it('keeps a buffer given back twice only once, so it is never handed to two writers', () => {
    const lentOut = Array.from({ length: 40 }, () => m.takeBuffer(SIZE));
    const b = lentOut[0]!;
    m.giveBuffer(b);
    m.giveBuffer(b);
    expect(m.keptBuffers()).toBe(1);
    expect(m.takeBuffer(SIZE)).toBe(b);
    expect(m.takeBuffer(SIZE)).not.toBe(b);
  });

  it('never keeps a size it does not recycle', () => {
    const held = m.takeBuffer(SIZE);
    m.giveBuffer(m.takeBuffer(20_000));
    m.giveBuffer(m.takeBuffer(4096));
    expect(m.keptBuffers()).toBe(0);
    m.giveBuffer(held);
    expect(m.keptBuffers()).toBe(1);
  });
});
