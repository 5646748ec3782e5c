/**
 * The egress batcher (EGRESS-*).
 *
 * A Batcher is built directly over a recording sink (in-memory transport) and a manual runtime.
 * Slots open with zero credit unless a line says otherwise; grants arrive through the control
 * inbox like CreditUpdates from the peer. Every assertion on the wire decodes what the sink got.
 */
import { describe, expect, it } from 'vitest';
import { createNode } from '../../src/stream/node.ts';
import { MuxError } from '../../src/mux/errors.ts';
import { PeerEgress } from '../../src/mux/peer-egress.ts';
import { CloseReason } from '../../src/wire/constants.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';
import {
  EgressKind,
  Offer,
  RecordType,
  RecordingOwner,
  batches,
  dataOf,
  egress,
  grant,
  itemBody,
  itemsOf,
  label,
  offerFinalized,
  offerItems,
  openSlot,
  openSlots,
  records,
  sid,
  tokens,
  wakeDelta,
  wakes,
  wire,
} from './harness.ts';

const seqsOf = (h: Parameters<typeof dataOf>[0], slot: number, from = 0): number[] =>
  dataOf(h, slot, from).map((r) => r.frameSeq);

describe('D. Egress batcher', () => {
  it('EGRESS-01 three slots each withhold 4 records; grants released in one wake send a single batch with 4 records from each slot', async () => {
    const h = egress();
    const opened = await openSlots(h, 3);
    const mark = h.sink.sent.length;
    for (const { slot } of opened) offerItems(h, slot, tokens(4, `s${slot.index}-`));
    await h.runtime.advance(50);
    expect(h.sink.sent.length).toBe(mark);
    expect(h.metrics.withheldRecords).toBe(12);
    const before = wakes(h.metrics);
    for (const { slot } of opened) grant(h, slot, 4);
    await h.runtime.runMacrotasks();
    expect(wakeDelta(before, wakes(h.metrics)).control).toBe(1);
    const sent = batches(h, mark);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.records).toHaveLength(12);
    for (const { slot } of opened) {
      expect(itemsOf(h, slot.id, mark)).toEqual(tokens(4, `s${slot.index}-`).map((t) => JSON.stringify(t)));
      expect(seqsOf(h, slot.id, mark)).toEqual([1, 2, 3, 4]);
    }
    expect(h.metrics.withheldRecords).toBe(0);
  });

  it('EGRESS-02 with a configured cap of 128 bytes, every batch is at most 128 bytes', async () => {
    const h = egress({ maxBatchBytes: 128 });
    expect(h.batcher.cap).toBe(128);
    const { slot } = await openSlot(h);
    const items = tokens(30, 'token-');
    offerItems(h, slot, items);
    grant(h, slot, 30);
    await h.runtime.runMacrotasks();
    expect(h.sink.sent.length).toBeGreaterThan(3);
    for (const b of h.sink.sent) expect(b.payload.byteLength).toBeLessThanOrEqual(128);
    expect(itemsOf(h, slot.id)).toEqual(items.map((t) => JSON.stringify(t)));
  });

  it('EGRESS-03 with a configured cap of 1 MiB and 100 records of ~1 KB, every batch is ≤ 65,536 bytes, there are several, and the largest is over 32 KiB', async () => {
    const h = egress({ maxBatchBytes: 1 << 20 });
    expect(h.batcher.cap).toBe(65_536);
    const { slot } = await openSlot(h);
    const mark = h.sink.sent.length;
    for (let i = 0; i < 100; i++) h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(1000).fill(i));
    grant(h, slot, 100);
    await h.runtime.runMacrotasks();
    const sizes = h.sink.sent.slice(mark).map((b) => b.payload.byteLength);
    expect(sizes.length).toBeGreaterThan(1);
    for (const n of sizes) expect(n).toBeLessThanOrEqual(65_536);
    expect(Math.max(...sizes)).toBeGreaterThan(32 * 1024);
    expect(seqsOf(h, slot.id, mark)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
  });

  it("EGRESS-04 inlet depth 4, no credit: the producer's 32 records and its terminal all complete; after a grant the wire carries 32 items, Finalized, CloseSlot", async () => {
    // lanemux has no inlet channel: the batcher takes records into the slot's withheld FIFO at once
    // (bounded by the slot byte budget). The C+1 inlet depth (C = 3 → 4) applies only while the
    // batcher is parked on admission. The producer is not parked here, so nothing waits.
    const h = egress({ initialCredit: 3 });
    const { slot } = await openSlot(h);
    const mark = h.sink.sent.length;
    const answers = offerItems(h, slot, tokens(32));
    answers.push(offerFinalized(h, slot));
    expect(answers.every((a) => a === Offer.Ok)).toBe(true);
    expect(slot.paused).toBe(false);
    await h.runtime.advance(10);
    expect(h.sink.sent.length).toBe(mark);
    expect(h.metrics.withheldRecords).toBe(33);
    grant(h, slot, 32);
    await h.runtime.runMacrotasks();
    expect(records(h, mark).map((r) => label(r))).toEqual([
      ...tokens(32).map((t, i) => `${JSON.stringify(t)}@${i + 1}`),
      'Finalized@33',
      'Close(TerminalSent)@34',
    ]);
  });

  it('EGRESS-04 (parked) while the batcher is parked on admission, the inlet depth C+1 = 4 bounds the producer; after admission everything flows', async () => {
    // lanemux equivalent of the full C+1 inlet: while parked, the slot takes C+1 records and the
    // next offer is accepted with Offer.Wait (the inlet's one-record overshoot). C is the window
    // the slot was opened with (the receiver's advertised credit).
    const h = egress({ initialCredit: 3 });
    const { slot } = await openSlot(h, 3);
    h.sink.mode = 'stall';
    offerItems(h, slot, ['first']);
    await h.runtime.runMacrotasks();
    expect(h.batcher.parked).toBe(true);
    const mark = h.sink.sent.length;
    const answers = offerItems(h, slot, tokens(5));
    expect(answers).toEqual([Offer.Ok, Offer.Ok, Offer.Ok, Offer.Ok, Offer.Wait]);
    expect(slot.paused).toBe(true);
    let resumed = false;
    void slot.waitWritable().then(() => (resumed = true));
    grant(h, slot, 5);
    await h.runtime.advance(10);
    expect(resumed).toBe(false);
    h.sink.release();
    await h.runtime.advance(10);
    expect(resumed).toBe(true);
    expect(itemsOf(h, slot.id, mark)).toEqual(tokens(5).map((t) => JSON.stringify(t)));
  });

  it('records withheld while parked all go out, in order per slot, when admissions come one write at a time (a release that parks again keeps the rest for the next)', async () => {
    // About four records fit a batch, so releasing a slot's ten withheld records parks the batcher
    // partway; what is left must go at a later unpark, though no offer or grant marks it again.
    const h = egress({ maxBatchBytes: 150 });
    const slots = await openSlots(h, 3, 20);
    h.sink.mode = 'stall';
    offerItems(h, slots[0]!.slot, ['first']);
    await h.runtime.runMacrotasks();
    expect(h.batcher.parked).toBe(true);
    const mark = h.sink.sent.length;
    for (const [i, { slot }] of slots.entries()) offerItems(h, slot, tokens(10, `s${i}-`));
    expect(h.metrics.withheldRecords).toBe(30);
    // Admit the parked write, and stall the next again: one write per round.
    for (let round = 0; round < 40 && h.sink.stalledCount > 0; round++) {
      h.sink.release();
      h.sink.mode = 'stall';
      await h.runtime.runMacrotasks();
    }
    expect(h.metrics.withheldRecords).toBe(0);
    for (const [i, { slot }] of slots.entries())
      expect(itemsOf(h, slot.id, mark)).toEqual(tokens(10, `s${i}-`).map((t) => JSON.stringify(t)));
  });

  it('EGRESS-05 slot budget 256 B, no credit: the slot pauses its inlet at the byte cap, is not killed, another slot flows; after a grant everything arrives in order and withheld_records returns to 0', async () => {
    const h = egress({ slotByteBudget: 256 });
    const a = await openSlot(h);
    const b = await openSlot(h);
    const mark = h.sink.sent.length;
    const items = tokens(60, 'rec-');
    let offered = 0;
    const producer = (async () => {
      for (const it of items) {
        const r = h.batcher.offer(a.slot, EgressKind.ItemString, it);
        offered++;
        if (r === Offer.Closed) throw new Error('closed');
        if (r === Offer.Wait) await a.slot.waitWritable();
      }
    })();
    await h.runtime.advance(100);
    // Paused at the cap: later records stay with the producer.
    expect(a.slot.paused).toBe(true);
    expect(offered).toBeLessThan(items.length);
    expect(a.slot.withheldBytes).toBeGreaterThanOrEqual(256);
    expect(a.slot.withheldBytes).toBeLessThan(256 + 30); // at most one record over the cap
    expect(h.metrics.withheldRecords).toBe(offered);
    // Not killed: no close on the wire, no withheld_overflow, the producer was not failed.
    expect(a.slot.closed).toBe(false);
    expect(a.owner.closed).toEqual([]);
    expect(records(h, mark).filter((r) => r.type === RecordType.CloseSlot)).toEqual([]);
    expect(h.metrics.dropped('withheld_overflow')).toBe(0);
    // Another slot keeps flowing meanwhile.
    grant(h, b.slot, 5);
    offerItems(h, b.slot, tokens(5, 'b'));
    await h.runtime.runMacrotasks();
    expect(itemsOf(h, b.slot.id, mark)).toEqual(tokens(5, 'b').map((t) => JSON.stringify(t)));
    // A grant releases everything, in order.
    grant(h, a.slot, 60);
    await h.runtime.advance(10);
    await producer;
    await h.runtime.advance(10);
    expect(offered).toBe(60);
    expect(itemsOf(h, a.slot.id, mark)).toEqual(items.map((t) => JSON.stringify(t)));
    expect(seqsOf(h, a.slot.id, mark)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    expect(h.metrics.withheldRecords).toBe(0);
    expect(a.slot.paused).toBe(false);
  });

  it('EGRESS-06 a producer leaves without a terminal while 4 records are withheld; after a grant the 4 records go out before CloseSlot{PeerGone}', async () => {
    const h = egress();
    const { slot, owner } = await openSlot(h);
    const mark = h.sink.sent.length;
    offerItems(h, slot, tokens(4));
    h.batcher.depart(slot);
    await h.runtime.advance(50);
    expect(h.sink.sent.length).toBe(mark);
    expect(slot.closed).toBe(false);
    grant(h, slot, 4);
    await h.runtime.runMacrotasks();
    expect(records(h, mark).map((r) => label(r))).toEqual([
      '"t0"@1',
      '"t1"@2',
      '"t2"@3',
      '"t3"@4',
      'Close(PeerGone)@5',
    ]);
    expect(slot.closed).toBe(true);
    expect(owner.closed.map((e) => e?.code)).toEqual(['ERR_SLOT_CLOSED']);
    expect(h.metrics.liveSlots).toBe(0);
  });

  it('EGRESS-07 a withheld terminal produces exactly [item, Finalized, CloseSlot] on the wire, with no second close', async () => {
    const h = egress();
    const { slot, owner } = await openSlot(h);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['only']);
    expect(offerFinalized(h, slot)).toBe(Offer.Ok);
    await h.runtime.runMacrotasks();
    expect(h.sink.sent.length).toBe(mark);
    grant(h, slot, 1);
    await h.runtime.runMacrotasks();
    // The producer's inlet then closes (it is done): no PeerGone follows the terminal.
    h.batcher.depart(slot);
    await h.runtime.advance(100);
    expect(records(h, mark).map((r) => label(r))).toEqual(['"only"@1', 'Finalized@2', 'Close(TerminalSent)@3']);
    expect(owner.closed).toEqual([null]);
    expect(owner.retired).toEqual(['Sent']);
  });

  it('EGRESS-08 an item spends a grant of 1; the terminal then goes on the reserve, and Finalized + CloseSlot share one batch', async () => {
    const h = egress();
    const { slot } = await openSlot(h);
    grant(h, slot, 1);
    await h.runtime.runMacrotasks();
    const mark = h.sink.sent.length;
    expect(offerItems(h, slot, ['x'])).toEqual([Offer.Ok]);
    await h.runtime.runMacrotasks();
    expect(slot.ledger.dataAvailable).toBe(0);
    expect(offerFinalized(h, slot)).toBe(Offer.Ok);
    await h.runtime.runMacrotasks();
    expect(wire(h, mark)).toEqual([['"x"@1'], ['Finalized@2', 'Close(TerminalSent)@3']]);
    expect(h.metrics.withheldRecords).toBe(0);
  });

  it('EGRESS-09 without credit a terminal behind starved items waits: nothing sent, withheld = 4, live_slots = 1; a grant of 8 sends them in order, then the close', async () => {
    // withheld = 4 counts the terminal: three starved items plus the terminal behind them.
    const h = egress();
    const { slot } = await openSlot(h);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['a', 'b', 'c']);
    offerFinalized(h, slot);
    await h.runtime.advance(100);
    expect(h.sink.sent.length).toBe(mark);
    expect(h.metrics.withheldRecords).toBe(4);
    expect(h.metrics.liveSlots).toBe(1);
    expect(h.batcher.liveSlots).toBe(1);
    grant(h, slot, 8);
    await h.runtime.runMacrotasks();
    expect(records(h, mark).map((r) => label(r))).toEqual([
      '"a"@1',
      '"b"@2',
      '"c"@3',
      'Finalized@4',
      'Close(TerminalSent)@5',
    ]);
    expect(h.metrics.liveSlots).toBe(0);
    expect(h.metrics.withheldRecords).toBe(0);
  });

  it('EGRESS-10 a grant of 3 against 8 withheld records sends exactly the first 3; the other 5 stay queued in order', async () => {
    const h = egress();
    const { slot } = await openSlot(h);
    const mark = h.sink.sent.length;
    offerItems(h, slot, tokens(8));
    grant(h, slot, 3);
    await h.runtime.runMacrotasks();
    expect(itemsOf(h, slot.id, mark)).toEqual(['"t0"', '"t1"', '"t2"']);
    expect(slot.queued).toBe(5);
    expect(h.metrics.withheldRecords).toBe(5);
    grant(h, slot, 5);
    await h.runtime.runMacrotasks();
    expect(itemsOf(h, slot.id, mark)).toEqual(tokens(8).map((t) => JSON.stringify(t)));
    expect(seqsOf(h, slot.id, mark)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('EGRESS-11 a starved slot withholds while other slots keep flowing, and slot_credit_exhausted_total > 0', async () => {
    const h = egress();
    const starved = await openSlot(h);
    const flowing = await openSlot(h);
    grant(h, flowing.slot, 100);
    await h.runtime.runMacrotasks();
    const mark = h.sink.sent.length;
    for (let i = 0; i < 5; i++) {
      offerItems(h, starved.slot, [`s${i}`]);
      offerItems(h, flowing.slot, [`f${i}`]);
      await h.runtime.runMacrotasks();
    }
    expect(itemsOf(h, flowing.slot.id, mark)).toEqual(tokens(5, 'f').map((t) => JSON.stringify(t)));
    expect(dataOf(h, starved.slot.id, mark)).toEqual([]);
    expect(starved.slot.queued).toBe(5);
    expect(h.metrics.slotCreditExhausted).toBeGreaterThan(0);
    // Once per starvation episode, not once per record.
    expect(h.metrics.slotCreditExhausted).toBe(1);
  });

  it('EGRESS-12 a terminal and its close share a batch with CloseSlot right after Finalized; an item queued after the terminal is never sent; live_slots = 0', async () => {
    const h = egress();
    const { slot } = await openSlot(h);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['before']);
    offerFinalized(h, slot);
    offerItems(h, slot, ['after']); // queued behind the terminal
    grant(h, slot, 10);
    await h.runtime.advance(100);
    const sent = wire(h, mark);
    expect(sent).toEqual([['"before"@1', 'Finalized@2', 'Close(TerminalSent)@3']]);
    expect(records(h, mark).some((r) => r.type === RecordType.Data && label(r).startsWith('"after"'))).toBe(false);
    expect(h.metrics.liveSlots).toBe(0);
    expect(h.metrics.withheldRecords).toBe(0);
    // And with credit in hand, an offer after the terminal is refused outright.
    const s2 = await openSlot(h, 10);
    const m2 = h.sink.sent.length;
    offerItems(h, s2.slot, ['x']);
    offerFinalized(h, s2.slot);
    expect(offerItems(h, s2.slot, ['late'])).toEqual([Offer.Closed]);
    await h.runtime.runMacrotasks();
    expect(wire(h, m2)).toEqual([['"x"@1', 'Finalized@2', 'Close(TerminalSent)@3']]);
  });

  it('EGRESS-13 when the cap is one byte short of room for the close after the terminal, the wire shows [filler, filler] then [Finalized, CloseSlot]', async () => {
    // 16 + 2 × (13 + 89) = 220; Finalized needs 13 + 10 and its close 14: 220 + 37 = 257 = cap + 1.
    const filler = itemBody(89);
    const h = egress({ maxBatchBytes: 256 });
    const { slot } = await openSlot(h);
    const mark = h.sink.sent.length;
    h.batcher.offer(slot, EgressKind.Body, filler);
    h.batcher.offer(slot, EgressKind.Body, filler);
    offerFinalized(h, slot);
    grant(h, slot, 2);
    await h.runtime.runMacrotasks();
    expect(wire(h, mark)).toEqual([
      ['bytes81@1', 'bytes81@2'],
      ['Finalized@3', 'Close(TerminalSent)@4'],
    ]);
    expect(h.sink.sent.slice(mark).map((b) => b.payload.byteLength)).toEqual([220, 16 + 23 + 14]);
    // Control: one byte more cap and all four share a batch.
    const g = egress({ maxBatchBytes: 257 });
    const s = await openSlot(g);
    const m2 = g.sink.sent.length;
    g.batcher.offer(s.slot, EgressKind.Body, filler);
    g.batcher.offer(s.slot, EgressKind.Body, filler);
    offerFinalized(g, s.slot);
    grant(g, s.slot, 2);
    await g.runtime.runMacrotasks();
    expect(wire(g, m2)).toEqual([['bytes81@1', 'bytes81@2', 'Finalized@3', 'Close(TerminalSent)@4']]);
  });

  it('EGRESS-14 cap 256 B: a 512-byte item goes alone and rendezvous_singletons = 1; only its slot is fenced, another slot flows meanwhile, and the slot’s next record has frame_seq 2', async () => {
    const h = egress({ maxBatchBytes: 256 });
    const big = await openSlot(h, 10);
    const other = await openSlot(h, 10);
    const mark = h.sink.sent.length;
    h.sink.mode = 'stall';
    expect(h.batcher.offer(big.slot, EgressKind.ItemBytes, new Uint8Array(512))).toBe(Offer.Ok);
    expect(h.metrics.rendezvousSingletons).toBe(1);
    expect(big.slot.fenced).toBe(true);
    expect(other.slot.fenced).toBe(false);
    offerItems(h, big.slot, ['next']);
    h.sink.mode = 'open';
    offerItems(h, other.slot, ['o1', 'o2']);
    await h.runtime.runMacrotasks();
    // The other slot flowed while the singleton was unresolved; the fenced slot's record waited.
    expect(itemsOf(h, other.slot.id, mark)).toEqual(['"o1"', '"o2"']);
    expect(dataOf(h, big.slot.id, mark)).toEqual([]);
    for (const b of h.sink.sent) expect(b.payload.byteLength).toBeLessThanOrEqual(256);
    h.sink.release();
    await h.runtime.runMacrotasks();
    expect(big.slot.fenced).toBe(false);
    expect(dataOf(h, big.slot.id, mark).map((r) => r.frameSeq)).toEqual([2]);
    expect(h.sink.staged[0]!.decoded.records.map((r) => r.frameSeq)).toEqual([1]);
  });

  it('EGRESS-15 a rendezvous singleton admitted synchronously still fences its slot: the fenced count goes 0 → 1', async () => {
    const h = egress({ maxBatchBytes: 256 });
    const { slot } = await openSlot(h, 10);
    expect(h.metrics.fencedSlots).toBe(0);
    h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(512));
    expect(h.metrics.fencedSlots).toBe(1);
    expect(slot.fenced).toBe(true);
    // The (synchronous) resolution reaches the slot through the inbox at the next wake.
    await h.runtime.runMacrotasks();
    expect(slot.fenced).toBe(false);
    expect(h.metrics.fencedSlots).toBe(0);
  });

  it('a record that exactly fills the cap is not a singleton: it goes eagerly in a batch of its own and the next record follows at once', async () => {
    const h = egress({ maxBatchBytes: 256 });
    const { slot } = await openSlot(h, 10);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['a']);
    h.batcher.offer(slot, EgressKind.Body, itemBody(227));
    offerItems(h, slot, ['b']);
    expect(slot.fenced).toBe(false);
    await h.runtime.runMacrotasks();
    expect(wire(h, mark)).toEqual([['"a"@1'], ['bytes219@2'], ['"b"@3']]);
    expect(h.sink.sent[mark + 1]!.payload.byteLength).toBe(256);
    expect(h.metrics.rendezvousSingletons).toBe(0);
  });

  it('a record over stagedPayloadMax fails just its stream: CloseSlot{PeerGone} follows its last record, and the next stream on that batcher opens and delivers', async () => {
    const runtime = new ManualRuntime();
    const [ma, mb] = LoopMessenger.pair();
    const nodes: LanemuxNode[] = [];
    try {
      const consumer = await createNode({ messenger: ma, runtime, mux: { initialCredit: 8, maxBatchBytes: 256 } });
      const producer = await createNode({
        messenger: mb,
        runtime,
        mux: { initialCredit: 8, maxBatchBytes: 256, stagedPayloadMax: 1024 },
      });
      nodes.push(consumer, producer);
      const first = consumer.createAnchor<Uint8Array | string>();
      const s1 = await producer.attachAnchor<Uint8Array | string>(first.handle);
      await runtime.runMacrotasks();
      await expect(s1.send(new Uint8Array(2048))).rejects.toMatchObject({ code: 'ERR_RECORD_TOO_LARGE' });
      await runtime.advance(50);
      const second = consumer.createAnchor<string>();
      const s2 = await producer.attachAnchor<string>(second.handle);
      await runtime.runMacrotasks();
      await s2.send('hello');
      await s2.finalize();
      await runtime.advance(50);
      const got: string[] = [];
      const reading = (async () => {
        for await (const t of second) got.push(t);
      })();
      await runtime.advance(50);
      await reading;
      expect(got).toEqual(['hello']);
      expect(consumer.metricsRegistry.dropped('slot_collision')).toBe(0);
      // The failed stream's consumer is told too (Dropped → ERR_SENDER_DROPPED), not left to its watchdog.
      await expect(first.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    } finally {
      for (const n of nodes) await n.close();
    }
  });
});

