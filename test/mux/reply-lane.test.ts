/**
 * A client's reply lane (src/mux/reply-lane.ts) writes what a batcher with no slot writes: the same
 * posts to both inboxes give the same batches byte for byte, the same counters, and the same credit
 * handed back, whether writes are admitted at once, parked, refused (epoch death) or the lane retires.
 */
import { describe, expect, it } from 'vitest';
import { Batcher } from '../../src/mux/batcher.ts';
import type { LaneWriter } from '../../src/mux/lane-writer.ts';
import { ReplyLane } from '../../src/mux/reply-lane.ts';
import { CloseReason } from '../../src/wire/constants.ts';
import { PEER, egress, type EgressHarness } from './harness.ts';

interface Side {
  readonly h: EgressHarness;
  readonly w: LaneWriter;
}

/**
 * A batcher (as a node's lane has) and a reply lane (as a client's has), each with its own host;
 * both are the second writer of their host, so their epochs match.
 */
function pair(config: Parameters<typeof egress>[0] = {}): [Side, Side] {
  const a = egress(config);
  const b = egress(config);
  return [
    { h: a, w: new Batcher(a.host, PEER, 0) },
    { h: b, w: new ReplyLane(b.host, PEER, 0) },
  ];
}

/** Everything both sides must agree on: the bytes written and the counters of the write path. */
function observed(s: Side) {
  const m = s.h.metrics;
  return {
    payloads: s.h.sink.sent.map((b) => Array.from(b.payload)),
    recordsSent: Array.from(m.recordsSent),
    batchesSent: m.batchesSent,
    stagedRecords: m.stagedRecords,
    epochDeaths: m.epochDeaths,
    creditReposted: m.creditReposted,
    creditLost: m.creditLost,
    wakes: Array.from(m.batcherWakes),
    parked: s.w.parked,
    idle: s.w.idle,
  };
}

/** A mix of replies: coalesced grants, a close, a reject, a cancel pair and a stop. */
function postReplies(w: LaneWriter, base: number): void {
  w.inbox.postReplyCredit(base + 1, 5);
  w.inbox.postReplyCredit(base + 2, 7);
  w.inbox.postReplyCredit(base + 1, 3);
  w.inbox.postReplyClose(base + 3, CloseReason.UnknownSlot);
  w.inbox.postReject(base + 4, CloseReason.ProtocolError);
  w.inbox.postReplyClose(base + 5, CloseReason.UnknownSlot);
  w.inbox.postReplyLifecycle(base + 5, 0x55n, true);
  w.inbox.postReplyLifecycle(base + 6, 0x66n, false);
}

async function both(sides: [Side, Side], step: (s: Side) => void | Promise<void>): Promise<void> {
  for (const s of sides) await step(s);
}

describe('reply lane (a client writes replies without the batcher)', () => {
  it('writes the same batches and counts the same as a batcher with no slot, under each flush policy', async () => {
    const policies = [
      { kind: 'auto', onAdmission: true },
      { kind: 'auto', onAdmission: false, maxLinger: 20 },
      { kind: 'manual' },
    ] as const;
    for (const flushPolicy of policies) {
      const sides = pair({ flushPolicy });
      await both(sides, async (s) => {
        postReplies(s.w, 0x10);
        await s.h.runtime.advance(50);
        s.w.kick();
        postReplies(s.w, 0x20);
        await s.h.runtime.advance(50);
        s.w.kick();
      });
      const [batcher, lane] = sides.map(observed);
      expect(batcher!.payloads.length).toBeGreaterThan(0);
      expect(lane).toEqual(batcher);
    }
  });

  it('coalesces grants posted while a write is parked and writes them once admitted, as a batcher does', async () => {
    const sides = pair();
    await both(sides, async (s) => {
      s.h.sink.mode = 'stall';
      postReplies(s.w, 0x10);
      await s.h.runtime.runMacrotasks();
      postReplies(s.w, 0x20);
      s.w.inbox.postReplyCredit(0x11, 9);
      await s.h.runtime.runMacrotasks();
      s.h.sink.release();
      await s.h.runtime.advance(10);
    });
    const [batcher, lane] = sides.map(observed);
    expect(batcher!.payloads.length).toBe(2);
    expect(lane).toEqual(batcher);
  });

  it('a refused write is epoch death: the credit it carried is re-posted and goes out in the new epoch, as from a batcher', async () => {
    const sides = pair();
    await both(sides, async (s) => {
      s.h.sink.mode = 'refuse';
      postReplies(s.w, 0x10);
      await s.h.runtime.runMacrotasks();
      s.h.sink.mode = 'open';
      await s.h.runtime.advance(10);
    });
    const [batcher, lane] = sides.map(observed);
    expect(batcher!.epochDeaths).toBe(1);
    expect(batcher!.creditReposted).toBe(15);
    expect(lane).toEqual(batcher);
  });

  it('retiring hands back the same credit (discarded) or writes the same last replies (graceful)', async () => {
    const discarded = pair({ flushPolicy: { kind: 'manual' } });
    const left: number[][] = [];
    await both(discarded, async (s) => {
      postReplies(s.w, 0x10);
      await s.h.runtime.runMacrotasks();
      s.w.inbox.postReplyCredit(0x30, 4);
      left.push(s.w.retire().credit);
    });
    // The closes are urgent, so the first replies were written; the grant posted after is handed back.
    expect(left[0]).toEqual([0x30, 4]);
    expect(left[1]).toEqual(left[0]);
    expect(observed(discarded[1])).toEqual(observed(discarded[0]));

    const graceful = pair({ flushPolicy: { kind: 'manual' } });
    await both(graceful, async (s) => {
      postReplies(s.w, 0x10);
      s.w.inbox.postRetire();
      await s.h.runtime.runMacrotasks();
    });
    const [batcher, lane] = graceful.map(observed);
    expect(batcher!.payloads.length).toBe(1);
    expect(lane).toEqual(batcher);
    expect(graceful[1].w.retired).toBe(true);
  });

  it('refuses owned control, as a batcher that opened no slot does', () => {
    const [, lane] = pair();
    expect(lane.w.inbox.postCredit(0x10, 1)).toBe(false);
    expect(lane.w.inbox.postClose(0x10, CloseReason.UnknownSlot)).toBe(false);
    expect(lane.w.slotFor(0x10)).toBeUndefined();
    expect([...lane.w.slots()]).toEqual([]);
  });
});
