/**
 * The peer window on the mux path, unit level: the batcher withholds what does not fit the peer's
 * window and stages it when window is released; ingress charges what it keeps, releases what leaves
 * or is dropped, faults only the slot that overruns; the update's wire form; and the bound on what
 * one batch adds to `batch_seq_gaps_total`.
 */
import { describe, expect, it } from 'vitest';
import { ReceiveWindow } from '../../src/credit/peer-window.ts';
import { MuxError } from '../../src/mux/errors.ts';
import { MAX_PLAUSIBLE_SEQ_GAP } from '../../src/mux/ingress.ts';
import { PeerEgress } from '../../src/mux/peer-egress.ts';
import { PeerWindowIn, decodeWindowUpdate, encodeWindowUpdate } from '../../src/mux/peer-window.ts';
import { CloseReason } from '../../src/wire/constants.ts';
import { FRAME_HEARTBEAT } from '../../src/wire/frame.ts';
import {
  EgressKind,
  FRAME_FINALIZED,
  IngressHarness,
  Offer,
  PEER,
  dataOf,
  egress,
  encodeBatch,
  itemBody,
  openSlot,
  read,
  rec,
  sid,
} from './harness.ts';
import type { EgressHarness } from './harness.ts';

const lengths = (h: EgressHarness, slot: number): number[] => dataOf(h, slot).map((r) => r.body.byteLength);

/** A batcher whose peer advertised `size` bytes of window, with the shared egress it counts in. */
function windowed(size: number, config: Parameters<typeof egress>[0] = {}): { h: EgressHarness; pe: PeerEgress } {
  const pe = new PeerEgress(Number.POSITIVE_INFINITY);
  return { h: egress(config, { peerEgress: pe, sendWindow: () => size }), pe };
}

