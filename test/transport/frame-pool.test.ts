// FrameDecoder against the node's IncompleteFramePool: split frames grow as their bytes arrive and
// are reserved in the pool, large ones have a deadline, held (paused) bytes count too, and every
// path that ends a frame or a decoder gives its bytes back.
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isLanemuxError } from '../../src/errors.ts';
import type { TransportError } from '../../src/transport/errors.ts';
import { FRAME_PREFIX_BYTES, FrameDecoder, MIN_PARTIAL_FRAME_BYTES, writeFrame } from '../../src/transport/frame.ts';
import { IncompleteFramePool, type FramePolicy } from '../../src/transport/frame-pool.ts';

function frame(message: Uint8Array): Uint8Array {
  const out = new Uint8Array(FRAME_PREFIX_BYTES + message.byteLength);
  writeFrame(out, message, undefined);
  return out;
}

function pattern(n: number, seed = 0): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7 + seed) & 0xff;
  return b;
}

/** Byte equality (vitest's deep equality walks a large Uint8Array element by element, slowly). */
function same(a: Uint8Array | undefined, b: Uint8Array): boolean {
  return a !== undefined && Buffer.compare(a, b) === 0;
}

function policy(limit: number, largeFrameBytes = 64 * 1024, deadlineMs = 10_000): FramePolicy {
  return { pool: new IncompleteFramePool(limit), largeFrameBytes, deadlineMs };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('FrameDecoder: split frames within the incomplete-frame pool', () => {
  it('allocates a split frame as its bytes arrive (never the announced size up front) and reserves exactly its buffer', () => {
    const p = policy(64 << 20);
    const d = new FrameDecoder(2 << 20, 'peer', { policy: p });
    const message = pattern(1 << 20);
    const wire = frame(message);
    const got: Uint8Array[] = [];
    // The header of a 1 MiB frame and 10 bytes: nothing near 1 MiB is reserved.
    expect(d.push(wire.subarray(0, 14), (m) => got.push(m))).toBeUndefined();
    expect(d.reservedBytes).toBe(MIN_PARTIAL_FRAME_BYTES);
    expect(p.pool.held).toBe(MIN_PARTIAL_FRAME_BYTES);
    let sent = 10;
    let growths = 0;
    let last = d.reservedBytes;
    for (let off = 14; off < wire.byteLength; off += 1000) {
      const end = Math.min(off + 1000, wire.byteLength);
      expect(d.push(wire.subarray(off, end), (m) => got.push(m))).toBeUndefined();
      sent += end - off;
      if (end === wire.byteLength) break;
      // Held at most twice what arrived (or the 4 KiB start), never more than announced; all of it in the pool.
      expect(d.reservedBytes).toBeLessThanOrEqual(Math.max(MIN_PARTIAL_FRAME_BYTES, 2 * sent));
      expect(d.reservedBytes).toBeLessThanOrEqual(message.byteLength);
      expect(p.pool.held).toBe(d.reservedBytes);
      if (d.reservedBytes !== last) growths++;
      last = d.reservedBytes;
    }
    // Geometric growth: a handful of copies for 1 MiB in 1,000-byte pieces.
    expect(growths).toBeLessThanOrEqual(10);
    expect(got).toHaveLength(1);
    expect(same(got[0], message)).toBe(true);
    expect(p.pool.held).toBe(0);
    expect(d.reservedBytes).toBe(0);
  });

  it('keeps the pool equal to what the decoder holds under any split of any frames, and empty after them (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 20_000 }), { maxLength: 12 }),
        fc.array(fc.integer({ min: 1, max: 9_000 }), { minLength: 1, maxLength: 30 }),
        (sizes, cuts) => {
          const messages = sizes.map((n, i) => pattern(n, i));
          const stream = new Uint8Array(messages.reduce((n, m) => n + 4 + m.byteLength, 0));
          let off = 0;
          for (const m of messages) {
            stream.set(frame(m), off);
            off += 4 + m.byteLength;
          }
          const p = policy(1 << 20, 8_000);
          const d = new FrameDecoder(1 << 20, 'peer', { policy: p });
          const got: Uint8Array[] = [];
          let pos = 0;
          let i = 0;
          while (pos < stream.byteLength) {
            const n = cuts[i++ % cuts.length] as number;
            if (d.push(stream.subarray(pos, pos + n), (m) => got.push(m)) !== undefined) return false;
            pos += n;
            if (p.pool.held !== d.reservedBytes) return false;
          }
          expect(got.length).toBe(messages.length);
          expect(messages.every((m, k) => same(got[k], m))).toBe(true);
          expect(p.pool.held).toBe(0);
          d.stop();
          return true;
        },
      ),
      { numRuns: 200 },
    );
  });

  it('delivers a frame that lies within one chunk as a view of it, reserving nothing', () => {
    const p = policy(1 << 20);
    const d = new FrameDecoder(1 << 20, 'peer', { policy: p });
    const chunk = new Uint8Array([...frame(pattern(300)), ...frame(pattern(200, 1))]);
    const got: Uint8Array[] = [];
    d.push(chunk, (m) => {
      got.push(m);
      expect(p.pool.held).toBe(0);
    });
    expect(got.map((m) => m.buffer === chunk.buffer)).toEqual([true, true]);
    expect(got[1]).toEqual(pattern(200, 1));
  });

  it('closes the connection whose reservation the pool refuses, with ERR_FRAME_DEADLINE naming the full pool, and gives back what it held', () => {
    const p = policy(7_000, 100_000);
    const d = new FrameDecoder(1 << 20, 'tcp://10.0.0.9:4000', { policy: p });
    const wire = frame(pattern(10_000));
    // 3,000 bytes arrived: a 6,000-byte buffer (twice what arrived).
    expect(d.push(wire.subarray(0, 3_004), () => {})).toBeUndefined();
    expect(p.pool.held).toBe(6_000);
    // 6,500 arrived: doubling (10,000) does not fit in 7,000, exactly what arrived does.
    expect(d.push(wire.subarray(3_004, 6_504), () => {})).toBeUndefined();
    expect(p.pool.held).toBe(6_500);
    // The rest does not fit at all.
    const error = d.push(wire.subarray(6_504), () => {});
    expect(isLanemuxError(error, 'ERR_FRAME_DEADLINE')).toBe(true);
    expect(error?.message).toMatch(
      /the node's memory for incomplete frames is full \(6500 bytes held, at most 7000 bytes\): closing tcp:\/\/10\.0\.0\.9:4000, which needed 3500 more bytes for a 10000-byte frame/,
    );
    expect(p.pool.held).toBe(0);
    expect(d.push(frame(pattern(10)), () => expect.unreachable())).toBeUndefined();
  });

  it('lets large frames take only three quarters of the pool, so ordinary frames of other links still fit', () => {
    const p = policy(100_000, 10_000);
    const attacker = new FrameDecoder(1 << 20, 'attacker', { policy: p });
    const honest = new FrameDecoder(1 << 20, 'honest', { policy: p });
    const big = frame(pattern(200_000));
    const error = attacker.push(big.subarray(0, 90_000), () => {});
    expect(isLanemuxError(error, 'ERR_FRAME_DEADLINE')).toBe(true);
    expect(error?.message).toContain('at most 75000 bytes for large frames, of 100000');
    const fill = new FrameDecoder(1 << 20, 'filler', { policy: p });
    expect(fill.push(big.subarray(0, 70_004), () => {})).toBeUndefined();
    expect(p.pool.held).toBeLessThanOrEqual(p.pool.largeLimit);
    // A split 9,000-byte frame of another link still gets its bytes.
    const small = frame(pattern(9_000, 3));
    const got: Uint8Array[] = [];
    expect(honest.push(small.subarray(0, 5_000), (m) => got.push(m))).toBeUndefined();
    expect(honest.push(small.subarray(5_000), (m) => got.push(m))).toBeUndefined();
    expect(got.length === 1 && same(got[0], pattern(9_000, 3))).toBe(true);
    fill.stop();
    expect(p.pool.held).toBe(0);
  });

  it('gives back a split frame when the decoder stops (connection closed mid-frame)', () => {
    const p = policy(1 << 20);
    const d = new FrameDecoder(1 << 20, 'peer', { policy: p });
    d.push(frame(pattern(50_000)).subarray(0, 30_000), () => {});
    expect(p.pool.held).toBeGreaterThan(0);
    expect(d.midFrame).toBe(true);
    d.stop();
    d.stop();
    expect(p.pool.held).toBe(0);
  });
});

