// Open ack and fences (FENCE-*). A rendezvous singleton (a record over the batch cap) and,
// with `asyncOpenAck`, an OpenSlot not yet admitted, fence their slot: later records, the slot's
// CloseSlot included, wait until the resolution. Lines marked "default" use the awaited open ack.
import { describe, expect, it } from 'vitest';
import {
  EgressKind,
  Offer,
  RecordType,
  batches,
  egress,
  frameLabel,
  label,
  offerItems,
  openSlot,
  produce,
  type EgressHarness,
} from './harness.ts';

/** Every label the sink saw for one slot, eager batches and staged singletons in the order written. */
function allFor(h: EgressHarness, slot: number): string[] {
  const all = [...h.sink.sent, ...h.sink.staged].sort(
    (a, b) => a.decoded.header!.batchSeq - b.decoded.header!.batchSeq,
  );
  return all.flatMap((b) => b.decoded.records.filter((r) => r.slot === slot).map((r) => label(r)));
}

describe('H. Open ack and fences', () => {
  it('FENCE-01 (async) an OpenSlot admitted synchronously is never fenced: the fenced count stays 0', async () => {
    const h = egress({ asyncOpenAck: true });
    const { slot } = await openSlot(h, 4);
    expect(slot.fenced).toBe(false);
    expect(h.metrics.fencedSlots).toBe(0);
    expect(h.batcher.offer(slot, EgressKind.ItemString, 'a')).toBe(Offer.Ok);
    expect(h.batcher.staged).toBe(1);
  });

  it('FENCE-02 a resolution from an earlier singleton does not lift a later fence: a later 100,000-byte singleton keeps its slot fenced, withheld stays 1', async () => {
    const h = egress({ maxBatchBytes: 256 });
    const { slot } = await openSlot(h, 8);
    h.sink.mode = 'stall';
    expect(h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(500))).toBe(Offer.Ok);
    expect(slot.fenced).toBe(true);
    // The first singleton's descriptor is admitted: its fence lifts.
    h.sink.admitStalled();
    await h.runtime.runMacrotasks();
    expect(slot.fenced).toBe(false);
    // A second, larger singleton fences again; its own admission is still pending.
    expect(h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(100_000))).toBe(Offer.Ok);
    expect(slot.fenced).toBe(true);
    // A success naming the earlier transfer cannot lift it: only this transfer's own resolution can.
    const earlier = h.sink.staged[0]!.id;
    h.batcher.inbox.postResolution(slot.id, true, '', earlier);
    expect(h.batcher.offer(slot, EgressKind.ItemString, 'after')).toBe(Offer.Ok);
    await h.runtime.runMacrotasks();
    expect(h.metrics.withheldRecords).toBe(1);
    expect(h.metrics.fencedSlots).toBe(1);
    h.sink.release();
    await h.runtime.runMacrotasks();
    expect(slot.fenced).toBe(false);
    expect(h.metrics.withheldRecords).toBe(0);
    expect(allFor(h, slot.id)).toEqual(['Open@0', 'bytes500@1', 'bytes100000@2', '"after"@3']);
  });

  it('FENCE-03 (async) stalled transport: the second open acks at once; its first item is withheld (staged 0) until the OpenSlot is admitted; the wire shows Open@0 then Data@1', async () => {
    const h = egress({ asyncOpenAck: true });
    await openSlot(h, 4);
    h.sink.mode = 'stall';
    const { slot } = await openSlot(h, 4); // resolves although the OpenSlot is parked
    expect(slot.fenced).toBe(true);
    expect(h.batcher.offer(slot, EgressKind.ItemString, 'first')).toBe(Offer.Ok);
    await h.runtime.runMacrotasks();
    expect(h.batcher.staged).toBe(0);
    expect(h.metrics.withheldRecords).toBe(1);
    h.sink.release();
    await h.runtime.runMacrotasks();
    expect(slot.fenced).toBe(false);
    expect(allFor(h, slot.id)).toEqual(['Open@0', '"first"@1']);
  });

  it('FENCE-04 (async) a failed OpenSlot admission is epoch death', async () => {
    const h = egress({ asyncOpenAck: true });
    h.sink.mode = 'refuse';
    const { slot, owner } = await openSlot(h, 4);
    await h.runtime.runMacrotasks();
    expect(h.metrics.epochDeaths).toBe(1);
    expect(slot.closed).toBe(true);
    expect(owner.closed).toHaveLength(1);
    expect(h.batcher.offer(slot, EgressKind.ItemString, 'x')).toBe(Offer.Closed);
    expect(h.metrics.fencedSlots).toBe(0);
  });

  it('FENCE-05 a real admission failure of a staged singleton reaches the batcher and causes epoch death', async () => {
    const h = egress({ maxBatchBytes: 256 });
    const { slot, owner } = await openSlot(h, 4);
    const other = await openSlot(h, 4);
    h.sink.mode = 'refuse';
    expect(h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(1000))).toBe(Offer.Ok);
    await h.runtime.runMacrotasks();
    expect(h.metrics.epochDeaths).toBe(1);
    expect(slot.closed && other.slot.closed).toBe(true);
    expect(owner.closed[0]?.code).toBe('ERR_EPOCH_DEATH');
    expect(h.metrics.fencedSlots).toBe(0);
  });

  it('FENCE-06 (async) 4,096 grants to never-allocated indices are all refused; the admission answer still lifts the fence and the data goes out at seq 1', async () => {
    const h = egress({ asyncOpenAck: true });
    h.sink.mode = 'stall';
    const { slot } = await openSlot(h, 4);
    let refused = 0;
    for (let i = 0; i < 4096; i++) if (!h.batcher.inbox.postCredit(((1000 + i) << 8) >>> 0, 1)) refused++;
    expect(refused).toBe(4096);
    offerItems(h, slot, ['d']);
    h.sink.release();
    await h.runtime.runMacrotasks();
    expect(slot.fenced).toBe(false);
    expect(allFor(h, slot.id)).toEqual(['Open@0', '"d"@1']);
  });

  it('FENCE-07 (async) a departed producer’s close waits for the OpenSlot admission, then goes alone at seq 1; a third open is still answered', async () => {
    const h = egress({ asyncOpenAck: true });
    await openSlot(h, 4);
    h.sink.mode = 'stall';
    const { slot } = await openSlot(h, 4);
    h.batcher.depart(slot);
    await h.runtime.runMacrotasks();
    expect(slot.closed).toBe(false);
    expect(h.metrics.liveSlots).toBe(2);
    h.sink.release();
    await h.runtime.runMacrotasks();
    expect(slot.closed).toBe(true);
    const closeBatch = batches(h).find((b) =>
      b.records.some((r) => r.slot === slot.id && r.type === RecordType.CloseSlot),
    )!;
    expect(closeBatch.records.map((r) => label(r))).toEqual(['Close(PeerGone)@1']);
    const third = await openSlot(h, 4);
    expect(third.slot.closed).toBe(false);
  });

  it('FENCE-08 (async) with slot budget 256 a fenced slot’s 64 records pause at the byte cap until the open is admitted, then follow from seq 1', async () => {
    const h = egress({ asyncOpenAck: true, slotByteBudget: 256 });
    await openSlot(h, 64);
    h.sink.mode = 'stall';
    const { slot } = await openSlot(h, 64);
    const items = Array.from({ length: 64 }, (_, i) => `r${i}`.padEnd(20, '.'));
    const producing = produce(h, slot, items);
    await h.runtime.runMacrotasks();
    expect(slot.paused).toBe(true);
    expect(h.metrics.withheldRecords).toBeLessThan(64);
    h.sink.release();
    await settle(h, producing);
    const data = allFor(h, slot.id);
    expect(data[0]).toBe('Open@0');
    expect(data.slice(1)).toEqual(items.map((it, i) => `${JSON.stringify(it)}@${i + 1}`));
    expect(slot.paused).toBe(false);
  });

  it('FENCE-09 default: a departed producer’s close goes at once, alone, at seq 1', async () => {
    const h = egress();
    const { slot } = await openSlot(h, 4);
    const before = h.sink.sent.length;
    h.batcher.depart(slot);
    await h.runtime.runMacrotasks();
    expect(slot.closed).toBe(true);
    expect(batches(h, before).map((b) => b.records.map((r) => label(r)))).toEqual([['Close(PeerGone)@1']]);
  });

  it('FENCE-10 default, cap and budget 256: a 512-byte singleton fences the slot, the producer departs; the close waits (live_slots stays 1), then goes alone at seq 2', async () => {
    const h = egress({ maxBatchBytes: 256, slotByteBudget: 256 });
    const { slot } = await openSlot(h, 4);
    h.sink.mode = 'stall';
    expect(h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(512))).toBe(Offer.Ok);
    h.batcher.depart(slot);
    await h.runtime.advance(200);
    expect(h.metrics.liveSlots).toBe(1);
    expect(slot.closed).toBe(false);
    h.sink.release();
    await h.runtime.runMacrotasks();
    expect(slot.closed).toBe(true);
    expect(h.metrics.liveSlots).toBe(0);
    expect(allFor(h, slot.id)).toEqual(['Open@0', 'bytes512@1', 'Close(PeerGone)@2']);
    const closeBatch = batches(h).find((b) => b.records.some((r) => r.type === RecordType.CloseSlot))!;
    expect(closeBatch.records).toHaveLength(1);
  });

  it('FENCE-11 default: a fenced slot pauses at the byte cap, and its records follow the singleton from seq 2', async () => {
    const h = egress({ maxBatchBytes: 256, slotByteBudget: 256 });
    const { slot } = await openSlot(h, 64);
    h.sink.mode = 'stall';
    expect(h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(512))).toBe(Offer.Ok);
    const items = Array.from({ length: 20 }, (_, i) => `f${i}`.padEnd(20, '.'));
    const producing = produce(h, slot, items);
    await h.runtime.runMacrotasks();
    expect(slot.paused).toBe(true);
    h.sink.release();
    await settle(h, producing);
    expect(slot.paused).toBe(false);
    const seen = allFor(h, slot.id);
    expect(seen.slice(0, 2)).toEqual(['Open@0', 'bytes512@1']);
    expect(seen.slice(2)).toEqual(
      Array.from({ length: 20 }, (_, i) => `${JSON.stringify(`f${i}`.padEnd(20, '.'))}@${i + 2}`),
    );
  });

  it('a terminal over the cap goes through rendezvous with its CloseSlot, closes the slot, and its guard reports Sent at admission', async () => {
    const h = egress({ maxBatchBytes: 256 });
    const { slot, owner } = await openSlot(h, 4);
    h.sink.mode = 'stall';
    const big = new TextEncoder().encode('x'.repeat(400));
    // A SenderError terminal with a long message: encoded body over the cap.
    expect(h.batcher.offer(slot, EgressKind.Terminal, makeSenderError(big))).toBe(Offer.Ok);
    expect(slot.closed).toBe(true);
    expect(owner.retired).toEqual([]);
    h.sink.release();
    await h.runtime.runMacrotasks();
    expect(owner.retired).toEqual(['Sent']);
    expect(h.sink.staged[0]!.decoded.records.map((r) => r.type)).toEqual([RecordType.Data, RecordType.CloseSlot]);
    expect(frameLabel(h.sink.staged[0]!.decoded.records[0]!.body)).toMatch(/^SenderError/);
  });

  it('a record over stagedPayloadMax fails only its stream with ERR_RECORD_TOO_LARGE; the batcher and other slots go on', async () => {
    const h = egress({ maxBatchBytes: 256, stagedPayloadMax: 4096 });
    const { slot, owner } = await openSlot(h, 4);
    const other = await openSlot(h, 4);
    expect(h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(5000))).toBe(Offer.Closed);
    expect(owner.closed[0]?.code).toBe('ERR_RECORD_TOO_LARGE');
    expect(h.batcher.offer(other.slot, EgressKind.ItemString, 'ok')).toBe(Offer.Ok);
    await h.runtime.runMacrotasks();
    expect(h.sink.staged).toHaveLength(0);
    expect(h.metrics.epochDeaths).toBe(0);
  });

  it('staging room bounds staged bytes per peer: a singleton waits in its slot queue until room is released', async () => {
    const h = egress({ maxBatchBytes: 256 });
    const { slot } = await openSlot(h, 4);
    h.sink.stageRoom = false;
    expect(h.batcher.offer(slot, EgressKind.ItemBytes, new Uint8Array(600))).toBe(Offer.Ok);
    await h.runtime.runMacrotasks();
    expect(h.sink.staged).toHaveLength(0);
    expect(h.metrics.withheldRecords).toBe(1);
    h.sink.freeStageRoom();
    await h.runtime.runMacrotasks();
    expect(h.sink.staged).toHaveLength(1);
    expect(h.metrics.withheldRecords).toBe(0);
  });
});

/** Run the manual runtime's macrotasks until `p` settles (a producer waits on wakes that they run). */
async function settle(h: EgressHarness, p: Promise<unknown>): Promise<void> {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 1000 && !done; i++) await h.runtime.runMacrotasks();
  await p;
  await h.runtime.runMacrotasks();
}

/** A SenderError terminal body: `{"SenderError": <str>}` (fixmap 1, str8 key, str32 value). */
function makeSenderError(message: Uint8Array): Uint8Array {
  const key = new TextEncoder().encode('SenderError');
  const out = new Uint8Array(1 + 1 + key.length + 5 + message.length);
  let o = 0;
  out[o++] = 0x81;
  out[o++] = 0xa0 | key.length;
  out.set(key, o);
  o += key.length;
  out[o++] = 0xdb;
  new DataView(out.buffer).setUint32(o, message.length);
  o += 4;
  out.set(message, o);
  return out;
}
