import { describe, expect, it } from 'vitest';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import type { NodeState } from '../../src/stream/node-state.ts';
import { UnattachedReaper } from '../../src/stream/unattached.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

/** The part of a stream anchor the reaper reads, with the feed and the end set by the test. */
class FakeAnchor {
  feedKind: 'none' | 'mux' = 'none';
  finished = false;
  failedWith: string | null = null;
  _unattachedDeadline = 0;
  readonly localId: bigint;
  constructor(localId: bigint) {
    this.localId = localId;
  }
  _fail(e: { code: string }): void {
    this.failedWith = e.code;
    this.finished = true;
  }
}

function reaper(timeout: number) {
  const runtime = new ManualRuntime();
  const anchors = new Map<bigint, FakeAnchor>();
  const state = { closed: false, drain: null, runtime, unattachedTimeout: timeout, anchors } as unknown as NodeState;
  const expired: bigint[] = [];
  const r = new UnattachedReaper(state, (a) => {
    expired.push(a.localId);
    anchors.delete(a.localId);
  });
  let next = 1n;
  const create = (): FakeAnchor => {
    const a = new FakeAnchor(next++);
    anchors.set(a.localId, a);
    r.watch(a as unknown as StreamAnchor<unknown>);
    return a;
  };
  const watch = (a: FakeAnchor) => r.watch(a as unknown as StreamAnchor<unknown>);
  return { runtime, anchors, r, create, watch, expired };
}

describe('UnattachedReaper', () => {
  it('holds about the anchors still unattached, not every anchor created within the timeout', () => {
    const { r, create, anchors } = reaper(60_000);
    const waiting: FakeAnchor[] = [];
    for (let i = 0; i < 50_000; i++) {
      const a = create();
      // One in a hundred never gets a sender; the rest attach (and most finish) right away.
      if (i % 100 === 0) waiting.push(a);
      else if (i % 2 === 0) a.feedKind = 'mux';
      else anchors.delete(a.localId);
    }
    expect(waiting.length).toBe(500);
    // Compaction keeps at most twice what the last one kept plus its slack (1,024).
    expect(r.queued).toBeLessThanOrEqual(2 * 1024 + 2 * waiting.length + 1);
  });

  it('expires an anchor still without a sender at its deadline, and only that one', async () => {
    const { runtime, create, expired } = reaper(100);
    const lonely = create();
    const fed = create();
    fed.feedKind = 'mux';
    await runtime.advance(99);
    expect(expired).toEqual([]);
    await runtime.advance(1);
    expect(expired).toEqual([lonely.localId]);
    expect(lonely.failedWith).toBe('ERR_SENDER_DROPPED');
    expect(fed.failedWith).toBeNull();
  });

  it('gives an anchor unattached again after its sender left the whole timeout from then, not its first deadline', async () => {
    const { runtime, create, watch, expired } = reaper(100);
    const a = create();
    await runtime.advance(10);
    a.feedKind = 'mux';
    await runtime.advance(40);
    // The sender left at t = 50: the anchor is unattached again and watched anew.
    a.feedKind = 'none';
    watch(a);
    await runtime.advance(60);
    expect(runtime.time).toBe(110);
    expect(expired).toEqual([]);
    await runtime.advance(40);
    expect(expired).toEqual([a.localId]);
  });
});