describe('opens behind a parked write', () => {
  it('several opens made while parked all reach the wire, in one open-only batch, before any of their data', async () => {
    const h = egress();
    const first = await openSlot(h, 4);
    h.sink.mode = 'stall';
    offerItems(h, first.slot, ['parks']);
    await h.runtime.runMacrotasks();
    expect(h.batcher.parked).toBe(true);
    const mark = h.sink.sent.length;
    const owners = [new RecordingOwner(), new RecordingOwner(), new RecordingOwner()];
    const opening = owners.map((o, i) => h.batcher.openSlot(BigInt(100 + i), BigInt(200 + i), 4, o));
    h.sink.release();
    const slots = await Promise.all(opening);
    for (const s of slots) offerItems(h, s, [`data-${s.index}`]);
    await h.runtime.advance(10);
    const wireBatches = batches(h, mark).map((b) => b.records.map((r) => r.type));
    // After the parked batch: one batch with exactly the three OpenSlots, then their data.
    expect(wireBatches[0]).toEqual([RecordType.OpenSlot, RecordType.OpenSlot, RecordType.OpenSlot]);
    expect(new Set(batches(h, mark)[0]!.records.map((r) => r.slot))).toEqual(new Set(slots.map((s) => s.id)));
    const after = records(h, mark + 1);
    expect(after.map((r) => r.type)).toEqual([RecordType.Data, RecordType.Data, RecordType.Data]);
  });
});

