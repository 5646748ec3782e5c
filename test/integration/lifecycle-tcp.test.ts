// Issue 5, lifecycle over TCP with 8 lanes: stop lets each producer send its tail and finalize,
// cancel stops it (an idle producer learns without sending), a stop made before the OpenSlot is
// delivered at claim, and on the wire the signals are LifecycleSlot records naming the session on
// the stream's arrival lane (a tap on the TCP adapter decodes them).
import { afterEach, describe, expect, it } from 'vitest';
import type { StreamAnchor } from '../../src/stream/anchor.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { LifecycleAction, RecordType } from '../../src/wire/constants.ts';
import { closeAll } from './helpers.ts';
import { readAll } from '../support/read-all.ts';
import { type Tap, tappedPair } from './wire-tap.ts';

afterEach(closeAll);

const aborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted ? Promise.resolve() : new Promise((r) => signal.addEventListener('abort', () => r(), { once: true }));

/** LifecycleSlot records the consumer wrote, with the lane each rode (its batch header lane). */
function lifecycleRecords(ctap: Tap) {
  const out: Array<{ lane: number; slot: number; session: bigint; action: number }> = [];
  for (const m of ctap.msgs) {
    if (m.dir !== 'out' || m.kind !== 0x01) continue;
    const d = decodeBatch(m.bytes.subarray(1));
    for (const r of d.records)
      if (r.type === RecordType.LifecycleSlot)
        out.push({ lane: d.header!.flags & 0x0f, slot: r.slot, session: r.sessionId!, action: r.lifecycleAction! });
  }
  return out;
}

/** The producer's OpenSlot for each session: lane and slot. */
function opens(ptap: Tap): Map<bigint, { lane: number; slot: number }> {
  const m = new Map<bigint, { lane: number; slot: number }>();
  for (const msg of ptap.msgs) {
    if (msg.dir !== 'out' || msg.kind !== 0x01) continue;
    const d = decodeBatch(msg.bytes.subarray(1));
    for (const r of d.records)
      if (r.type === RecordType.OpenSlot) m.set(r.sessionId!, { lane: d.header!.flags & 0x0f, slot: r.slot });
  }
  return m;
}

/** A producer that sends numbers until stopped (one per ms), then its tail and Finalized; it ends at a failed send. */
async function produce(s: StreamSender<string>, tail: readonly string[]): Promise<{ sent: number; failed: unknown }> {
  let n = 0;
  try {
    // Paced like a token generator (a tight loop would build a 1 MiB backlog the stop must wait behind).
    while (!s.stopSignal.aborted) {
      await s.send(String(n++));
      await new Promise((r) => setTimeout(r, 1));
    }
    for (const t of tail) await s.send(t);
    await s.finalize();
    return { sent: n, failed: null };
  } catch (e) {
    return { sent: n, failed: e };
  }
}

/** Read `k` items, then call `then`, then read to the end (or the end of delivery). */
async function consume(a: StreamAnchor<string>, k: number, then: () => void): Promise<string[]> {
  const got: string[] = [];
  const it = a[Symbol.asyncIterator]();
  for (let i = 0; i < k; i++) {
    const r = await it.next();
    if (r.done) return got;
    got.push(r.value);
  }
  then();
  for (let r = await it.next(); !r.done; r = await it.next()) got.push(r.value);
  return got;
}

