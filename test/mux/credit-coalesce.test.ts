// The consumer accumulates credit into one count per slot (docs/protocol.md §10.7): grants for one slot
// made while a reply batch is open (each drained by its own wake) leave in one CreditUpdate whose
// delta is their sum; a batch that is refused at admission re-posts exactly that sum.
import { describe, expect, it } from 'vitest';
import { RecordType } from '../../src/wire/constants.ts';
import { egress, sid } from './harness.ts';

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
