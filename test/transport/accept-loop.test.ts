// The Deno TCP and WebTransport servers accept through acceptLoop: a failed accept (EMFILE …) must
// pause and retry instead of ending the loop (iterating a Deno listener ends at its first error), and
// the loop must end when its owner stops it or the listener is gone.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ACCEPT_BACKOFF_MAX_MS, ACCEPT_BACKOFF_MIN_MS, acceptLoop } from '../../src/transport/accept-loop.ts';

const named = (name: string, message = name): Error => Object.assign(new Error(message), { name });

/** A scripted listener: each step is a connection id or an error. */
function scripted(steps: Array<number | Error>, opts: { stopAfter?: number } = {}) {
  const accepted: number[] = [];
  const sleeps: number[] = [];
  let i = 0;
  let stopped = false;
  const { done: loop } = acceptLoop<number>({
    accept: async () => {
      const s = steps[i++];
      if (s === undefined) {
        stopped = true;
        throw named('BadResource', 'listener closed');
      }
      if (s instanceof Error) throw s;
      return s;
    },
    onAccepted: (c) => {
      accepted.push(c);
      if (opts.stopAfter !== undefined && accepted.length >= opts.stopAfter) stopped = true;
    },
    stopped: () => stopped,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });
  return { loop, accepted, sleeps };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('acceptLoop', () => {
  it('keeps accepting after failed accepts, backing off 5 ms doubling, reset by a success', async () => {
    const emfile = named('Error', 'Too many open files (os error 24)');
    const { loop, accepted, sleeps } = scripted([1, emfile, emfile, emfile, 2, emfile, 3]);
    await loop;
    expect(accepted).toEqual([1, 2, 3]);
    expect(sleeps).toEqual([5, 10, 20, 5]);
  });

  it('caps the back-off at 1 s', async () => {
    const err = named('Error', 'transient');
    const { loop, sleeps } = scripted([...Array.from({ length: 12 }, () => err), 7]);
    await loop;
    expect(sleeps[0]).toBe(ACCEPT_BACKOFF_MIN_MS);
    expect(Math.max(...sleeps)).toBe(ACCEPT_BACKOFF_MAX_MS);
    expect(sleeps.slice(-3)).toEqual([1000, 1000, 1000]);
  });

  it('ends when the listener is gone (BadResource, Interrupted) without retrying', async () => {
    for (const name of ['BadResource', 'Interrupted']) {
      const { loop, accepted, sleeps } = scripted([4, named(name), 5]);
      await loop;
      expect(accepted).toEqual([4]);
      expect(sleeps).toEqual([]);
    }
  });

  it('ends when its owner stops it', async () => {
    const { loop, accepted } = scripted([1, 2, 3, 4], { stopAfter: 2 });
    await loop;
    expect(accepted).toEqual([1, 2]);
  });

  it('a throwing onAccepted drops that connection only and never rejects the loop', async () => {
    const seen: number[] = [];
    let i = 0;
    const conns = [1, 2, 3];
    await acceptLoop<number>({
      accept: async () => {
        const c = conns[i++];
        if (c === undefined) throw named('BadResource');
        return c;
      },
      onAccepted: (c) => {
        seen.push(c);
        if (c === 2) throw new Error('handover failed');
      },
      stopped: () => false,
    }).done;
    expect(seen).toEqual([1, 2, 3]);
  });

  it('wake() cuts a back-off pause short: a loop stopped while pausing ends without waiting for its timer', async () => {
    vi.useFakeTimers();
    let stopped = false;
    let calls = 0;
    const loop = acceptLoop<number>({
      accept: async () => {
        calls++;
        throw named('Error', 'Too many open files (os error 24)');
      },
      onAccepted: () => {},
      stopped: () => stopped,
    });
    // Let the first accept fail and the loop start its 5 ms pause (fake timers: it never fires by itself).
    for (let k = 0; k < 5; k++) await Promise.resolve();
    expect(calls).toBe(1);
    stopped = true;
    loop.wake();
    await loop.done;
    expect(calls).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });
});
