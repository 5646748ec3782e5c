/**
 * Ingress credit auto-tuning (mux.autoCredit) on a table driven by a manual clock: a 50 ms round trip
 * and a fast consumer, so a static C = 32 would cap the stream at 32 records per round trip.
 */
import { describe, expect, it } from 'vitest';
import { IngressHarness, read, rec, sid } from './harness.ts';

function run(auto: boolean, rounds: number): { perRound: number[]; limit: number } {
  let t = 0;
  const h = new IngressHarness({
    C: 32,
    slotBudget: 1 << 20,
    peerBudget: 1 << 24,
    ...(auto ? { autoCredit: () => t } : {}),
  });
  const b = h.bind();
  const id = sid(1, 0);
  h.open(id, b);
  let credit = 32;
  let seq = 1;
  const perRound: number[] = [];
  for (let r = 0; r < rounds; r++) {
    // The sender spends all its credit; the records arrive half a round trip later.
    const recs = [];
    for (let i = 0; i < credit; i++) recs.push(rec.item(id, seq++, 'x'));
    perRound.push(credit);
    t += 25;
    h.send(...recs);
    read(b);
    h.doorbell();
    h.table.sweep();
    credit = 0;
    for (const reply of h.host.replies.splice(0)) if (reply.kind === 'credit') credit += reply.value;
    t += 25; // the grants reach the sender
  }
  return { perRound, limit: h.table.slotAt(1)!.account.limit };
}

describe('ingress credit auto-tuning', () => {
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
});
