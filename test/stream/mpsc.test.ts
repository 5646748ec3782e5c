// MPSC anchors in process (loop messenger): many senders into one consumer, each on its own slot
// and credit; per-sender ends; cancel, seal, unattached timeout; negotiation and refusals.
import { describe, it, expect, afterEach } from 'vitest';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import type { MpscAnchor, MpscEvent } from '../../src/stream/mpsc-anchor.ts';
import type { MpscSender } from '../../src/stream/mpsc-sender.ts';
import { u128 } from '../../src/stream/attach-messages.ts';
import { parseHandle } from '../../src/stream/handle.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { RecordType } from '../../src/wire/constants.ts';
import { laneForKey } from '../../src/wire/lane-hash.ts';
import { waitFor } from '../support/wait-for.ts';

const nodes: LanemuxNode[] = [];
const messengers = new WeakMap<LanemuxNode, LoopMessenger>();

/** A node's loop messenger, for raw control-plane requests. */
function nodesMessenger(node: LanemuxNode): LoopMessenger {
  const m = messengers.get(node);
  if (!m) throw new Error('no messenger recorded');
  return m;
}
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

async function pair(mux = {}, consumerOptions: { unattachedTimeout?: number } = {}) {
  const [a, b] = LoopMessenger.pair();
  const consumer = await createNode({ messenger: a, mux, ...consumerOptions });
  const producer = await createNode({ messenger: b, mux });
  nodes.push(consumer, producer);
  messengers.set(consumer, a);
  messengers.set(producer, b);
  return { consumer, producer, a, b };
}

async function readEvents<T>(anchor: MpscAnchor<T>): Promise<MpscEvent<T>[]> {
  const out: MpscEvent<T>[] = [];
  for await (const e of anchor) out.push(e);
  return out;
}

/** Items per sender, in the order read. */
function bySender<T>(events: MpscEvent<T>[]): Map<number, T[]> {
  const m = new Map<number, T[]>();
  for (const e of events) {
    if (e.kind !== 'item') continue;
    let l = m.get(e.sender);
    if (!l) m.set(e.sender, (l = []));
    l.push(e.value);
  }
  return m;
}

function cancelled(s: MpscSender<unknown>): Promise<void> {
  return new Promise<void>((r) => (s.cancelSignal.aborted ? r() : s.cancelSignal.addEventListener('abort', () => r())));
}