describe('peer-wide egress budget (withheld bytes of all slots toward one peer)', () => {
  it('producers of slots without credit pause once the peer’s withheld bytes reach the budget; a slot whose queue drains resumes', async () => {
    const peer = new PeerEgress(2048);
    // Two lanes toward the same peer share the budget.
    const h0 = egress({ slotByteBudget: 1 << 20 }, { peerEgress: peer, lane: 0 });
    const h1 = egress({ slotByteBudget: 1 << 20 }, { peerEgress: peer, lane: 1 });
    const lanes = [
      { h: h0, slots: (await openSlots(h0, 4, 0)).map((o) => o.slot) },
      { h: h1, slots: (await openSlots(h1, 4, 0)).map((o) => o.slot) },
    ];
    const body = new Uint8Array(200);
    let paused = 0;
    for (let round = 0; round < 10; round++) {
      for (const { h, slots } of lanes) {
        for (const slot of slots)
          if (!slot.paused && h.batcher.offer(slot, EgressKind.ItemBytes, body) === Offer.Wait) paused++;
      }
    }
    // Every slot stopped at the peer budget, far below its own 1 MiB: the sum is the budget plus at
    // most one record per slot that crossed it.
    expect(paused).toBe(8);
    expect(peer.withheldBytes).toBeGreaterThanOrEqual(2048);
    expect(peer.withheldBytes).toBeLessThanOrEqual(2048 + 8 * 220);
    // Credit for one slot drains its queue: it resumes although the peer is still over for the others.
    const first = lanes[0]!.slots[0]!;
    grant(h0, first, 100);
    await h0.runtime.runMacrotasks();
    expect(first.queued).toBe(0);
    expect(first.paused).toBe(false);
    expect(lanes[0]!.slots[1]!.paused).toBe(true);
    // Slots closed by the consumer give their bytes back to the peer budget.
    for (const { h, slots } of lanes)
      for (const slot of slots) h.batcher.inbox.postClose(slot.id, CloseReason.UnknownSlot);
    await h0.runtime.runMacrotasks();
    await h1.runtime.runMacrotasks();
    expect(peer.withheldBytes).toBe(0);
  });
});

