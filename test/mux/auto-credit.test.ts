/**
 * Ingress credit auto-tuning (mux.autoCredit) on a table driven by a manual clock: a 50 ms round trip
 * and a fast consumer, so a static C = 32 would cap the stream at 32 records per round trip.
 */
import { describe, expect, it } from 'vitest';
import { INERT_WINDOW, type IngressWindow } from '../../src/mux/ingress-window.ts';
import { IngressHarness, read, rec, sid } from './harness.ts';

/** One stream of a fast consumer over a 50 ms round trip (clock by hand); `round()` is one round trip. */
function slowStream(auto: boolean, window?: IngressWindow) {
  let t = 0;
  const h = new IngressHarness({
    C: 32,
    slotBudget: 1 << 20,
    peerBudget: 1 << 24,
    ...(auto ? { autoCredit: () => t } : {}),
  });
  if (window !== undefined) h.table.window = window;
  const b = h.bind();
  const id = sid(1, 0);
  h.open(id, b);
  let credit = 32;
  let seq = 1;
  return {
    h,
    b,
    id,
    advance: (ms: number) => {
      t += ms;
    },
    nextSeq: () => seq++,
    /** The sender spends all its credit; the records arrive half a round trip later. Returns what it sent. */
    round(): number {
      const sent = credit;
      const recs = [];
      for (let i = 0; i < credit; i++) recs.push(rec.item(id, seq++, 'x'));
      t += 25;
      // A batch holds at most 65,535 records; a window grown for a while passes that.
      for (let i = 0; i < recs.length; i += 16_384) h.send(...recs.slice(i, i + 16_384));
      read(b);
      h.doorbell();
      h.table.sweep();
      credit = 0;
      for (const reply of h.host.replies.splice(0)) if (reply.kind === 'credit') credit += reply.value;
      t += 25; // the grants reach the sender
      return sent;
    },
  };
}

function run(auto: boolean, rounds: number): { perRound: number[]; limit: number } {
  const s = slowStream(auto);
  const perRound: number[] = [];
  for (let r = 0; r < rounds; r++) perRound.push(s.round());
  return { perRound, limit: s.h.table.slotAt(1)!.account.limit };
}

describe('ingress credit auto-tuning', () => {
  it('records larger than the window was capped with count at once, though no grant is due and no window was drained', () => {
    const s = slowStream(true);
    const { h, b, id } = s;
    for (let r = 0; r < 6; r++) s.round();
    const slot = h.table.slotAt(1)!;
    const small = slot.auto!.recordBytes;
    expect(slot.limit).toBeGreaterThan(64);
    // One large record, read at once: far from a grant (the sender holds most of a grown window) or an epoch's end.
    h.send(rec.item(id, s.nextSeq(), 'y'.repeat(16_384)));
    read(b);
    h.doorbell();
    expect(slot.grantDue).toBe(false);
    expect(slot.auto!.recordBytes).toBeGreaterThan(16_384);
    expect(slot.auto!.recordBytes).toBeGreaterThan(100 * small);
  });

  it("a slow-RTT stream's granted window grows past C with auto-tuning on", () => {
    const { perRound, limit } = run(true, 12);
    expect(perRound[0]).toBe(32);
    expect(perRound[perRound.length - 1]).toBeGreaterThanOrEqual(512);
    expect(limit).toBeGreaterThanOrEqual(512);
  });

  it('stays at C when auto-tuning is off', () => {
    const { perRound, limit } = run(false, 12);
    expect(new Set(perRound)).toEqual(new Set([32]));
    expect(limit).toBe(32);
  });

  it('a grant that falls due at an arrival while the receive window is nearly full shrinks the window first, keeping that credit', () => {
    let fill = 0;
    const s = slowStream(true, { ...INERT_WINDOW, fill: () => fill, sizeBytes: 1 << 24 });
    const { h, b, id } = s;
    // Grow the window as the slow-RTT stream above does.
    for (let r = 0; r < 6; r++) s.round();
    const account = h.table.slotAt(1)!.account;
    const grown = account.limit;
    expect(grown).toBeGreaterThan(64);
    s.advance(10_000); // long after: no growth from here
    // Records read one by one: each take is owed, none is due while the sender may hold more than half the window.
    const k = Math.ceil(grown / 2);
    for (let j = 1; j < k; j++) {
      h.send(rec.item(id, s.nextSeq(), 'x'));
      read(b);
      h.doorbell();
    }
    expect(h.host.replies.filter((r) => r.kind === 'credit')).toEqual([]);
    expect(account.ungranted).toBe(k - 1);
    // The next arrival makes the owed credit due just as the receive window fills past three quarters.
    fill = 0.9;
    h.send(rec.item(id, s.nextSeq(), 'x'));
    const granted = h.host.replies.filter((r) => r.kind === 'credit').reduce((a, r) => a + (r.value as number), 0);
    expect(account.limit).toBeLessThan(grown);
    expect(granted).toBeLessThan(k - 1);
  });
});