describe('peer window, sender side (batcher)', () => {
  it('a record that does not fit the window waits in its slot queue without pausing the producer; a release stages it, in order', async () => {
    const { h, pe } = windowed(100);
    const { slot } = await openSlot(h, 10);
    for (const n of [30, 31, 32, 33]) expect(h.batcher.offer(slot, EgressKind.Body, itemBody(n))).toBe(Offer.Ok);
    await h.runtime.runMacrotasks();
    expect(lengths(h, slot.id)).toEqual([30, 31, 32]); // 93 in flight; 33 more would be 126 > 100
    expect([slot.queued, slot.paused, pe.sendWindow.inflight, h.metrics.sendWindowBlocked]).toEqual([1, false, 93, 1]);
    expect(pe.release(30)).toBe(0);
    await h.runtime.runMacrotasks();
    expect(lengths(h, slot.id)).toEqual([30, 31, 32, 33]);
    expect([slot.queued, pe.sendWindow.inflight]).toEqual([0, 96]);
  });

  it('a record larger than the window goes alone once nothing is in flight, and the next waits for its release', async () => {
    const { h, pe } = windowed(100);
    const { slot } = await openSlot(h, 10);
    h.batcher.offer(slot, EgressKind.Body, itemBody(200));
    h.batcher.offer(slot, EgressKind.Body, itemBody(10));
    await h.runtime.runMacrotasks();
    expect(lengths(h, slot.id)).toEqual([200]);
    pe.release(200);
    await h.runtime.runMacrotasks();
    expect(lengths(h, slot.id)).toEqual([200, 10]);
  });

  it('heartbeats never count: a slot heartbeats while the window is full, and nothing is charged for it', async () => {
    const { h, pe } = windowed(100);
    const a = await openSlot(h, 10);
    const b = await openSlot(h, 10);
    h.batcher.offer(a.slot, EgressKind.Body, itemBody(100));
    await h.runtime.runMacrotasks();
    h.batcher.heartbeat(b.slot);
    await h.runtime.runMacrotasks();
    expect(dataOf(h, b.slot.id).map((r) => r.body)).toEqual([FRAME_HEARTBEAT]);
    expect(pe.sendWindow.inflight).toBe(100);
    // A terminal is a Data body: it counts, so it waits like any record.
    expect(h.batcher.offer(b.slot, EgressKind.Terminal, FRAME_FINALIZED)).toBe(Offer.Ok);
    await h.runtime.runMacrotasks();
    expect(dataOf(h, b.slot.id)).toHaveLength(1);
    pe.release(100);
    await h.runtime.runMacrotasks();
    expect(dataOf(h, b.slot.id).map((r) => r.body)).toEqual([FRAME_HEARTBEAT, FRAME_FINALIZED]);
    expect(pe.sendWindow.inflight).toBe(FRAME_FINALIZED.byteLength);
  });

  it('a release wakes blocked slots oldest first, only as many as would fit; the rest keep their turn', async () => {
    const { h, pe } = windowed(100);
    const [filler, a, b, c] = [
      await openSlot(h, 10),
      await openSlot(h, 10),
      await openSlot(h, 10),
      await openSlot(h, 10),
    ];
    h.batcher.offer(filler!.slot, EgressKind.Body, itemBody(100));
    for (const o of [a!, b!, c!]) h.batcher.offer(o.slot, EgressKind.Body, itemBody(50));
    await h.runtime.runMacrotasks();
    expect(h.metrics.sendWindowBlocked).toBe(3);
    pe.release(60); // 40 in flight: room for one 50
    await h.runtime.runMacrotasks();
    expect([a!, b!, c!].map((o) => dataOf(h, o.slot.id).length)).toEqual([1, 0, 0]);
    pe.release(50);
    await h.runtime.runMacrotasks();
    expect([a!, b!, c!].map((o) => dataOf(h, o.slot.id).length)).toEqual([1, 1, 0]);
    pe.release(90);
    await h.runtime.runMacrotasks();
    expect([a!, b!, c!].map((o) => dataOf(h, o.slot.id).length)).toEqual([1, 1, 1]);
  });

  it('one release wakes the blocked slots of every lane toward the peer', async () => {
    const pe = new PeerEgress(Number.POSITIVE_INFINITY);
    const h0 = egress({}, { peerEgress: pe, sendWindow: () => 100, lane: 0 });
    const h1 = egress({}, { peerEgress: pe, sendWindow: () => 100, lane: 1 });
    const s0 = (await openSlot(h0, 10)).slot;
    const s1 = (await openSlot(h1, 10)).slot;
    h0.batcher.offer(s0, EgressKind.Body, itemBody(100));
    h0.batcher.offer(s0, EgressKind.Body, itemBody(40));
    h1.batcher.offer(s1, EgressKind.Body, itemBody(40));
    await h0.runtime.runMacrotasks();
    await h1.runtime.runMacrotasks();
    expect([lengths(h0, s0.id), lengths(h1, s1.id)]).toEqual([[100], []]);
    pe.release(100);
    await h0.runtime.runMacrotasks();
    await h1.runtime.runMacrotasks();
    expect([lengths(h0, s0.id), lengths(h1, s1.id)]).toEqual([[100, 40], [40]]);
    expect(pe.sendWindow.inflight).toBe(80);
  });

  it('a batch discarded before it was written, or refused by the transport, gives its window back', async () => {
    const { h, pe } = windowed(1_000, { flushPolicy: { kind: 'manual' } });
    const { slot } = await openSlot(h, 10);
    for (let i = 0; i < 3; i++) h.batcher.offer(slot, EgressKind.Body, itemBody(50));
    expect(pe.sendWindow.inflight).toBe(150); // staged, not yet written
    h.batcher.epochDeath(new MuxError('ERR_EPOCH_DEATH', 'test'));
    expect(pe.sendWindow.inflight).toBe(0);
    const next = (await openSlot(h, 10)).slot;
    h.sink.mode = 'refuse';
    h.batcher.offer(next, EgressKind.Body, itemBody(60));
    expect(pe.sendWindow.inflight).toBe(60);
    h.batcher.kick();
    await h.runtime.runMacrotasks();
    expect(pe.sendWindow.inflight).toBe(0);
  });

  it('a parked write refused after an epoch death on the same link still gives its window back', async () => {
    const { h, pe } = windowed(1_000, { flushPolicy: { kind: 'manual' } });
    const { slot } = await openSlot(h, 10);
    h.sink.mode = 'stall';
    h.batcher.offer(slot, EgressKind.Body, itemBody(60));
    h.batcher.kick();
    expect([h.batcher.parked, pe.sendWindow.inflight]).toEqual([true, 60]);
    // The epoch death voids the parked write's settlement, but not what a refusal gives back.
    h.batcher.epochDeath(new MuxError('ERR_EPOCH_DEATH', 'test'));
    expect(pe.sendWindow.inflight).toBe(60);
    h.sink.refuseStalled();
    await h.runtime.runMacrotasks();
    expect(pe.sendWindow.inflight).toBe(0);
  });

  it('a rendezvous singleton counts by its whole batch; one whose descriptor is refused gives it back', async () => {
    const { h, pe } = windowed(10_000, { maxBatchBytes: 256 });
    const { slot } = await openSlot(h, 10);
    h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(1_000));
    await h.runtime.runMacrotasks();
    expect(h.sink.staged).toHaveLength(1);
    expect(pe.sendWindow.inflight).toBe(h.sink.staged[0]!.payload.byteLength);
    const other = (await openSlot(h, 10)).slot;
    h.sink.mode = 'refuse';
    pe.release(pe.sendWindow.inflight);
    h.batcher.offer(other, EgressKind.ItemBytes, new Uint8Array(1_000));
    await h.runtime.runMacrotasks();
    expect(h.sink.staged).toHaveLength(2);
    expect(pe.sendWindow.inflight).toBe(0);
  });

  it('a newer link resets the window; a batcher still on the older link is not counted', async () => {
    let size = 100;
    const pe = new PeerEgress(Number.POSITIVE_INFINITY);
    const h = egress({}, { peerEgress: pe, sendWindow: () => size });
    const stale = egress({}, { peerEgress: pe, sendWindow: () => size, lane: 1 });
    await openSlot(h, 10).then(({ slot }) => h.batcher.offer(slot, EgressKind.Body, itemBody(90)));
    await h.runtime.runMacrotasks();
    expect(pe.sendWindow.inflight).toBe(90);
    h.sink.link = 7;
    size = 300;
    h.batcher.epochDeath(new MuxError('ERR_EPOCH_DEATH', 'the link changed'));
    expect([pe.linkEpoch, pe.sendWindow.inflight, pe.sendWindow.size]).toEqual([7, 0, 300]);
    const s = (await openSlot(stale, 10)).slot;
    stale.batcher.offer(s, EgressKind.Body, itemBody(250));
    stale.batcher.offer(s, EgressKind.Body, itemBody(250));
    await stale.runtime.runMacrotasks();
    expect(lengths(stale, s.id)).toEqual([250, 250]); // its batches go to a dead link: refused there, never counted here
    expect(pe.sendWindow.inflight).toBe(0);
  });
});

