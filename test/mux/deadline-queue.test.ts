import { describe, expect, it } from 'vitest';
import { DeadlineQueue } from '../../src/mux/deadline-queue.ts';

interface Entry {
  readonly name: string;
  readonly deadline: number;
  waiting: boolean;
}

const entry = (name: string, deadline: number): Entry => ({ name, deadline, waiting: true });

describe('DeadlineQueue', () => {
  it('an expire callback may clear the queue: the pass ends there and the queue stays usable', () => {
    const q = new DeadlineQueue<Entry>((e) => e.waiting);
    for (const e of [entry('a', 10), entry('b', 20)]) q.push(e);
    const expired: string[] = [];
    q.expire(25, 2, (e) => {
      expired.push(e.name);
      q.clear();
    });
    expect(expired).toEqual(['a']);
    expect(q.pending).toBe(false);
    const c = entry('c', 30);
    q.push(c);
    expect(q.peek()).toBe(c);
  });

  it('expires waiting entries in order once their deadline passed, and skips those that stopped waiting', () => {
    const q = new DeadlineQueue<Entry>((e) => e.waiting);
    const [a, b, c] = [entry('a', 10), entry('b', 20), entry('c', 30)];
    for (const e of [a, b, c]) q.push(e);
    b.waiting = false;
    const expired: string[] = [];
    q.expire(5, 3, (e) => expired.push(e.name));
    expect(expired).toEqual([]);
    expect(q.peek()).toBe(a);
    q.expire(25, 3, (e) => expired.push(e.name));
    expect(expired).toEqual(['a']);
    expect(q.peek()).toBe(c);
    const seen: string[] = [];
    q.forEachWaiting((e) => seen.push(e.name));
    expect(seen).toEqual(['c']);
    q.expire(30, 3, (e) => expired.push(e.name));
    expect(expired).toEqual(['a', 'c']);
    expect(q.pending).toBe(false);
  });

  it('with every entry waiting, pops only by deadline', () => {
    const q = new DeadlineQueue<Entry>(() => true);
    const a = entry('a', 10);
    a.waiting = false; // ignored: the predicate says every entry waits
    q.push(a);
    const expired: string[] = [];
    q.expire(9, Number.POSITIVE_INFINITY, (e) => expired.push(e.name));
    expect(q.peek()).toBe(a);
    q.expire(10, Number.POSITIVE_INFINITY, (e) => expired.push(e.name));
    expect(expired).toEqual(['a']);
    q.push(entry('b', 1));
    q.clear();
    expect(q.pending).toBe(false);
  });

  it('a push drops the entries that stopped waiting once the queue doubles, keeping the rest in order', () => {
    const q = new DeadlineQueue<Entry>((e) => e.waiting);
    const kept: Entry[] = [];
    for (let i = 0; i < 100_000; i++) {
      const e = entry(String(i), i);
      q.push(e);
      if (i % 1000 === 0) kept.push(e);
      else e.waiting = false;
    }
    // Without compaction on push all 100,000 would wait for the sweep (a whole window of them).
    expect(q.size).toBeLessThanOrEqual(2 * 1024 + 2 * kept.length + 1);
    const expired: string[] = [];
    q.expire(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, (e) => expired.push(e.name));
    expect(expired).toEqual(kept.map((e) => e.name));
  });

  it('an expire callback that pushes (and so compacts) does not end the pass early', () => {
    const q = new DeadlineQueue<Entry>((e) => e.waiting);
    // Enough finished entries behind the due ones that the callback's push compacts the queue.
    const due = [entry('a', 1), entry('b', 2)];
    for (const e of due) q.push(e);
    for (let i = 0; i < 1100; i++) {
      const e = entry(`late${i}`, 1000 + i);
      q.push(e);
      e.waiting = false;
    }
    const expired: string[] = [];
    q.expire(10, Number.POSITIVE_INFINITY, (e) => {
      expired.push(e.name);
      if (e.name === 'a') for (let i = 0; i < 1100; i++) q.push(entry(`more${i}`, 5000 + i));
    });
    expect(expired).toEqual(['a', 'b']);
  });
});
