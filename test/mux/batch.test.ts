/**
 * Batcher rules (BATCH-01..20): reject lane, sequencing, instruments, clamps, flush gate.
 */
import { describe, expect, it, vi } from 'vitest';
import { batchCap } from '../../src/mux/batcher-host.ts';
import { MuxError } from '../../src/mux/errors.ts';
import { FlushGate, StagedKind } from '../../src/mux/flush-gate.ts';
import { CloseReason } from '../../src/wire/constants.ts';
import { settle } from '../support/manual-runtime.ts';
import {
  EgressKind,
  Offer,
  RecordType,
  batches,
  dataOf,
  egress,
  encodeBatch,
  grant,
  itemBody,
  label,
  loopWire,
  muxPair,
  offerFinalized,
  offerItems,
  openSlot,
  rec,
  records,
  sid,
  tokens,
  wakeDelta,
  wakes,
  wire,
} from './harness.ts';

const NO_WAKES = { open: 0, control: 0, frame: 0, inlet_closed: 0, linger: 0 };

describe('I. Reject lane, sequencing, instruments, clamps, flush gate', () => {
  describe('BATCH-01', () => {
    async function flood() {
      const p = muxPair();
      const peerB = p.mb.self.id;
      const spy = vi.spyOn(p.a, 'replyReject');
      const opens = Array.from({ length: 18_192 }, (_, i) => rec.open(sid(65_536 + i, 0), 0x51n, 0x52n));
      p.mb.sendBatch(p.ma.self.id, 0, encodeBatch(1n, 0, opens));
      await settle(); // delivered; the batcher's wake (a macrotask) has not run yet
      return { p, peerB, spy };
    }

    it('BATCH-01 18,192 out-of-range OpenSlots all get RejectSlot: the inbox holds 8,192 pending and refuses 10,000, and 8,192 replies are drained', async () => {
      const { p, peerB, spy } = await flood();
      expect(spy).toHaveBeenCalledTimes(18_192);
      expect(spy.mock.calls.every((c) => c[3] === CloseReason.ProtocolError)).toBe(true);
      const inbox = p.a.batcherFor(peerB, 0).inbox;
      expect(inbox.pendingRejects).toBe(8_192);
      expect(inbox.refused).toBe(10_000);
      const mark = p.ma.sent.length;
      await p.runtime.runMacrotasks();
      expect(inbox.pendingRejects).toBe(0);
      const closes = loopWire(p.ma, mark)
        .flatMap((b) => b.records)
        .filter((r) => r.type === RecordType.CloseSlot);
      expect(closes).toHaveLength(8_192);
      expect(closes.every((r) => r.closeReason === CloseReason.ProtocolError && r.frameSeq === 0)).toBe(true);
      expect(new Set(closes.map((r) => r.slot)).size).toBe(8_192);
    });

    it('BATCH-01 the 10,000 refused rejects are counted in control_refused_total', async () => {
      const { p } = await flood();
      expect(p.metricsA.controlRefused).toBe(10_000);
    });
  });

  it('BATCH-02 1,000 rendezvous singletons, interleaved with attempts refused before encoding, give batch_seq 0..N−1 with no gap, and batches_sent = N', async () => {
    // Singletons (records over the 256-byte cap) take a batch_seq of their own; a record over
    // stagedPayloadMax is refused before it is encoded (its stream fails: the CloseSlot that tells
    // the consumer is an ordinary batch); empty kicks write nothing. No attempt may leave a gap.
    const h = egress({ maxBatchBytes: 256, stagedPayloadMax: 1024 });
    const nearCap = 'n'.repeat(200); // exact body 208 fits 256; the 6 + 5 + 3 × 200 bound does not
    for (let i = 0; i < 1000; i++) {
      const { slot } = await openSlot(h, 2);
      expect(h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(300))).toBe(Offer.Ok);
      const refused = await openSlot(h, 1);
      expect(h.batcher.offer(refused.slot, EgressKind.ItemBytes, new Uint8Array(2000))).toBe(Offer.Closed);
      h.batcher.kick();
      if (i % 10 === 0) {
        const s = await openSlot(h, 1);
        expect(h.batcher.offer(s.slot, EgressKind.ItemString, nearCap)).toBe(Offer.Ok);
        h.batcher.kick();
      }
    }
    await h.runtime.advance(10);
    const all = [...batches(h), ...h.sink.staged.map((b) => b.decoded)];
    const seqs = all.map((b) => b.header!.batchSeq).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: all.length }, (_, i) => i));
    expect(new Set(all.map((b) => b.header!.epoch)).size).toBe(1);
    expect(h.metrics.batchesSent).toBe(all.length);
    expect(h.sink.staged).toHaveLength(1000);
    expect(h.metrics.rendezvousSingletons).toBe(1000);
    const data = records(h).filter((r) => r.type === RecordType.Data);
    expect(data).toHaveLength(100);
    expect(data.every((r) => r.bodyLength === 208)).toBe(true);
  });

  it('BATCH-03 records are counted by type as sent: open_slot 1, data 3, close_slot 1, credit_update 1; the total equals the records decoded from the wire', async () => {
    const h = egress({ replyLinger: 0 });
    const { slot } = await openSlot(h);
    grant(h, slot, 2);
    offerItems(h, slot, ['a', 'b']);
    offerFinalized(h, slot);
    h.batcher.inbox.postReplyCredit(sid(9, 0), 5);
    await h.runtime.advance(10);
    const snap = h.metrics.snapshot();
    const name = (t: string): string => `velo_streaming_mux_records_sent_total{record_type="${t}"}`;
    expect([
      snap[name('open_slot')],
      snap[name('data')],
      snap[name('close_slot')],
      snap[name('credit_update')],
      snap[name('slot_heartbeat')],
      snap[name('lifecycle')],
    ]).toEqual([1, 3, 1, 1, 0, 0]);
    const total = [...h.metrics.recordsSent].reduce((a, b) => a + b, 0);
    expect(total).toBe(records(h).length);
    expect(total).toBe(6);
  });

  it('BATCH-04 singleton data is counted by type, and rendezvous_singletons goes up by 1', async () => {
    const h = egress({ maxBatchBytes: 256 });
    const { slot } = await openSlot(h, 5);
    const other = await openSlot(h, 5);
    const before = [...h.metrics.recordsSent];
    // A cap-sized record still goes eagerly, alone in its batch: not a singleton.
    h.batcher.offer(slot, EgressKind.Body, itemBody(227));
    await h.runtime.runMacrotasks();
    expect(h.metrics.recordsSent[RecordType.Data]! - before[RecordType.Data]!).toBe(1);
    expect(h.metrics.rendezvousSingletons).toBe(0);
    // Over the cap: a rendezvous singleton, counted as data once.
    h.batcher.offer(other.slot, EgressKind.ItemBytes, new Uint8Array(512));
    await h.runtime.runMacrotasks();
    expect(h.metrics.recordsSent[RecordType.Data]! - before[RecordType.Data]!).toBe(2);
    expect(h.metrics.rendezvousSingletons).toBe(1);
    expect(h.sink.staged).toHaveLength(1);
    const [rec] = h.sink.staged[0]!.decoded.records;
    expect(rec!.type).toBe(RecordType.Data);
    expect(rec!.slot).toBe(other.slot.id);
    expect(rec!.frameSeq).toBe(1);
  });

  it('BATCH-05 records in a batch discarded by cancel before the flush are not counted as sent', async () => {
    const h = egress({ flushPolicy: { kind: 'manual' } });
    const { slot } = await openSlot(h, 10);
    offerItems(h, slot, ['a', 'b', 'c']);
    await h.runtime.runMacrotasks();
    expect(h.batcher.staged).toBe(3);
    h.batcher.retire(new MuxError('ERR_CLOSED', 'cancelled'));
    await h.runtime.advance(100);
    expect(h.metrics.recordsSent[RecordType.Data]).toBe(0);
    expect(h.metrics.batchesSent).toBe(1); // the OpenSlot batch only
    expect(h.sink.sent).toHaveLength(1);
  });

  it('BATCH-06 records discarded by epoch death are not counted as sent', async () => {
    const h = egress({ flushPolicy: { kind: 'manual' } });
    const a = await openSlot(h, 10);
    const b = await openSlot(h);
    offerItems(h, a.slot, ['a', 'b']);
    await h.runtime.runMacrotasks();
    expect(h.batcher.staged).toBe(2);
    // A failed resolution for a live slot is epoch death; the staged batch is discarded.
    h.batcher.inbox.postResolution(b.slot.id, false, 'refused');
    await h.runtime.advance(100);
    expect(h.metrics.epochDeaths).toBe(1);
    expect(h.metrics.recordsSent[RecordType.Data]).toBe(0);
    expect(h.batcher.staged).toBe(0);
    expect(records(h).some((r) => r.type === RecordType.Data)).toBe(false);
    // The same through a direct epoch death (failed health check).
    const g = egress({ flushPolicy: { kind: 'manual' } });
    const s = await openSlot(g, 10);
    offerItems(g, s.slot, ['x']);
    g.batcher.epochDeath(new MuxError('ERR_EPOCH_DEATH', 'health check failed'));
    g.batcher.kick();
    await g.runtime.advance(100);
    expect(g.metrics.recordsSent[RecordType.Data]).toBe(0);
    expect(dataOf(g, s.slot.id)).toEqual([]);
  });

  describe('BATCH-07 wakes are counted by source', () => {
    it('BATCH-07 an open adds 1 to source="open"', async () => {
      const h = egress();
      const before = wakes(h.metrics);
      await openSlot(h);
      await h.runtime.runMacrotasks();
      expect(wakeDelta(before, wakes(h.metrics))).toEqual({ ...NO_WAKES, open: 1 });
    });

    it('BATCH-07 a frame adds 1 to source="frame"', async () => {
      const h = egress();
      const { slot } = await openSlot(h, 4);
      await h.runtime.runMacrotasks();
      const before = wakes(h.metrics);
      offerItems(h, slot, ['a']);
      await h.runtime.runMacrotasks();
      expect(wakeDelta(before, wakes(h.metrics))).toEqual({ ...NO_WAKES, frame: 1 });
    });

    it('BATCH-07 control adds 1 to source="control"', async () => {
      const h = egress();
      const before = wakes(h.metrics);
      h.batcher.inbox.postReplyClose(sid(1, 0), CloseReason.UnknownSlot);
      await h.runtime.runMacrotasks();
      expect(wakeDelta(before, wakes(h.metrics))).toEqual({ ...NO_WAKES, control: 1 });
    });

    it('BATCH-07 an inlet close adds 1 to source="inlet_closed"', async () => {
      const h = egress();
      const { slot } = await openSlot(h);
      await h.runtime.runMacrotasks();
      const before = wakes(h.metrics);
      h.batcher.depart(slot);
      await h.runtime.runMacrotasks();
      expect(wire(h, 1)).toEqual([['Close(PeerGone)@1']]);
      expect(wakeDelta(before, wakes(h.metrics))).toEqual({ ...NO_WAKES, inlet_closed: 1 });
    });
  });

  it('BATCH-08 with max_linger 50 ms, a linger wake adds 1 to source="linger"', async () => {
    const h = egress({ flushPolicy: { kind: 'auto', onAdmission: false, maxLinger: 50 } });
    const { slot } = await openSlot(h, 4);
    offerItems(h, slot, ['a']);
    await h.runtime.runMacrotasks();
    const before = wakes(h.metrics);
    await h.runtime.advance(50);
    expect(wakeDelta(before, wakes(h.metrics)).linger).toBe(1);
    expect(wire(h, 1)).toEqual([['"a"@1']]);
  });

  it('BATCH-08 a linger wake is one wake: no other source moves', async () => {
    // batcher_wakes_total counts real wakes, one per wake.
    const h = egress({ flushPolicy: { kind: 'auto', onAdmission: false, maxLinger: 50 } });
    const { slot } = await openSlot(h, 4);
    offerItems(h, slot, ['a']);
    await h.runtime.runMacrotasks();
    const before = wakes(h.metrics);
    await h.runtime.advance(50);
    expect(wakeDelta(before, wakes(h.metrics))).toEqual({ ...NO_WAKES, linger: 1 });
  });

  it('BATCH-09 three records handled in one wake add 1 to source="frame", not 3, and produce one batch of 3', async () => {
    const h = egress();
    const { slot } = await openSlot(h, 4);
    await h.runtime.runMacrotasks();
    const mark = h.sink.sent.length;
    const before = wakes(h.metrics);
    offerItems(h, slot, ['a', 'b', 'c']);
    await h.runtime.runMacrotasks();
    expect(wakeDelta(before, wakes(h.metrics))).toEqual({ ...NO_WAKES, frame: 1 });
    expect(wire(h, mark)).toEqual([['"a"@1', '"b"@2', '"c"@3']]);
  });

  it('BATCH-10 the configured cap binds when it is the smallest ceiling', async () => {
    expect(batchCap(1000, 1 << 20)).toBe(1000);
    expect(batchCap(1000, 0)).toBe(1000); // no eager clamp reported
    const h = egress({ maxBatchBytes: 1000 }, { maxMessageSize: 1 << 20 });
    expect(h.batcher.cap).toBe(1000);
    const { slot } = await openSlot(h);
    offerItems(h, slot, tokens(200, 'cap-'));
    grant(h, slot, 200);
    await h.runtime.runMacrotasks();
    const sizes = h.sink.sent.map((b) => b.payload.byteLength);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(1000);
    expect(Math.max(...sizes)).toBeGreaterThan(900);
  });

  it('BATCH-11 the coalescing threshold (65,536) binds over a larger configured cap', () => {
    expect(batchCap(1 << 20, 0)).toBe(65_536);
    expect(batchCap(1 << 20, 1 << 22)).toBe(65_536);
    expect(egress({ maxBatchBytes: 1 << 20 }, { maxMessageSize: 1 << 22 }).batcher.cap).toBe(65_536);
  });

  it('BATCH-12 a transport with a tight eager budget binds over both', async () => {
    expect(batchCap(1 << 20, 700)).toBe(700);
    const h = egress({ maxBatchBytes: 1 << 20 }, { maxMessageSize: 700 });
    expect(h.batcher.cap).toBe(700);
    const { slot } = await openSlot(h);
    offerItems(h, slot, tokens(100, 'eager-'));
    grant(h, slot, 100);
    await h.runtime.runMacrotasks();
    for (const b of h.sink.sent) expect(b.payload.byteLength).toBeLessThanOrEqual(700);
  });

  it('BATCH-13 the batch cap never falls below the 29-byte floor, whatever the ceilings', () => {
    expect(batchCap(29, 1)).toBe(29);
    expect(batchCap(61_440, 5)).toBe(29);
    expect(batchCap(29, 0)).toBe(29);
    expect(egress({ maxBatchBytes: 29 }).batcher.cap).toBe(29);
    expect(egress({}, { maxMessageSize: 10 }).batcher.cap).toBe(29);
  });

  it('BATCH-14 the flush gate under Auto{on_admission} writes whatever it has, with no timer', async () => {
    const g = new FlushGate({ kind: 'auto', onAdmission: true }, 1);
    g.onStage(0, StagedKind.Data);
    expect(g.shouldFlush(0, false, 100)).toBe(true);
    expect(g.deadline()).toBeNaN();
    const h = egress();
    const { slot } = await openSlot(h, 4);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['a']);
    await h.runtime.runMacrotasks();
    expect(wire(h, mark)).toEqual([['"a"@1']]);
    expect(h.sink.sent[mark]!.at).toBe(0);
    expect(h.runtime.timerCount).toBe(0);
  });

  it('BATCH-15 under Manual the gate holds ordinary records', () => {
    const g = new FlushGate({ kind: 'manual' }, 1);
    g.onStage(0, StagedKind.Data);
    g.onStage(5, StagedKind.Data);
    expect(g.shouldFlush(0, false, 60_000)).toBe(false);
    expect(g.shouldFlush(1e9, false, 60_000)).toBe(false);
    expect(g.deadline()).toBeNaN();
    expect(g.shouldFlush(1e9, true, 60_000)).toBe(true); // only a kick writes them
  });

  it('BATCH-16 under Manual the gate never holds liveness: OpenSlot, CloseSlot, a terminal, or a credit reply beyond its linger window', async () => {
    for (const kind of [StagedKind.Urgent]) {
      const g = new FlushGate({ kind: 'manual' }, 1);
      g.onStage(0, StagedKind.Data);
      g.onStage(0, kind);
      expect(g.shouldFlush(0, false, 100)).toBe(true);
    }
    const r = new FlushGate({ kind: 'manual' }, 50);
    r.onStage(10, StagedKind.CreditReply);
    expect(r.shouldFlush(59, false, 100)).toBe(false);
    expect(r.deadline()).toBe(60);
    expect(r.shouldFlush(60, false, 100)).toBe(true);
    // The batcher under Manual: each of these is written with no kick.
    const h = egress({ flushPolicy: { kind: 'manual' }, replyLinger: 50 });
    const a = await openSlot(h, 4); // the OpenSlot
    expect(wire(h, 0, false)).toEqual([]); // (open-only batches are filtered by `wire`)
    expect(h.sink.sent).toHaveLength(1);
    const b = await openSlot(h, 4);
    let mark = h.sink.sent.length;
    h.batcher.depart(b.slot); // CloseSlot{PeerGone}
    await h.runtime.runMacrotasks();
    expect(wire(h, mark)).toEqual([['Close(PeerGone)@1']]);
    mark = h.sink.sent.length;
    offerFinalized(h, a.slot); // a terminal
    await h.runtime.runMacrotasks();
    expect(wire(h, mark)).toEqual([['Finalized@1', 'Close(TerminalSent)@2']]);
    // An OpenSlot with ordinary records staged: those are written first, the OpenSlot alone after.
    const c = await openSlot(h, 4);
    mark = h.sink.sent.length;
    offerItems(h, c.slot, ['staged']);
    await h.runtime.runMacrotasks();
    expect(h.sink.sent.length).toBe(mark);
    const d = await openSlot(h, 4);
    expect(batches(h, mark).map((x) => x.records.map((r) => label(r)))).toEqual([['"staged"@1'], ['Open@0']]);
    expect(batches(h, mark)[1]!.records[0]!.slot).toBe(d.slot.id);
    mark = h.sink.sent.length;
    h.batcher.inbox.postReplyCredit(sid(8, 0), 2); // a credit reply, after its window
    await h.runtime.advance(50);
    expect(wire(h, mark, true)).toEqual([['8.0:Credit+2']]);
  });

  it('BATCH-17 a kick survives an inline clamp flush and is served exactly once', async () => {
    const h = egress({ flushPolicy: { kind: 'manual' }, maxBatchBytes: 256 });
    const { slot } = await openSlot(h);
    const mark = h.sink.sent.length;
    const items = tokens(40, 'kick-');
    offerItems(h, slot, items);
    // One wake: the grant releases 40 records, a clamp cuts the batch inline, the kick is consumed
    // at the end of the wake after the rest is written.
    grant(h, slot, 41);
    h.batcher.inbox.kick();
    await h.runtime.runMacrotasks();
    const written = h.sink.sent.slice(mark);
    expect(written.length).toBeGreaterThan(1);
    expect(dataOf(h, slot.id, mark).map((r) => r.frameSeq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(h.batcher.staged).toBe(0);
    // Served once: a later record is not written by the same kick.
    const after = h.sink.sent.length;
    offerItems(h, slot, ['later']);
    await h.runtime.advance(1000);
    expect(h.sink.sent.length).toBe(after);
    expect(h.batcher.staged).toBe(1);
  });

  it('BATCH-18 a linger window runs from the oldest staged record', async () => {
    const g = new FlushGate({ kind: 'auto', onAdmission: false, maxLinger: 50 }, 1);
    g.onStage(0, StagedKind.Data);
    g.onStage(30, StagedKind.Data);
    expect(g.deadline()).toBe(50);
    expect(g.shouldFlush(49, false, 100)).toBe(false);
    expect(g.shouldFlush(50, false, 100)).toBe(true);
    const h = egress({ flushPolicy: { kind: 'auto', onAdmission: false, maxLinger: 50 } });
    const { slot } = await openSlot(h, 10);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['old']);
    await h.runtime.advance(30);
    offerItems(h, slot, ['young']);
    await h.runtime.advance(19);
    expect(h.sink.sent.length).toBe(mark);
    await h.runtime.advance(1);
    expect(wire(h, mark)).toEqual([['"old"@1', '"young"@2']]);
    expect(h.sink.sent[mark]!.at).toBe(50);
  });

  it('BATCH-19 writing a batch starts the window again', async () => {
    const g = new FlushGate({ kind: 'auto', onAdmission: false, maxLinger: 50 }, 1);
    g.onStage(0, StagedKind.Data);
    g.onWrite(50, true);
    expect(g.deadline()).toBeNaN();
    g.onStage(60, StagedKind.Data);
    expect(g.deadline()).toBe(110);
    expect(g.shouldFlush(109, false, 100)).toBe(false);
    const h = egress({ flushPolicy: { kind: 'auto', onAdmission: false, maxLinger: 50 } });
    const { slot } = await openSlot(h, 10);
    const mark = h.sink.sent.length;
    offerItems(h, slot, ['a']);
    await h.runtime.advance(50); // written at 50
    await h.runtime.advance(10);
    offerItems(h, slot, ['b']); // staged at 60
    await h.runtime.advance(49);
    expect(h.sink.sent.length).toBe(mark + 1);
    await h.runtime.advance(1);
    expect(h.sink.sent.slice(mark).map((b) => b.at)).toEqual([50, 110]);
  });

  it('BATCH-20 a discarded batch leaves nothing staged', async () => {
    const g = new FlushGate({ kind: 'manual' }, 1);
    g.onStage(0, StagedKind.Data);
    g.onStage(0, StagedKind.CreditReply);
    g.reset();
    expect(g.staged).toBe(0);
    expect(g.deadline()).toBeNaN();
    expect(g.shouldFlush(1e9, false, 0)).toBe(false);
    for (const discard of ['retire', 'epochDeath'] as const) {
      const h = egress({ flushPolicy: { kind: 'manual' } });
      const { slot } = await openSlot(h, 10);
      const gauge = h.metrics.stagedRecords;
      offerItems(h, slot, ['a', 'b', 'c']);
      expect(h.batcher.staged).toBe(3);
      expect(h.metrics.stagedRecords - gauge).toBe(3);
      if (discard === 'retire') h.batcher.retire();
      else h.batcher.epochDeath(new MuxError('ERR_EPOCH_DEATH', 'discard'));
      expect(h.batcher.staged).toBe(0);
      expect(h.metrics.stagedRecords - gauge).toBe(0);
      h.batcher.kick();
      await h.runtime.advance(10);
      expect(h.sink.sent).toHaveLength(1);
    }
  });
});