/** A receive window on an ingress harness, recording when a report becomes due. */
function receiving(
  h: IngressHarness,
  size: number,
  maxBatch: number,
  active = true,
): { w: PeerWindowIn; reports: PeerWindowIn[] } {
  const reports: PeerWindowIn[] = [];
  const w = new PeerWindowIn(
    { metrics: h.metrics, reportDue: (x) => reports.push(x) },
    PEER,
    1,
    new ReceiveWindow(size, maxBatch, active),
  );
  h.table.window = w;
  return { w, reports };
}

const bigIngress = (): IngressHarness => new IngressHarness({ C: 8, slotBudget: 1 << 20, peerBudget: 1 << 20 });

describe('peer window, receiver side (ingress)', () => {
  it('holds count in the slot buffer and the hold; a take releases; an update is asked for once, when due', () => {
    const h = bigIngress();
    const { w, reports } = receiving(h, 1_000, 100);
    const b = h.bind();
    h.open(sid(1), b);
    h.send(rec.data(sid(1), 1, itemBody(50)), rec.data(sid(1), 3, itemBody(60))); // seq 3 waits in the hold
    expect([w.account.held, h.metrics.receiveWindowHeldBytes, h.metrics.heldRecords]).toEqual([110, 110, 1]);
    h.send(rec.data(sid(1), 2, itemBody(200)));
    expect(w.account.held).toBe(310);
    read(b, 2); // 250 taken: W/4
    expect([w.account.held, w.account.unreported, reports.length]).toEqual([60, 250, 1]);
    read(b);
    expect(reports.length).toBe(1); // coalesced: one pending update per peer
    expect(w.account.takeReport()).toBe(310);
    expect([h.metrics.receiveWindowHeldBytes, h.metrics.receiveWindowPeakBytes]).toEqual([0, 310]);
  });

  it('records dropped on arrival are released as if taken (closed slot, duplicate, stale epoch); heartbeats never count', () => {
    const h = bigIngress();
    const { w } = receiving(h, 10_000, 100);
    const b = h.bind();
    h.open(sid(1), b);
    h.send(
      rec.data(sid(1), 1, itemBody(40)),
      rec.data(sid(1), 1, itemBody(41)),
      rec.data(sid(9), 1, itemBody(42)),
      rec.hb(sid(1), 2),
      rec.data(sid(1), 3, FRAME_HEARTBEAT),
      rec.data(sid(9), 1, FRAME_HEARTBEAT),
    );
    expect([w.account.held, w.account.unreported]).toEqual([40, 41 + 42]);
    h.deliver(encodeBatch(0n, 0, [rec.data(sid(1), 4, itemBody(43))])); // older epoch: dropped whole
    expect([w.account.held, w.account.unreported]).toEqual([40, 41 + 42 + 43]);
    expect(read(b).map((x) => x.slice(0, 5))).toEqual(['item:', 'Heart', 'Heart']);
    expect([w.account.held, w.account.unreported]).toEqual([0, 40 + 41 + 42 + 43]);
  });

  it('unread records of a retired slot stay charged until read or discarded; its hold is released at retirement', () => {
    const h = bigIngress();
    const { w } = receiving(h, 10_000, 100);
    const a = h.bind();
    const b = h.bind();
    h.open(sid(1), a);
    h.open(sid(2), b);
    // a: two records and its terminal, then the close: the slot retires with all three unread.
    h.send(
      rec.data(sid(1), 1, itemBody(50)),
      rec.data(sid(1), 2, itemBody(51)),
      rec.fin(sid(1), 3),
      rec.close(sid(1), 4, CloseReason.TerminalSent),
    );
    // b: one record in order and one in the hold, then the consumer cancels it.
    h.send(rec.data(sid(2), 1, itemBody(60)), rec.data(sid(2), 3, itemBody(61)));
    expect(w.account.held).toBe(50 + 51 + FRAME_FINALIZED.byteLength + 60 + 61);
    expect(a.ended).toBe(true);
    h.table.consumerGone(b.slot!);
    expect(w.account.held).toBe(50 + 51 + FRAME_FINALIZED.byteLength + 60); // the hold went with the slot
    b.buffer.clear(); // what an anchor's cancel() does
    expect(w.account.held).toBe(50 + 51 + FRAME_FINALIZED.byteLength);
    expect(read(a)).toHaveLength(3);
    expect(w.account.held).toBe(0);
    expect(w.account.unreported).toBe(50 + 51 + FRAME_FINALIZED.byteLength + 60 + 61);
  });

  it('a record that would hold more than the window plus one batch faults only its slot, counted in peer_window_overrun', () => {
    const h = bigIngress();
    const { w } = receiving(h, 200, 100); // limit 300
    const a = h.bind();
    const b = h.bind();
    h.open(sid(1), a);
    h.open(sid(2), b);
    h.send(rec.data(sid(1), 1, itemBody(140)), rec.data(sid(1), 2, itemBody(140)), rec.data(sid(2), 1, itemBody(30)));
    expect(h.metrics.peerWindowOverrun).toBe(1);
    expect(h.host.replies).toContainEqual({ kind: 'close', slot: sid(2), value: CloseReason.ProtocolError });
    expect(h.host.replies.filter((r) => r.kind === 'close')).toHaveLength(1);
    expect(read(b)).toEqual(['Dropped']);
    expect(read(a)).toHaveLength(2);
    expect([w.account.held, w.account.unreported]).toEqual([0, 310]); // the refused record is released too
  });

  it('a peer that advertised no window is counted but never faulted for it', () => {
    const h = bigIngress();
    const { w, reports } = receiving(h, 200, 100, false);
    const a = h.bind();
    h.open(sid(1), a);
    h.send(...[1, 2, 3, 4].map((k) => rec.data(sid(1), k, itemBody(140))));
    expect([h.metrics.peerWindowOverrun, w.account.held]).toEqual([0, 560]);
    read(a);
    expect([w.account.held, reports.length]).toEqual([0, 0]); // and it is sent no updates
  });

  it('a staged singleton batch keeps its body charged and releases the rest of its length at once; one dropped whole releases all of it', () => {
    const h = bigIngress();
    const { w } = receiving(h, 100_000, 100);
    const a = h.bind();
    h.open(sid(1), a);
    const payload = encodeBatch(h.epoch, 9, [
      rec.data(sid(1), 1, itemBody(250)),
      rec.close(sid(1), 2, CloseReason.TerminalSent),
    ]);
    h.reader.reset(payload);
    h.table.handleBatch(h.reader, payload.byteLength);
    expect([w.account.held, w.account.unreported]).toEqual([250, payload.byteLength - 250]);
    const stale = encodeBatch(0n, 3, [rec.data(sid(1), 2, itemBody(200))]);
    h.reader.reset(stale);
    h.table.handleBatch(h.reader, stale.byteLength);
    expect(w.account.unreported).toBe(payload.byteLength - 250 + stale.byteLength);
  });
});