describe('a batch cap too small for an OpenSlot', () => {
  it('refuses the open with a clear error before taking an index or counting a live slot (cap 29..44 passes the clamp)', async () => {
    const h = egress({ maxBatchBytes: 40 });
    await expect(h.batcher.openSlot(1n, 2n, 4, new RecordingOwner())).rejects.toMatchObject({
      code: 'ERR_RECORD_TOO_LARGE',
      message: expect.stringMatching(/cannot carry an OpenSlot \(45 bytes\)/),
    });
    expect(h.batcher.liveSlots).toBe(0);
    expect(h.metrics.liveSlots).toBe(0);
    expect(h.sink.sent).toHaveLength(0);
  });
});

/** An owner that ignores every callback. */
const noop = { onSlotClosed() {}, onLifecycle() {}, onRetired() {} };

describe('owner callbacks re-entering the batcher (during a wake, during epoch death)', () => {
  it('a post made to the inbox from an owner callback during a wake is still written', async () => {
    const h = egress({ replyLinger: 1 });
    const a = await openSlot(h, 4);
    // The producer's cancel listener cancels a consumer anchor fed by the same peer and lane:
    // its CloseSlot reply goes to this very batcher, during its wake.
    a.owner.onSlotClosed = () => {
      h.batcher.inbox.postReplyClose(sid(77, 0), CloseReason.UnknownSlot);
    };
    h.batcher.inbox.postClose(a.slot.id, CloseReason.UnknownSlot);
    await h.runtime.advance(100);
    h.batcher.inbox.postReplyCredit(sid(78, 0), 5);
    await h.runtime.advance(100);
    const wire = records(h)
      .filter((r) => r.type !== RecordType.OpenSlot)
      .map((r) => label(r, true));
    expect(wire).toEqual(['77.0:Close(UnknownSlot)@0', '78.0:Credit+5']);
    expect(h.batcher.inbox.pending).toBe(false);
  });

  it('an open made from an owner callback during epoch death does not leave the batcher parked', async () => {
    const h = egress();
    const a = await openSlot(h, 4);
    let reopened: Promise<unknown> | null = null;
    a.owner.onSlotClosed = () => {
      reopened ??= h.batcher.openSlot(99n, 199n, 4, noop);
    };
    h.sink.mode = 'stall';
    h.batcher.epochDeath(new MuxError('ERR_EPOCH_DEATH', 'test'));
    h.sink.release();
    await h.runtime.advance(100);
    await expect(reopened).resolves.toBeDefined();
    expect(h.batcher.parked).toBe(false);
    let acked = false;
    void h.batcher.openSlot(100n, 200n, 4, noop).then(() => (acked = true));
    await h.runtime.advance(100);
    expect(acked).toBe(true);
  });
});

