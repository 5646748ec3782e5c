/**
 * Reply linger (LINGER-*) (C = 64, reply_linger 1 s).
 */
import { describe, expect, it } from 'vitest';
import { CloseReason } from '../../src/wire/constants.ts';
import { egress, offerItems, openSlot, sid, wakeDelta, wakes, wire } from './harness.ts';

const C = 64;

describe('G. Reply linger (C = 64, reply_linger 1 s)', () => {
  it('LINGER-01 three credit replies (1, 2, 3) write no batch before the window ends; then one batch [1, 2, 3] and batcher_wakes{source="linger"} ≥ 1', async () => {
    const h = egress({ replyLinger: 1000 });
    const before = wakes(h.metrics);
    h.batcher.inbox.postReplyCredit(sid(1, 0), 1);
    await h.runtime.advance(100);
    h.batcher.inbox.postReplyCredit(sid(2, 0), 2);
    await h.runtime.advance(100);
    h.batcher.inbox.postReplyCredit(sid(3, 0), 3);
    await h.runtime.advance(799); // t = 999
    expect(h.sink.sent).toEqual([]);
    await h.runtime.advance(1); // t = 1000: the window of the first reply ends
    expect(wire(h, 0, true)).toEqual([['1.0:Credit+1', '2.0:Credit+2', '3.0:Credit+3']]);
    expect(h.sink.sent[0]!.at).toBe(1000);
    expect(wakeDelta(before, wakes(h.metrics)).linger).toBeGreaterThanOrEqual(1);
  });

  it('LINGER-02 a close reply does not wait: within 250 ms one batch [CreditUpdate, CloseSlot] is written, carrying the replies before it', async () => {
    const h = egress({ replyLinger: 1000 });
    await openSlot(h, C); // a live slot holding C = 64
    const mark = h.sink.sent.length;
    h.batcher.inbox.postReplyCredit(sid(5, 1), 9);
    await h.runtime.advance(100);
    expect(h.sink.sent.length).toBe(mark);
    h.batcher.inbox.postReplyClose(sid(6, 0), CloseReason.ProtocolError);
    await h.runtime.advance(150); // t = 250
    expect(wire(h, mark, true)).toEqual([['5.1:Credit+9', '6.0:Close(ProtocolError)@0']]);
    expect(h.sink.sent[mark]!.at).toBe(100);
    await h.runtime.advance(2000);
    expect(h.sink.sent.length).toBe(mark + 1);
  });

  it('LINGER-02 (timer) once the close has taken the replies out, their linger window no longer wakes the batcher', async () => {
    // batcher_wakes_total counts real wakes. The credit reply armed a 1 s window; the close
    // wrote it at 100 ms, so nothing is pending at 1 s and no linger wake may follow.
    const h = egress({ replyLinger: 1000 });
    h.batcher.inbox.postReplyCredit(sid(5, 1), 9);
    await h.runtime.advance(100);
    h.batcher.inbox.postReplyClose(sid(6, 0), CloseReason.ProtocolError);
    await h.runtime.advance(10);
    expect(h.sink.sent).toHaveLength(1);
    const before = wakes(h.metrics);
    await h.runtime.advance(2000);
    expect(wakeDelta(before, wakes(h.metrics)).linger).toBe(0);
    expect(h.runtime.timerCount).toBe(0);
  });

  it('LINGER-02 replies drained together go out credit first, then the close (the inbox drain order)', async () => {
    const h = egress({ replyLinger: 1000 });
    h.batcher.inbox.postReplyClose(sid(6, 0), CloseReason.UnknownSlot);
    h.batcher.inbox.postReplyCredit(sid(5, 1), 9);
    await h.runtime.runMacrotasks();
    expect(wire(h, 0, true)).toEqual([['5.1:Credit+9', '6.0:Close(UnknownSlot)@0']]);
  });

  it('LINGER-02 under the default Auto policy, data joining a pending reply ends its wait', async () => {
    // Under Auto{on_admission: true} any non-reply record ends the reply wait.
    const h = egress({ replyLinger: 1000 });
    const { slot } = await openSlot(h, C);
    const mark = h.sink.sent.length;
    h.batcher.inbox.postReplyCredit(sid(5, 1), 9);
    await h.runtime.advance(100);
    offerItems(h, slot, ['tok']);
    await h.runtime.runMacrotasks();
    expect(wire(h, mark, true)).toEqual([['5.1:Credit+9', '0.0:"tok"@1']]);
    expect(h.sink.sent[mark]!.at).toBe(100);
  });

  it('LINGER-03 with reply_linger 0, a reply is written at once', async () => {
    const h = egress({ replyLinger: 0 });
    h.batcher.inbox.postReplyCredit(sid(4, 2), 11);
    await h.runtime.runMacrotasks();
    expect(wire(h, 0, true)).toEqual([['4.2:Credit+11']]);
    expect(h.sink.sent[0]!.at).toBe(0);
    // Even under Manual.
    const m = egress({ replyLinger: 0, flushPolicy: { kind: 'manual' } });
    m.batcher.inbox.postReplyCredit(sid(4, 2), 11);
    await m.runtime.runMacrotasks();
    expect(wire(m, 0, true)).toEqual([['4.2:Credit+11']]);
  });
});