describe('FrameDecoder: bytes held while paused', () => {
  it('reserves held bytes in the pool and gives them back as they are delivered', () => {
    const p = policy(1 << 20);
    const d = new FrameDecoder(1 << 20, 'peer', { policy: p });
    const got: number[] = [];
    let open = false;
    const handler = (m: Uint8Array): boolean => {
      got.push(m[0] as number);
      return open;
    };
    const first = new Uint8Array([...frame(Uint8Array.of(1)), ...frame(Uint8Array.of(2))]);
    d.push(first, handler);
    expect(d.paused).toBe(true);
    expect(p.pool.held).toBe(5); // the rest of the chunk: frame 2
    d.push(frame(Uint8Array.of(3, 3)), handler);
    expect(p.pool.held).toBe(5 + 6);
    expect(d.reservedBytes).toBe(11);
    open = true;
    expect(d.resume(handler)).toBeUndefined();
    expect(got).toEqual([1, 2, 3]);
    expect(p.pool.held).toBe(0);
  });

  it('keeps order when a resume pauses again, and stop() gives back what is still held', () => {
    const p = policy(1 << 20);
    const d = new FrameDecoder(1 << 20, 'peer', { policy: p });
    const got: number[] = [];
    const handler = (m: Uint8Array): boolean => {
      got.push(m[0] as number);
      return false;
    };
    d.push(
      new Uint8Array([...frame(Uint8Array.of(1)), ...frame(Uint8Array.of(2)), ...frame(Uint8Array.of(3))]),
      handler,
    );
    d.push(frame(Uint8Array.of(4)), handler);
    d.resume(handler);
    expect(got).toEqual([1, 2]);
    expect(p.pool.held).toBe(10);
    d.stop();
    expect(p.pool.held).toBe(0);
  });

  it('refuses held bytes the pool has no room for with ERR_FRAME_DEADLINE', () => {
    const p = policy(100);
    const d = new FrameDecoder(1 << 20, 'peer', { policy: p });
    d.push(frame(Uint8Array.of(1)), () => false);
    const error = d.push(new Uint8Array(200), () => {});
    expect(isLanemuxError(error, 'ERR_FRAME_DEADLINE')).toBe(true);
    expect(error?.message).toContain("the node's memory for incomplete frames is full");
    expect(p.pool.held).toBe(0);
  });
});