describe('MPSC anchors (loop messenger)', () => {
  it('remote and same-worker senders all deliver, in per-sender order; each finalize ends only its sender; seal ends the anchor', async () => {
    const { consumer, producer } = await pair({ initialCredit: 4 });
    const anchor = consumer.createMpscAnchor<string>();
    expect(parseHandle(anchor.handle).localId >> 63n).toBe(1n);
    const remote = await Promise.all([0, 1, 2, 3].map(() => producer.attachMpscAnchor<string>(anchor.handle)));
    const local = await Promise.all([0, 1].map(() => consumer.attachMpscAnchor<string>(anchor.handle)));
    const senders: MpscSender<string>[] = [...remote, ...local];
    expect(new Set(senders.map((s) => s.senderId)).size).toBe(6);
    expect(remote.every((s) => s.negotiatedTransport === 'messenger-mux-v2')).toBe(true);
    expect(local.every((s) => s.negotiatedTransport === null)).toBe(true);
    expect(anchor.senders).toBe(6);
    anchor.seal();
    const reading = readEvents(anchor);
    const N = 60;
    for (let k = 0; k < N; k++) for (const s of senders) await s.send(`${s.senderId}:${k}`);
    // One sender ends early: the others go on.
    await senders[0]!.finalize();
    for (const s of senders.slice(1)) await s.send(`${s.senderId}:last`);
    for (const s of senders.slice(1)) await s.finalize();
    const events = await reading;
    const items = bySender(events);
    for (const s of senders) {
      const want = Array.from({ length: N }, (_, k) => `${s.senderId}:${k}`);
      if (s !== senders[0]) want.push(`${s.senderId}:last`);
      expect(items.get(s.senderId)).toEqual(want);
    }
    // Exactly one end per sender, after its last item.
    const ends = events.filter((e) => e.kind !== 'item');
    expect(ends.map((e) => e.kind)).toEqual(Array(6).fill('finalized'));
    for (const s of senders) {
      const idx = events.findIndex((e) => e.kind === 'finalized' && e.sender === s.senderId);
      expect(events.slice(idx + 1).some((e) => e.sender === s.senderId)).toBe(false);
    }
    expect(anchor.finished).toBe(true);
    expect(await Promise.all(senders.map((s) => s.retired()))).toEqual(Array(6).fill('Sent'));
    expect(consumer.metrics()['velo_streaming_mux_reader_stall_total']).toBe(0);
    expect(consumer.metricsRegistry.liveSlots + producer.metricsRegistry.liveSlots).toBe(0);
    expect(consumer.metricsRegistry.activeAnchors).toBe(0);
  });

  it('the consumer round-robins over ready senders: one busy sender does not starve another', async () => {
    const { consumer, producer } = await pair({ initialCredit: 32 });
    const anchor = consumer.createMpscAnchor<string>();
    const [a, b] = await Promise.all([
      producer.attachMpscAnchor<string>(anchor.handle),
      producer.attachMpscAnchor<string>(anchor.handle),
    ]);
    for (let k = 0; k < 20; k++) a!.trySend(`a${k}`);
    for (let k = 0; k < 20; k++) b!.trySend(`b${k}`);
    await waitFor(() => anchor.buffered === 40, 2_000, '40 records delivered', 1);
    const out: MpscEvent<string>[] = [];
    expect(anchor.takeAvailable(out, 10)).toBe(10);
    // Alternating, one record per turn.
    expect(new Set(out.slice(0, 10).map((e) => e.sender)).size).toBe(2);
    expect(out.filter((e) => e.sender === a!.senderId)).toHaveLength(5);
    anchor.cancel();
  });

  it('a consumer that stops reading holds each sender to its own window C; reading releases every sender', async () => {
    const C = 4;
    const { consumer, producer } = await pair({ initialCredit: C });
    const anchor = consumer.createMpscAnchor<string>();
    const senders = await Promise.all([0, 1, 2].map(() => producer.attachMpscAnchor<string>(anchor.handle)));
    const N = 20;
    for (const s of senders) for (let k = 0; k < N; k++) expect(s.trySend(`${s.senderId}:${k}`)).toBe(true);
    await waitFor(() => anchor.buffered === 3 * C, 2_000, 'C records per sender delivered', 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(anchor.buffered).toBe(3 * C);
    expect(producer.metricsRegistry.withheldRecords).toBe(3 * (N - C));
    anchor.seal();
    const reading = readEvents(anchor);
    for (const s of senders) await s.finalize();
    const items = bySender(await reading);
    for (const s of senders)
      expect(items.get(s.senderId)).toEqual(Array.from({ length: N }, (_, k) => `${s.senderId}:${k}`));
    expect(producer.metricsRegistry.withheldRecords).toBe(0);
  });

  it('cancel closes every sender (CloseSlot{UnknownSlot} with LifecycleSlot{cancel} to each remote one): each next send fails ERR_STREAM_CANCELLED', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createMpscAnchor<string>();
    const remote = await Promise.all([
      producer.attachMpscAnchor<string>(anchor.handle),
      producer.attachMpscAnchor<string>(anchor.handle),
    ]);
    const local = await consumer.attachMpscAnchor<string>(anchor.handle);
    for (const s of [...remote, local]) await s.send('x');
    await waitFor(() => anchor.buffered === 3, 2_000, 'first records', 1);
    anchor.cancel();
    expect(anchor.finished).toBe(true);
    expect(await anchor.next()).toEqual({ done: true, value: undefined });
    await Promise.all(remote.map(cancelled));
    for (const s of remote) await expect(s.send('y')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    await expect(local.send('y')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    expect(
      consumer.metrics()[
        'velo_streaming_anchor_operations_total{operation="cancel",outcome="success",transport_scheme="mpsc"}'
      ],
    ).toBe(1);
    await waitFor(
      () => consumer.metricsRegistry.liveSlots + producer.metricsRegistry.liveSlots === 0,
      2_000,
      'slots closed',
      1,
    );
    await expect(producer.attachMpscAnchor(anchor.handle)).rejects.toMatchObject({ code: 'ERR_ATTACH_REFUSED' });
  });

  it('a sender that leaves without a terminal is a dropped event for it alone; SenderError and detach are per-sender events', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createMpscAnchor<string>();
    const abort = new AbortController();
    const gone = await producer.attachMpscAnchor<string>(anchor.handle, { signal: abort.signal });
    const stays = await producer.attachMpscAnchor<string>(anchor.handle);
    const leaves = await producer.attachMpscAnchor<string>(anchor.handle);
    const local = await consumer.attachMpscAnchor<string>(anchor.handle, { signal: abort.signal });
    await gone.send('g1');
    await local.send('l1');
    abort.abort();
    await stays.error('hiccup');
    await stays.send('s1');
    await leaves.detach();
    const seen: MpscEvent<string>[] = [];
    while (seen.filter((e) => e.kind === 'dropped' || e.kind === 'detached').length < 3) {
      const r = await anchor.next();
      seen.push(r.value as MpscEvent<string>);
    }
    const of = (s: MpscSender<string>) =>
      seen
        .filter((e) => e.sender === s.senderId)
        .map((e) =>
          e.kind === 'dropped'
            ? `dropped:${e.error.code}`
            : e.kind === 'item'
              ? e.value
              : e.kind === 'error'
                ? `error:${e.message}`
                : e.kind,
        );
    expect(of(gone)).toEqual(['g1', 'dropped:ERR_SENDER_DROPPED']);
    expect(of(local)).toEqual(['l1', 'dropped:ERR_SENDER_DROPPED']);
    expect(of(leaves)).toEqual(['detached']);
    // The anchor goes on: the remaining sender still delivers.
    await stays.send('s2');
    await stays.finalize();
    anchor.seal();
    const rest = await readEvents(anchor);
    expect([...of(stays), ...rest.map((e) => (e.kind === 'item' ? e.value : e.kind))]).toEqual([
      'error:hiccup',
      's1',
      's2',
      'finalized',
    ]);
  });

  it("requestStop reaches every remote sender's stopSignal without cancelling it", async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createMpscAnchor<string>();
    const senders = await Promise.all([0, 1].map(() => producer.attachMpscAnchor<string>(anchor.handle)));
    for (const s of senders) await s.send('x'); // the OpenSlot claims the bind
    await waitFor(() => anchor.buffered === 2, 2_000, 'claimed', 1);
    anchor.requestStop();
    await waitFor(() => senders.every((s) => s.stopSignal.aborted), 2_000, 'stop signals', 1);
    expect(senders.some((s) => s.cancelSignal.aborted)).toBe(false);
    anchor.cancel();
  });

  it("handles and operations: prebind refuses an MPSC anchor; the two attach kinds refuse each other's handles", async () => {
    const { consumer, producer } = await pair();
    const mpsc = consumer.createMpscAnchor();
    const spsc = consumer.createAnchor();
    expect(consumer.prebindAnchor(mpsc)).toBeUndefined();
    expect(
      consumer.metrics()[
        'velo_streaming_anchor_operations_total{operation="prebind",outcome="error",transport_scheme="mux"}'
      ],
    ).toBe(1);
    await expect(producer.attachAnchor(mpsc.handle)).rejects.toThrow(/attachMpscAnchor/);
    await expect(consumer.attachAnchor(mpsc.handle)).rejects.toMatchObject({ code: 'ERR_ATTACH_REFUSED' });
    await expect(producer.attachMpscAnchor(spsc.handle)).rejects.toThrow(/attachAnchor/);
    await expect(consumer.attachMpscAnchor(spsc.handle)).rejects.toMatchObject({ code: 'ERR_ATTACH_REFUSED' });
    // A peer that talks the wire directly gets the same refusals from the handlers.
    const h = parseHandle(mpsc.handle);
    const s = parseHandle(spsc.handle);
    const peer = consumer.workerId.toString(16).padStart(16, '0');
    const body = (hi: bigint, lo: bigint) => ({ handle: u128(hi, lo), supported_transport_keys: ['messenger-mux-v2'] });
    const viaMessenger = nodesMessenger(producer);
    expect(await viaMessenger.request(peer, '_anchor_attach', body(h.workerId, h.localId))).toEqual({
      Err: { reason: expect.stringMatching(/MPSC/) },
    });
    expect(await viaMessenger.request(peer, '_mpsc_anchor_attach', body(s.workerId, s.localId))).toEqual({
      Err: { reason: expect.stringMatching(/not MPSC/) },
    });
    expect(await viaMessenger.request(peer, '_mpsc_anchor_attach', { handle: 'nope' })).toMatchObject({
      Err: { reason: expect.stringMatching(/malformed/) },
    });
    mpsc.cancel();
    spsc.cancel();
  });

  it('maxSenders and seal refuse further attaches', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createMpscAnchor<string>({ maxSenders: 2 });
    await producer.attachMpscAnchor(anchor.handle);
    await consumer.attachMpscAnchor(anchor.handle);
    await expect(producer.attachMpscAnchor(anchor.handle)).rejects.toThrow(/maximum of 2 senders/);
    await expect(consumer.attachMpscAnchor(anchor.handle)).rejects.toThrow(/maximum of 2 senders/);
    const other = consumer.createMpscAnchor<string>();
    other.seal();
    await expect(producer.attachMpscAnchor(other.handle)).rejects.toThrow(/sealed/);
    expect(await other.next()).toEqual({ done: true, value: undefined }); // sealed with no sender: ended
    expect(() => consumer.createMpscAnchor({ maxSenders: 0 })).toThrow(/maxSenders/);
    anchor.cancel();
  });

  it('with no sender for the unattached timeout the anchor ends (done); the timer restarts when the last sender leaves', async () => {
    // Long enough that the attach below (a round trip) does not race it on a loaded machine.
    const { consumer, producer } = await pair({}, { unattachedTimeout: 300 });
    const never = consumer.createMpscAnchor<string>();
    expect(await never.next()).toEqual({ done: true, value: undefined });
    expect(never.finished).toBe(true);
    const anchor = consumer.createMpscAnchor<string>();
    const s = await producer.attachMpscAnchor<string>(anchor.handle);
    // Attached past the timeout: the anchor lives on.
    await new Promise((r) => setTimeout(r, 600));
    await s.send('a');
    await s.finalize();
    expect(await readEvents(anchor)).toEqual([
      { kind: 'item', sender: s.senderId, value: 'a' },
      { kind: 'finalized', sender: s.senderId },
    ]);
    expect(consumer.metricsRegistry.activeAnchors).toBe(0);
  });

  it('_mpsc_anchor_detach removes one sender (the consumer reads detached; its next send fails); _mpsc_anchor_cancel cancels the anchor', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createMpscAnchor<string>();
    const a = await producer.attachMpscAnchor<string>(anchor.handle);
    const b = await producer.attachMpscAnchor<string>(anchor.handle);
    await a.send('a1');
    await b.send('b1');
    await waitFor(() => anchor.buffered === 2, 2_000, 'claimed', 1);
    const h = parseHandle(anchor.handle);
    const m = nodesMessenger(producer);
    const peer = consumer.workerId.toString(16).padStart(16, '0');
    expect(
      await m.request(peer, '_mpsc_anchor_detach', {
        handle: u128(h.workerId, h.localId),
        sender_id: `0x${a.senderId.toString(16)}`,
      }),
    ).toEqual({ Ok: null });
    expect(
      await m.request(peer, '_mpsc_anchor_detach', { handle: u128(h.workerId, h.localId), sender_id: '0x999' }),
    ).toMatchObject({ Err: {} });
    const seen: MpscEvent<string>[] = [];
    while (!seen.some((e) => e.kind === 'detached')) seen.push((await anchor.next()).value as MpscEvent<string>);
    expect(seen.filter((e) => e.sender === a.senderId).map((e) => e.kind)).toEqual(['item', 'detached']);
    await cancelled(a);
    await expect(a.send('a2')).rejects.toMatchObject({ code: 'ERR_UNKNOWN_SLOT' });
    expect(await m.request(peer, '_mpsc_anchor_cancel', { handle: u128(h.workerId, h.localId) })).toEqual({ Ok: null });
    expect(anchor.finished).toBe(true);
    await cancelled(b);
    await expect(b.send('b2')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
  });

  it('the mux watchdog drops a silent remote sender alone; a same-worker sender goes on', async () => {
    const { consumer, producer, b } = await pair({ heartbeatInterval: 20, creditSweepInterval: 5 });
    const anchor = consumer.createMpscAnchor<string>();
    const silent = await producer.attachMpscAnchor<string>(anchor.handle);
    const local = await consumer.attachMpscAnchor<string>(anchor.handle);
    await silent.send('s1');
    await waitFor(() => anchor.buffered === 1, 2_000, 'claimed', 1);
    b.holdDelivery(); // the producer's batches (heartbeats included) stop reaching the consumer
    const seen: MpscEvent<string>[] = [];
    while (!seen.some((e) => e.kind === 'dropped')) seen.push((await anchor.next()).value as MpscEvent<string>);
    expect(seen.map((e) => e.kind)).toEqual(['item', 'dropped']);
    expect(seen[1]).toMatchObject({ sender: silent.senderId, error: { code: 'ERR_SENDER_DROPPED' } });
    await local.send('l1');
    await local.finalize();
    anchor.seal();
    expect((await readEvents(anchor)).map((e) => e.kind)).toEqual(['item', 'finalized']);
  });

  it('closing the consumer node fails the anchor with ERR_SENDER_DROPPED', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createMpscAnchor<string>();
    await producer.attachMpscAnchor<string>(anchor.handle);
    const pending = anchor.next();
    await consumer.close();
    await expect(pending).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
  });
});

