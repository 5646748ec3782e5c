// The peer-level byte window as pure bookkeeping (src/credit/peer-window.ts): the sender's fit rule,
// the receiver's report conditions, overrun detection, and a timer-free model of a sender and a
// receiver that checks the bound (held ≤ W + one batch) and that a blocked sender is always released.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReceiveWindow, SendWindow } from '../../src/credit/peer-window.ts';

describe('SendWindow', () => {
  it('a body fits while in-flight + body ≤ W, and any body fits when nothing is in flight', () => {
    const w = new SendWindow(100);
    expect(w.limited).toBe(true);
    expect(w.fits(1_000_000)).toBe(true); // nothing in flight: a record larger than W cannot deadlock
    w.charge(60);
    expect(w.fits(40)).toBe(true);
    expect(w.fits(41)).toBe(false);
    w.charge(40);
    expect(w.hasRoom).toBe(false);
    expect(w.fits(1)).toBe(false);
  });

  it('without an advertised window nothing limits', () => {
    const w = new SendWindow();
    expect(w.limited).toBe(false);
    w.charge(1e12);
    expect(w.fits(1e12)).toBe(true);
  });

  it('a release beyond what is in flight is reported as the excess and clamps in-flight at 0', () => {
    const w = new SendWindow(100);
    w.charge(30);
    expect(w.release(10)).toBe(0);
    expect(w.inflight).toBe(20);
    expect(w.release(25)).toBe(5);
    expect(w.inflight).toBe(0);
  });

  it('un-charging (a batch never sent) and a new link both give the room back', () => {
    const w = new SendWindow(100);
    w.charge(90);
    w.uncharge(50);
    expect(w.inflight).toBe(40);
    w.uncharge(1_000);
    expect(w.inflight).toBe(0);
    w.charge(70);
    w.reset(200);
    expect([w.inflight, w.size]).toEqual([0, 200]);
  });
});

describe('ReceiveWindow', () => {
  it('counts held bytes and their peak; releases accumulate as unreported until taken', () => {
    const r = new ReceiveWindow(1_000, 100, true);
    r.charge(300);
    r.charge(200);
    expect([r.held, r.peak]).toEqual([500, 500]);
    expect(r.release(50)).toBe(false); // 50 < W/4, held + unreported = 500 ≤ W − maxBatch
    expect([r.held, r.unreported]).toEqual([450, 50]);
    expect(r.takeReport()).toBe(50);
    expect(r.unreported).toBe(0);
    expect(r.takeReport()).toBe(0);
  });

  it('a report is due at W/4 released', () => {
    const r = new ReceiveWindow(1_000, 100, true);
    r.charge(600);
    expect(r.release(249)).toBe(false);
    expect(r.release(1)).toBe(true);
  });

  it('a report is due as soon as held + unreported exceeds W − maxBatch (a sender may be blocked)', () => {
    const r = new ReceiveWindow(1_000, 100, true);
    r.charge(901);
    expect(r.due).toBe(false); // nothing released yet: nothing to report
    expect(r.release(1)).toBe(true);
    const s = new ReceiveWindow(1_000, 100, true);
    s.charge(900);
    expect(s.release(1)).toBe(false); // 899 + 1 = 900, not above W − maxBatch
  });

  it('no report for a consumer that keeps up with a trickle: owed bytes wait for W/4 or for the sweep', () => {
    const r = new ReceiveWindow(1_000, 100, true);
    r.charge(10);
    expect(r.release(10)).toBe(false); // held 0, 10 owed: no update per batch
    expect(r.pending).toBe(true); // the sweep's backstop sends it
    expect(r.dropped(5)).toBe(false); // dropped on arrival: owed like released bytes
    expect([r.held, r.unreported]).toEqual([0, 15]);
  });

  it('overruns only past W + one batch, and never for the first record held', () => {
    const r = new ReceiveWindow(1_000, 100, true);
    expect(r.overruns(50_000)).toBe(false); // a lone record of any size: the sender had nothing in flight
    r.charge(1);
    expect(r.overruns(1_099)).toBe(false);
    expect(r.overruns(1_100)).toBe(true);
  });

  it('inactive (the peer advertised no window): counted, never due, never blocking, and an overrun only past 4 windows plus a batch', () => {
    const r = new ReceiveWindow(1_000, 100, false);
    r.charge(3_000);
    expect(r.overruns(1_100)).toBe(false); // 4,100 = 4 · 1,000 + 100
    expect(r.overruns(1_101)).toBe(true);
    r.release(3_000);
    r.charge(10_000);
    expect(r.overruns(1)).toBe(true);
    expect(r.release(10_000)).toBe(false);
    expect(r.pending).toBe(false);
    expect(r.mayBlock(1 << 30)).toBe(false);
    expect(r.held).toBe(0);
  });

  it('mayBlock: only with something held or owed, and only past W − the largest blocked record', () => {
    const r = new ReceiveWindow(1_000, 100, true);
    expect(r.mayBlock(1 << 30)).toBe(false);
    r.charge(899);
    expect(r.mayBlock(100)).toBe(false);
    r.charge(2);
    expect(r.mayBlock(100)).toBe(true);
    expect(r.mayBlock(1 << 30)).toBe(true);
  });
});