describe('FrameDecoder: the large-frame deadline', () => {
  it('gives every split frame, small or large, deadlineMs from its first byte, then stops and reports ERR_FRAME_DEADLINE; a frame within one chunk gets no timer', () => {
    vi.useFakeTimers();
    const p = policy(1 << 20, 1_000, 50);
    const errors: TransportError[] = [];
    const d = new FrameDecoder(1 << 20, 'tcp://10.0.0.9:4000', { policy: p, onDeadline: (e) => errors.push(e) });
    // A whole frame in one chunk: no timer.
    d.push(frame(pattern(100)), () => {});
    expect(vi.getTimerCount()).toBe(0);
    // A split small frame has the deadline too (cleared when it completes).
    const small = frame(pattern(1_000));
    d.push(small.subarray(0, 500), () => {});
    expect(vi.getTimerCount()).toBe(1);
    d.push(small.subarray(500), () => {});
    expect(vi.getTimerCount()).toBe(0);
    // A large frame that completes in time: its timer is cleared.
    const large = frame(pattern(2_000));
    d.push(large.subarray(0, 10), () => {});
    expect(vi.getTimerCount()).toBe(1);
    d.push(large.subarray(10), () => {});
    expect(vi.getTimerCount()).toBe(0);
    // A large frame that stalls.
    d.push(large.subarray(0, 1_500), () => {});
    vi.advanceTimersByTime(49);
    expect(errors).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.code).toBe('ERR_FRAME_DEADLINE');
    expect(errors[0]!.message).toBe(
      'frame of 2000 bytes from tcp://10.0.0.9:4000 did not complete within 50 ms of its first byte (1496 bytes arrived)',
    );
    expect(p.pool.held).toBe(0);
    expect(d.push(large.subarray(1_500), () => expect.unreachable())).toBeUndefined();
  });

  it('without onDeadline, reports a missed deadline from the next push', () => {
    vi.useFakeTimers();
    const p = policy(1 << 20, 10, 20);
    const d = new FrameDecoder(1 << 20, 'peer', { policy: p });
    d.push(frame(pattern(100)).subarray(0, 50), () => {});
    vi.advanceTimersByTime(20);
    expect(p.pool.held).toBe(0);
    expect(
      isLanemuxError(
        d.push(Uint8Array.of(1), () => {}),
        'ERR_FRAME_DEADLINE',
      ),
    ).toBe(true);
    expect(d.push(Uint8Array.of(1), () => {})).toBeUndefined();
  });

  it('does not count time the connection spent paused by us against the frame', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const p = policy(1 << 20, 10, 100);
    const errors: TransportError[] = [];
    const d = new FrameDecoder(1 << 20, 'peer', { policy: p, onDeadline: (e) => errors.push(e) });
    d.push(frame(pattern(100)).subarray(0, 50), () => {});
    vi.advanceTimersByTime(60);
    d.suspendDeadline();
    vi.advanceTimersByTime(1_000);
    expect(errors).toEqual([]);
    d.resumeDeadline();
    vi.advanceTimersByTime(39);
    expect(errors).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(errors.map((e) => e.code)).toEqual(['ERR_FRAME_DEADLINE']);
  });
});
