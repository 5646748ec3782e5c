import { describe, expect, it } from 'vitest';
import { HEARTBEAT_FLOOR_MS, HeartbeatSchedule } from '../../src/mux/heartbeats.ts';

const sender = (interval: number) => {
  const s = { interval, beats: 0, heartbeat: () => void s.beats++ };
  return s;
};

describe('HeartbeatSchedule', () => {
  it('beats each producer at its interval (floored), sharing a wake within a tenth of it', () => {
    const h = new HeartbeatSchedule();
    const a = sender(100);
    const b = sender(1); // floored to HEARTBEAT_FLOOR_MS
    expect(h.add(a, 0)).toBe(100);
    expect(h.add(b, 0)).toBe(HEARTBEAT_FLOOR_MS);
    expect(Number.isNaN(h.add(a, 0))).toBe(true); // already registered
    expect(Number.isNaN(h.add(sender(Number.POSITIVE_INFINITY), 0))).toBe(true);
    expect(h.size).toBe(2);
    expect(h.next()).toBe(HEARTBEAT_FLOOR_MS);
    h.run(91); // a is due at 100, within its slack of 10
    expect(a.beats).toBe(1);
    expect(b.beats).toBe(1);
    expect(h.next()).toBe(101);
    h.remove(b);
    expect(h.size).toBe(1);
    expect(h.next()).toBe(191);
    h.clear();
    expect(h.next()).toBe(Number.POSITIVE_INFINITY);
  });
});