/**
 * A sender and a receiver with in-transit queues, driven by arbitrary interleavings. Some records
 * belong to streams nobody reads (`pinned`): they stay held for good. The receiver reports only
 * when `due` (and, with `sweep`, at a sweep step). Invariants: the receiver never holds more than
 * the window (or one lone record) and never sees an overrun. Liveness, once nothing moves: if the
 * sender still waits, every byte the receiver released has been reported and the window is full of
 * bytes really held (`held + next > W`).
 */
function simulate(
  W: number,
  maxBatch: number,
  records: Array<{ b: number; pinned: boolean }>,
  steps: number[],
  sweep: boolean,
): { maxHeld: number; overruns: number } {
  const send = new SendWindow(W);
  const recv = new ReceiveWindow(W, maxBatch, true);
  const queue = [...records];
  const dataInTransit: Array<{ b: number; pinned: boolean }> = [];
  const updatesInTransit: number[] = [];
  const unread: number[] = [];
  let maxHeld = 0;
  let overruns = 0;
  let reportScheduled = false;
  const act = (k: number): void => {
    switch (k % 6) {
      case 0: // the sender stages what fits
        while (queue.length > 0 && send.fits(queue[0]!.b)) {
          const r = queue.shift()!;
          send.charge(r.b);
          dataInTransit.push(r);
        }
        break;
      case 1: // data lands
        if (dataInTransit.length > 0) {
          const r = dataInTransit.shift()!;
          if (recv.overruns(r.b)) overruns++;
          if (recv.charge(r.b)) reportScheduled = true;
          if (!r.pinned) unread.push(r.b);
          maxHeld = Math.max(maxHeld, recv.held);
        }
        break;
      case 2: // the consumer takes one record
        if (unread.length > 0 && recv.release(unread.shift()!)) reportScheduled = true;
        break;
      case 3: // the coalesced report goes out (a macrotask later)
        if (reportScheduled) {
          reportScheduled = false;
          const n = recv.takeReport();
          if (n > 0) updatesInTransit.push(n);
        }
        break;
      case 4: // an update lands
        if (updatesInTransit.length > 0) expect(send.release(updatesInTransit.shift()!)).toBe(0);
        break;
      case 5: // the sweep's backstop
        if (sweep && recv.pending) reportScheduled = true;
        break;
    }
  };
  for (const k of steps) act(k);
  // Drain: the consumer reads every readable record; run until nothing moves.
  const state = (): string =>
    `${queue.length}/${dataInTransit.length}/${updatesInTransit.length}/${unread.length}/${reportScheduled}/${recv.unreported}`;
  for (let guard = 0; guard < 100_000; guard++) {
    const before = state();
    for (let k = 0; k < 6; k++) act(k);
    if (state() === before) break;
  }
  expect(send.inflight, 'in flight = held + released-but-unreported').toBe(recv.held + recv.unreported);
  if (queue.length > 0) {
    // The sender waits: nothing released may be kept back, and the window is full of held bytes.
    expect(recv.unreported, 'released bytes kept back from a blocked sender').toBe(0);
    expect(recv.held + queue[0]!.b, 'a sender waits only on a full window').toBeGreaterThan(W);
  }
  return { maxHeld, overruns };
}

const recordArb = (max: number) => fc.record({ b: fc.integer({ min: 0, max }), pinned: fc.boolean() });

describe('window model: bound and release (no timers)', () => {
  it('records that fit a batch, some never read: held ≤ W (or one lone record), no overrun, and a blocked sender is released by the due conditions alone', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4_096 }),
        fc.integer({ min: 1, max: 2_048 }),
        fc.array(recordArb(10_000), { minLength: 1, maxLength: 200 }),
        fc.array(fc.nat(), { maxLength: 600 }),
        (W, maxBatch, raw, steps) => {
          const records = raw.map((r) => ({ b: r.b % (maxBatch + 1), pinned: r.pinned }));
          const r = simulate(W, maxBatch, records, steps, false);
          expect(r.overruns).toBe(0);
          expect(r.maxHeld).toBeLessThanOrEqual(Math.max(W, maxBatch));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('records larger than a batch (rendezvous), some never read: the sweep backstop releases them, and a record larger than W goes alone', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4_096 }),
        fc.integer({ min: 1, max: 512 }),
        fc.array(recordArb(20_000), { minLength: 1, maxLength: 120 }),
        fc.array(fc.nat(), { maxLength: 600 }),
        (W, maxBatch, records, steps) => {
          const r = simulate(W, maxBatch, records, steps, true);
          expect(r.overruns).toBe(0);
          expect(r.maxHeld).toBeLessThanOrEqual(Math.max(W, ...records.map((x) => x.b)));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('without the sweep, a record larger than a batch can wait on bytes the receiver released but kept back', () => {
    // W = 100, one batch = 10: 50 bytes stay unread, 20 are read (below W/4, and 70 ≤ W − 10, and
    // held is not 0: no immediate report); the next record is a 45-byte singleton.
    const send = new SendWindow(100);
    const recv = new ReceiveWindow(100, 10, true);
    for (const b of [50, 20]) {
      send.charge(b);
      recv.charge(b);
    }
    expect(recv.release(20)).toBe(false); // 20 < 25, held + unreported = 70 ≤ 90, held 50 > 0
    expect(send.fits(45)).toBe(false); // 70 + 45 > 100, yet after the 20 are reported 50 + 45 fits
    expect(recv.pending).toBe(true); // what the sweep sends
    send.release(recv.takeReport());
    expect(send.fits(45)).toBe(true);
  });
});