describe('lifecycle over TCP (8 lanes)', () => {
  it('stop lets each producer send its tail and finalize; cancel stops it (16 streams over 8 lanes)', async () => {
    const { consumer, producer, ctap, ptap } = await tappedPair({ initialCredit: 4 });
    const anchors = Array.from({ length: 16 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    expect(new Set(anchors.map((a) => a.bind!.lane)).size).toBe(8);
    const tail = ['tail-1', 'tail-2', 'tail-3'];
    const producing = senders.map((s) => produce(s, tail));
    // Streams 0..7 are asked to stop, 8..15 are cancelled, each after reading 10 tokens.
    const consuming = anchors.map((a, i) => consume(a, 10, () => (i < 8 ? a.requestStop() : a.cancel())));
    const got = await Promise.all(consuming);
    const results = await Promise.all(producing);
    for (let i = 0; i < 8; i++) {
      expect(results[i]!.failed, `stream ${i} finalized`).toBeNull();
      expect(senders[i]!.cancelSignal.aborted).toBe(false);
      const n = results[i]!.sent;
      expect(got[i], `stream ${i}: every token, then the tail`).toEqual([
        ...Array.from({ length: n }, (_, k) => String(k)),
        ...tail,
      ]);
      expect(await senders[i]!.retired()).toBe('Sent');
    }
    for (let i = 8; i < 16; i++) {
      expect(results[i]!.failed, `stream ${i} stopped by the cancel`).not.toBeNull();
      expect(senders[i]!.cancelSignal.aborted && senders[i]!.stopSignal.aborted).toBe(true);
      expect(got[i]!.length, `stream ${i}: delivery ended at the cancel`).toBe(10);
      expect(got[i]).toEqual(Array.from({ length: 10 }, (_, k) => String(k)));
    }
    // On the wire: one LifecycleSlot{stop} per stopped stream, naming its session, on its arrival lane.
    const sessions = opens(ptap);
    const stops = lifecycleRecords(ctap).filter((r) => r.action === LifecycleAction.Stop);
    for (let i = 0; i < 8; i++) {
      const session = anchors[i]!.bind!.sessionId;
      const o = sessions.get(session)!;
      const mine = stops.filter((r) => r.session === session);
      expect(mine.length, `stream ${i}`).toBe(1);
      expect([mine[0]!.lane, mine[0]!.slot]).toEqual([o.lane, o.slot]);
    }
    expect(consumer.metricsRegistry.liveSlots).toBe(0);
    expect(producer.metricsRegistry.liveSlots).toBe(0);
  });

  it('an idle producer learns of a cancel without sending, on every lane', async () => {
    const { consumer, producer, ptap } = await tappedPair();
    const anchors = Array.from({ length: 8 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    await Promise.all(senders.map((s) => s.send('only')));
    await Promise.all(anchors.map((a) => a.next()));
    const written = ptap.msgs.filter((m) => m.dir === 'out').length;
    for (const a of anchors) a.cancel();
    await Promise.all(senders.map((s) => aborted(s.cancelSignal)));
    expect(ptap.msgs.filter((m) => m.dir === 'out').length, 'the producer wrote nothing meanwhile').toBe(written);
    for (const s of senders) await expect(s.send('more')).rejects.toBeDefined();
  });

  it('cancel travels as LifecycleSlot{cancel} naming the session on the arrival lane', async () => {
    const { consumer, producer, ctap, ptap } = await tappedPair();
    const anchors = Array.from({ length: 8 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    await Promise.all(senders.map((s) => s.send('only')));
    await Promise.all(anchors.map((a) => a.next()));
    const sessions = anchors.map((a) => a.bind!.sessionId);
    for (const a of anchors) a.cancel();
    await Promise.all(senders.map((s) => aborted(s.cancelSignal)));
    const o = opens(ptap);
    const cancels = lifecycleRecords(ctap).filter((r) => r.action === LifecycleAction.Cancel);
    expect(
      sessions.map((s) => cancels.filter((r) => r.session === s).map((r) => [r.lane, r.slot])),
      'per stream: [lane, slot] of its LifecycleSlot{cancel}',
    ).toEqual(sessions.map((s) => [[o.get(s)!.lane, o.get(s)!.slot]]));
  });

  it('a stop made before the OpenSlot arrives (pre-bind) is delivered at claim; the producer still finalizes', async () => {
    const { consumer, producer } = await tappedPair({ initialCredit: 2 });
    const anchors = Array.from({ length: 8 }, () => consumer.createAnchor<string>());
    const tickets = anchors.map((a) => consumer.prebindAnchor(a)!);
    for (const a of anchors) a.requestStop();
    const senders = await Promise.all(anchors.map((a, i) => producer.openAnchorStream<string>(a.handle, tickets[i]!)));
    await Promise.all(senders.map((s) => aborted(s.stopSignal)));
    const reads = anchors.map((a) => readAll(a));
    for (const s of senders) {
      expect(s.cancelSignal.aborted).toBe(false);
      for (const t of ['a', 'b', 'c', 'd', 'e']) await s.send(t);
      await s.finalize();
    }
    expect(await Promise.all(reads)).toEqual(anchors.map(() => ['a', 'b', 'c', 'd', 'e']));
  });
});