describe('keyed MPSC attach (the reference attach_mpsc_anchor_keyed)', () => {
  it('attachMpscAnchorKeyed puts each sender on lane splitmix64(key) % lanes; unkeyed senders spread by load', async () => {
    const [a, b] = LoopMessenger.pair({ lanes: 8 }, { lanes: 8 });
    const consumer = await createNode({ messenger: a });
    const producer = await createNode({ messenger: b });
    nodes.push(consumer, producer);
    const anchor = consumer.createMpscAnchor<string>();
    const keys = [1n, 0xdead_beefn, 0x1234_5678_9abc_def0n];
    const keyed = [];
    for (const k of keys) keyed.push(await producer.attachMpscAnchorKeyed<string>(anchor.handle, k));
    for (const s of keyed) await s.send('x');
    // The lane each sender's OpenSlot rode, in attach order.
    const openLanes = b.sent.flatMap((s) =>
      decodeBatch(s.payload)
        .records.filter((r) => r.type === RecordType.OpenSlot)
        .map(() => s.lane),
    );
    expect(openLanes).toEqual(keys.map((k) => laneForKey(k, 8)));
    anchor.seal();
    for (const s of keyed) await s.finalize();
    const events = await readEvents(anchor);
    expect(events.filter((e) => e.kind === 'item')).toHaveLength(3);
  });
});
