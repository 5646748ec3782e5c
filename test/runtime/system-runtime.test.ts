// systemRuntime(): the one place lanemux touches timers, so it decides whether a timer may hold the
// process open — not in any runtime (Node and Bun timer objects, Deno numeric ids), unless asked.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isRuntime, systemRuntime } from '../../src/runtime/runtime.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('systemRuntime().setTimer', () => {
  it('makes a timer that does not keep a Node process alive, and a ref’d one only with keepAlive', () => {
    const rt = systemRuntime();
    const plain = rt.setTimer(() => {}, 60_000) as NodeJS.Timeout;
    const kept = rt.setTimer(() => {}, 60_000, true) as NodeJS.Timeout;
    try {
      expect(plain.hasRef()).toBe(false);
      expect(kept.hasRef()).toBe(true);
    } finally {
      rt.clearTimer(plain);
      rt.clearTimer(kept);
    }
  });

  it('unrefs a numeric timer id through Deno.unrefTimer (Deno), and leaves a keepAlive one alone', () => {
    const unrefTimer = vi.fn<(id: number) => void>();
    let next = 40;
    const fakeSetTimeout = vi.fn(() => ++next);
    vi.stubGlobal('Deno', { unrefTimer });
    vi.stubGlobal('setTimeout', fakeSetTimeout);
    const rt = systemRuntime();
    const id = rt.setTimer(() => {}, 1_000);
    const kept = rt.setTimer(() => {}, 1_000, true);
    vi.unstubAllGlobals();
    expect(fakeSetTimeout).toHaveBeenCalledTimes(2);
    expect(id).toBe(41);
    expect(kept).toBe(42);
    expect(unrefTimer.mock.calls).toEqual([[41]]);
  });

  it('fires the callback after the delay and not after clearTimer', async () => {
    const rt = systemRuntime();
    const fired: string[] = [];
    const cleared = rt.setTimer(() => fired.push('cleared'), 1);
    rt.clearTimer(cleared);
    await new Promise<void>((resolve) =>
      rt.setTimer(() => {
        fired.push('fired');
        resolve();
      }, 5),
    );
    expect(fired).toEqual(['fired']);
  });
});

describe('systemRuntime().macrotask', () => {
  it('runs after the current task and its microtasks, in call order (setImmediate)', async () => {
    const rt = systemRuntime();
    const order: string[] = [];
    const done = new Promise<void>((resolve) => {
      rt.macrotask(() => order.push('macro 1'));
      rt.macrotask(() => {
        order.push('macro 2');
        resolve();
      });
    });
    void Promise.resolve().then(() => order.push('micro'));
    order.push('sync');
    await done;
    expect(order).toEqual(['sync', 'micro', 'macro 1', 'macro 2']);
  });

  it('falls back to one MessageChannel where there is no setImmediate (browsers), same order', async () => {
    const channels = vi.fn();
    const Real = MessageChannel;
    vi.stubGlobal('setImmediate', undefined);
    vi.stubGlobal(
      'MessageChannel',
      class extends Real {
        constructor() {
          super();
          channels();
        }
      },
    );
    const rt = systemRuntime();
    expect(channels, 'no channel until the first macrotask').not.toHaveBeenCalled();
    const order: string[] = [];
    const done = new Promise<void>((resolve) => {
      rt.macrotask(() => order.push('macro 1'));
      rt.macrotask(() => {
        order.push('macro 2');
        resolve();
      });
    });
    void Promise.resolve().then(() => order.push('micro'));
    order.push('sync');
    await done;
    expect(order).toEqual(['sync', 'micro', 'macro 1', 'macro 2']);
    expect(channels).toHaveBeenCalledTimes(1);
  });
});

describe('isRuntime', () => {
  it('accepts a system or manual runtime and refuses an object that lacks a member', () => {
    expect(isRuntime(systemRuntime())).toBe(true);
    expect(isRuntime(new ManualRuntime())).toBe(true);
    const { macrotask: _, ...partial } = systemRuntime();
    expect(isRuntime(partial)).toBe(false);
    expect(isRuntime(null)).toBe(false);
  });
});
