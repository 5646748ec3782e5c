// Credit returns accumulate into one count per slot (protocol.md §10.7): over the wire, a batch
// carries at most one CreditUpdate per slot, however many grants the consumer made while the batch
// was open, and the credit granted in total is what the consumer read.
import { afterEach, describe, expect, it } from 'vitest';
import { RecordType } from '../../src/wire/constants.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { closeAll } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';
import { tappedPair } from './wire-tap.ts';

afterEach(closeAll);

describe('credit returns on the wire', () => {
  it('256 slots × 50 records: no batch carries two CreditUpdates for one slot, and every record read is granted back', async () => {
    const SLOTS = 256;
    const RECORDS = 50;
    // A static window: a tuned one grants growth besides what was read (a fast slot's window doubles).
    // Short heartbeats: the last records of a slot (fewer than half its window) go back with the idle
    // sweep, which at the default 5 s interval left this wait about 1 s of margin on a loaded machine.
    const HEARTBEAT_MS = 200;
    const { consumer, producer, ctap } = await tappedPair(
      { initialCredit: 8, autoCredit: false, heartbeatInterval: HEARTBEAT_MS },
      4,
      4,
    );
    const anchors = Array.from({ length: SLOTS }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    const reading = anchors.map(async (a) => {
      for (let i = 0; i < RECORDS; i++) await a.next();
    });
    // Rounds: one record per slot per round, so each producer batch carries every slot and the
    // consumer grants every slot again and again while its reply batch waits for company.
    for (let i = 0; i < RECORDS; i++) {
      await Promise.all(senders.map((s, k) => s.send(`s${k}r${i}`)));
      producer.flushBatch();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(reading);
    const granted = (): { total: number; repeats: number; batches: number } => {
      let total = 0;
      let repeats = 0;
      let batches = 0;
      for (const b of ctap.batches('out')) {
        const d = decodeBatch(b.payload);
        expect(d.error).toBeNull();
        const seen = new Set<string>();
        let any = false;
        for (const r of d.records) {
          if (r.type !== RecordType.CreditUpdate) continue;
          any = true;
          total += r.creditDelta!;
          const key = `${b.lane}:${r.slot}`;
          if (seen.has(key)) repeats++;
          seen.add(key);
        }
        if (any) batches++;
      }
      return { total, repeats, batches };
    };
    // Records that spent credit on arrival: the items, and the heartbeats an idle slot sends while it
    // holds credit (with 200 ms beats some flow during the wait, each granted back like an item).
    const spent = (): number => {
      let n = 0;
      for (const b of ctap.batches('in')) {
        for (const r of decodeBatch(b.payload).records)
          if (r.type === RecordType.Data || r.type === RecordType.SlotHeartbeat) n++;
      }
      return n;
    };
    // Every record taken is granted back: at once while a grant is due (half the window), the rest
    // with the idle sweep, even with nothing more to send.
    await waitFor(() => granted().total >= SLOTS * RECORDS, 10_000 + 10 * HEARTBEAT_MS, 'all credit granted');
    const g = granted();
    // Every item read came back, and never more than arrived (counted after the grants, so it can only be more).
    expect(g.total).toBeGreaterThanOrEqual(SLOTS * RECORDS);
    expect(g.total).toBeLessThanOrEqual(spent());
    expect(g.batches).toBeGreaterThan(0);
    expect(g.repeats).toBe(0);
    for (const s of senders) await s.finalize();
  }, 30_000);
});