describe('replies and opens queued behind a parked write', () => {
  it('replies posted while parked are written after the parked batch is refused (epoch death re-wakes)', async () => {
    const h = egress({ replyLinger: 0 });
    h.sink.mode = 'stall';
    h.batcher.inbox.postReplyCredit(sid(1, 0), 1);
    await h.runtime.advance(1);
    expect(h.sink.stalledCount).toBe(1);
    h.batcher.inbox.postReplyCredit(sid(2, 0), 2);
    await h.runtime.advance(1);
    h.sink.mode = 'open';
    h.sink.refuseStalled();
    await h.runtime.advance(10);
    const later = records(h, 1)
      .map((r) => label(r, true))
      .sort();
    expect(later).toEqual(['1.0:Credit+1', '2.0:Credit+2']);
    expect(h.metrics.creditLost).toBe(0);
    expect(h.metrics.creditReposted).toBe(1);
  });

  it('2,200 opens queued behind a parked write all go out (in batches that fit) and all ack', async () => {
    const h = egress();
    h.sink.mode = 'stall';
    const acks = Array.from({ length: 2200 }, (_, i) =>
      h.batcher.openSlot(BigInt(1000 + i), BigInt(5000 + i), 4, noop),
    );
    h.sink.release();
    await h.runtime.advance(100);
    const slots = await Promise.all(acks);
    expect(slots).toHaveLength(2200);
    expect(h.batcher.liveSlots).toBe(2200);
    expect(records(h).filter((r) => r.type === RecordType.OpenSlot)).toHaveLength(2200);
    for (const p of h.sink.sent) expect(p.payload.byteLength).toBeLessThanOrEqual(h.batcher.cap);
  });

  it('replies overflowing a batch while parked never put a second batch in flight', async () => {
    const h = egress({ maxBatchBytes: 128, replyLinger: 0 });
    h.sink.mode = 'stall';
    for (let i = 0; i < 20; i++) h.batcher.inbox.postReplyCredit(sid(10 + i, 0), 1);
    await h.runtime.advance(10);
    expect(h.sink.stalledCount).toBe(1);
    h.sink.release();
    await h.runtime.advance(10);
    const credited = records(h)
      .filter((r) => r.type === RecordType.CreditUpdate)
      .map((r) => r.slot);
    expect(new Set(credited)).toEqual(new Set(Array.from({ length: 20 }, (_, i) => sid(10 + i, 0))));
  });

  it('at most 64 opens wait behind a parked write; later opens wait for room, then all ack in order', async () => {
    const { OPEN_QUEUE_DEPTH } = await import('../../src/mux/batcher-slots.ts');
    const h = egress();
    h.sink.mode = 'stall';
    const first = h.batcher.openSlot(1n, 1n, 4, noop); // parks on its own OpenSlot batch
    const acks = Array.from({ length: 200 }, (_, i) => h.batcher.openSlot(BigInt(10 + i), BigInt(10 + i), 4, noop));
    await h.runtime.runMacrotasks();
    expect(h.batcher.liveSlots).toBe(1 + OPEN_QUEUE_DEPTH); // the rest did not allocate yet
    h.sink.release();
    await h.runtime.advance(100);
    const slots = await Promise.all([first, ...acks]);
    expect(slots).toHaveLength(201);
    const opened = records(h)
      .filter((r) => r.type === RecordType.OpenSlot)
      .map((r) => r.slot);
    expect(new Set(opened)).toEqual(new Set(slots.map((s) => s.id)));
  });
});