describe('the window update on the wire (_stream_window)', () => {
  it('is the released byte count as a u64, big-endian', () => {
    const out = new Uint8Array(8);
    expect([...encodeWindowUpdate(0x1_0203_0405, out)]).toEqual([0, 0, 0, 1, 2, 3, 4, 5]);
    expect(decodeWindowUpdate(out)).toBe(0x1_0203_0405);
    expect(decodeWindowUpdate(encodeWindowUpdate(Number.MAX_SAFE_INTEGER, new Uint8Array(8)))).toBe(
      Number.MAX_SAFE_INTEGER,
    );
  });

  it('a body of the wrong length, zero, or above 2^53 − 1 is malformed', () => {
    expect(decodeWindowUpdate(new Uint8Array(4))).toBe(-1);
    expect(decodeWindowUpdate(new Uint8Array(9))).toBe(-1);
    expect(decodeWindowUpdate(new Uint8Array(8))).toBe(-1);
    expect(decodeWindowUpdate(Uint8Array.of(0, 0x20, 0, 0, 0, 0, 0, 0))).toBe(-1);
  });
});

describe('batch_seq gaps one batch can add', () => {
  it('a jump beyond a plausible loss adds nothing to batch_seq_gaps_total and counts one batch_seq_jump; a plausible gap counts as before', () => {
    const h = bigIngress();
    h.deliver(encodeBatch(h.epoch, 0, []));
    h.deliver(encodeBatch(h.epoch, 2 ** 31 - 1, [])); // the largest jump still "newer"
    h.deliver(encodeBatch(h.epoch, 2 ** 31 + 2 ** 30, []));
    expect([h.metrics.batchSeqGaps, h.metrics.batchSeqJumps]).toEqual([0, 2]);
    h.deliver(encodeBatch(h.epoch, 2 ** 31 + 2 ** 30 + 4, []));
    expect(h.metrics.batchSeqGaps).toBe(3);
    h.deliver(encodeBatch(h.epoch, 2 ** 31 + 2 ** 30 + 5 + MAX_PLAUSIBLE_SEQ_GAP, []));
    expect([h.metrics.batchSeqGaps, h.metrics.batchSeqJumps]).toEqual([3 + MAX_PLAUSIBLE_SEQ_GAP, 2]);
    // The first batch of a new epoch: its seq is the gap, bounded the same way.
    h.deliver(encodeBatch(h.epoch + 1n, 2 ** 31, []));
    expect([h.metrics.batchSeqGaps, h.metrics.batchSeqJumps]).toEqual([3 + MAX_PLAUSIBLE_SEQ_GAP, 3]);
  });
});
