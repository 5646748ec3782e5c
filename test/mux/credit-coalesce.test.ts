// The consumer accumulates credit into one count per slot (docs/protocol.md §10.7): grants for one slot
// made while a reply batch is open (each drained by its own wake) leave in one CreditUpdate whose
// delta is their sum; a batch that is refused at admission re-posts exactly that sum.
import { describe, expect, it } from 'vitest';
import { RecordType } from '../../src/wire/constants.ts';
import { egress, openSlot, sid } from './harness.ts';

const credits = (h: ReturnType<typeof egress>, from = 0) =>
  h.sink.sent
    .slice(from)
    .map((b) =>
      b.decoded.records.filter((r) => r.type === RecordType.CreditUpdate).map((r) => [r.slot, r.creditDelta]),
    );

describe('credit replies coalesce per slot per batch', () => {
  it('grants for one slot in three wakes within the reply linger leave as one CreditUpdate with their sum', async () => {
    const h = egress({ replyLinger: 5 });
    for (const delta of [3, 4, 5]) {
      h.batcher.inbox.postReplyCredit(sid(7, 1), delta);
      h.batcher.inbox.postReplyCredit(sid(8, 0), 1);
      await h.runtime.runMacrotasks(); // its own wake and drain; the batch waits for company
      expect(h.sink.sent).toHaveLength(0);
    }
    await h.runtime.advance(5);
    expect(credits(h)).toEqual([
      [
        [sid(7, 1), 12],
        [sid(8, 0), 3],
      ],
    ]);
  });

  it('a refused batch of coalesced grants re-posts their sum, and the next epoch sends it once', async () => {
    const h = egress({ replyLinger: 5 });
    h.sink.mode = 'stall';
    for (const delta of [2, 6]) {
      h.batcher.inbox.postReplyCredit(sid(3, 0), delta);
      await h.runtime.runMacrotasks();
    }
    await h.runtime.advance(5);
    expect(credits(h)).toEqual([[[sid(3, 0), 8]]]);
    const mark = h.sink.sent.length;
    h.sink.mode = 'open';
    h.sink.refuseStalled();
    await h.runtime.advance(10);
    expect(h.metrics.creditReposted).toBe(8);
    expect(h.metrics.creditLost).toBe(0);
    expect(credits(h, mark).flat()).toEqual([[sid(3, 0), 8]]);
  });
});

describe('credit replies leave within the reply linger while the event loop is busy reading', () => {
  // A socket that stays readable keeps the loop in its reads (libuv takes up to 32 chunks per
  // readiness): neither the wake's macrotask nor the linger timer runs. The end of each inbound batch
  // is the point the writer is still reached at.
  it('a grant posted by an inbound batch goes out at the first later batch past the linger, with no macrotask or timer run', () => {
    const h = egress({ replyLinger: 1 });
    h.batcher.inbox.postReplyCredit(sid(5, 0), 16);
    h.runtime.time = 0.5;
    h.batcher.afterIngress();
    expect(h.sink.sent).toHaveLength(0); // still within the linger: it waits for company
    h.batcher.inbox.postReplyCredit(sid(6, 0), 16);
    h.runtime.time = 1;
    h.batcher.afterIngress();
    expect(credits(h)).toEqual([
      [
        [sid(5, 0), 16],
        [sid(6, 0), 16],
      ],
    ]);
  });

  it('a grant staged by its wake goes out at the first batch past its deadline even when the timer has not fired', async () => {
    const h = egress({ replyLinger: 2 });
    h.batcher.inbox.postReplyCredit(sid(9, 1), 4);
    await h.runtime.runMacrotasks(); // staged, the linger timer armed
    expect(h.sink.sent).toHaveLength(0);
    h.runtime.time = 2; // the timer is due but the loop has not reached it
    h.batcher.afterIngress();
    expect(credits(h)).toEqual([[[sid(9, 1), 4]]]);
  });

  it('what throws in a wake run early is thrown from a macrotask, as the wake would have, never into the inbound batch', async () => {
    const h = egress({ replyLinger: 1 });
    const { slot, owner } = await openSlot(h, 0, 0xc1n, 0x7001n);
    owner.onLifecycle = () => {
      throw new Error('owner failed');
    };
    h.batcher.inbox.postLifecycle(slot.id, 0x7001n, true);
    h.batcher.inbox.postReplyCredit(sid(5, 0), 2);
    h.runtime.time += 1;
    expect(() => h.batcher.afterIngress()).not.toThrow();
    await expect(h.runtime.runMacrotasks()).rejects.toThrow('owner failed');
  });

  it('the wake run early leaves nothing for its queued macrotask: one batch, one wake', async () => {
    const h = egress({ replyLinger: 1 });
    h.batcher.inbox.postReplyCredit(sid(5, 0), 3);
    h.runtime.time = 1;
    h.batcher.afterIngress();
    const wakes = h.metrics.batcherWakes.reduce((a, b) => a + b, 0);
    await h.runtime.advance(10);
    expect(h.sink.sent).toHaveLength(1);
    expect(h.metrics.batcherWakes.reduce((a, b) => a + b, 0)).toBe(wakes);
  });
});
