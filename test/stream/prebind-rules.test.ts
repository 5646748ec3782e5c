// Issue 5, the pre-bind rules (docs/protocol.md §8, zero-RTT stream setup) over
// the in-process messenger: adopt, refuse after claim, refuse-and-release for a sender without the
// mux key, same-worker release, drop (unclaimed: released at once; claimed: CloseSlot{UnknownSlot}),
// detach, the accept window as one deadline queue expired by the sweep, and when prebind declines.
import { afterEach, describe, expect, it } from 'vitest';
import { createNode } from '../../src/stream/node.ts';
import type { LanemuxNode, NodeOptions } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import { decodeBatch } from '../../src/wire/decoder.ts';
import { CloseReason, RecordType } from '../../src/wire/constants.ts';
import { LoopMessenger } from '../support/loop-messenger.ts';
import type { LoopOptions } from '../support/loop-messenger.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';
import { parseTicket } from '../../src/stream/ticket.ts';
import { laneForKey } from '../../src/wire/lane-hash.ts';
import { readAll } from '../support/read-all.ts';

const nodes: LanemuxNode[] = [];
afterEach(async () => {
  for (const n of nodes.splice(0)) await n.close();
});

type Extra = Omit<NodeOptions, 'messenger' | 'transports'>;

/** A consumer and a producer on a loop messenger pair; the producer's requests are counted. */
async function pair(options: { consumer?: Extra; producer?: Extra; loop?: LoopOptions } = {}) {
  const [mc, mp] = LoopMessenger.pair(options.loop, options.loop);
  const requests: Array<{ name: string; body: unknown; answer: unknown }> = [];
  const request = mp.request.bind(mp);
  mp.request = async (peer, name, body, o) => {
    const answer = await request(peer, name, body, o);
    requests.push({ name, body, answer });
    return answer;
  };
  const consumer = await createNode({ messenger: mc, ...options.consumer });
  const producer = await createNode({ messenger: mp, ...options.producer });
  nodes.push(consumer, producer);
  return { consumer, producer, mc, mp, requests };
}

/** Records of the batches a loop messenger wrote. */
function sentRecords(m: LoopMessenger) {
  return m.sent.flatMap((b) => decodeBatch(b.payload).records.map((r) => ({ ...r, lane: b.lane })));
}

const hex = (v: bigint) => `0x${v.toString(16)}`;
const opsMetric = (n: LanemuxNode, op: string, outcome: string, scheme = 'mux') =>
  n.metrics()[
    `velo_streaming_anchor_operations_total{operation="${op}",outcome="${outcome}",transport_scheme="${scheme}"}`
  ] ?? 0;

async function closedWith(sender: StreamSender<unknown>, code: string): Promise<void> {
  if (!sender.cancelSignal.aborted)
    await new Promise<void>((r) => sender.cancelSignal.addEventListener('abort', () => r(), { once: true }));
  expect(sender.closed).toBe(true);
  await expect(sender.send('after')).rejects.toMatchObject({ code });
}

describe('pre-bind rules', () => {
  it('an attach that presents the ticket adopts the unclaimed pre-bind: the ticket session and terms, the same bind and deadline', async () => {
    const { consumer, producer, mp, requests } = await pair({ consumer: { mux: { initialCredit: 6 } } });
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    const bind = anchor.bind!;
    const deadline = bind.deadline;
    const s = await producer.attachAnchor<string>(anchor.handle, { ticket });
    expect(anchor.bind, 'no second bind').toBe(bind);
    expect(bind.deadline, 'the accept window is not restarted').toBe(deadline);
    const ok = (requests.at(-1)!.answer as { Ok: Record<string, unknown> }).Ok;
    expect(ok['routing_session_id']).toBe(hex(bind.sessionId));
    expect(ok['initial_credit']).toBe(6);
    expect(ok['slot_byte_budget']).toBe(bind.slotByteBudget);
    // Its OpenSlot names the ticket's session and claims the bind.
    const open = sentRecords(mp).find((r) => r.type === RecordType.OpenSlot)!;
    expect(open.sessionId).toBe(bind.sessionId);
    const read = readAll(anchor);
    await s.send('adopted');
    await s.finalize();
    expect(await read).toEqual(['adopted']);
    // The ticket itself is now spent: a stray open gets UnknownSlot.
    const stray = await producer.openAnchorStream(anchor.handle, ticket);
    await closedWith(stray, 'ERR_UNKNOWN_SLOT');
  });

  it('an attach that knows only the handle neither adopts nor releases the pre-bind (mux or not); the ticket holder still streams', async () => {
    const { consumer, producer, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    const bind = anchor.bind!;
    await expect(producer.attachAnchor<string>(anchor.handle)).rejects.toMatchObject({
      code: 'ERR_ATTACH_REFUSED',
      message: /pre-bound/,
    });
    const noMux = {
      handle: { hi: hex(consumer.workerId), lo: hex(anchor.localId) },
      supported_transport_keys: ['tcp-stream'],
    };
    expect(
      ((await mp.request(mc_id(consumer), '_anchor_attach', noMux)) as { Err?: { reason: string } }).Err?.reason,
    ).toMatch(/pre-bound/);
    const guessed = { ...noMux, session_id: hex(bind.sessionId ^ 1n), supported_transport_keys: ['messenger-mux-v2'] };
    expect(
      ((await mp.request(mc_id(consumer), '_anchor_attach', guessed)) as { Err?: { reason: string } }).Err?.reason,
    ).toMatch(/pre-bound/);
    expect(anchor.bind).toBe(bind);
    expect(bind.ended).toBe(false);
    const read = readAll(anchor);
    const s = await producer.openAnchorStream<string>(anchor.handle, ticket);
    await s.send('mine');
    await s.finalize();
    expect(await read).toEqual(['mine']);
  });

  it('an attach after the OpenSlot claimed the pre-bind is refused', async () => {
    const { consumer, producer } = await pair();
    const anchor = consumer.createAnchor<string>();
    const s = await producer.openAnchorStream<string>(anchor.handle, consumer.prebindAnchor(anchor)!);
    await s.send('x');
    expect(anchor.bind!.claimed).toBe(true);
    await expect(producer.attachAnchor(anchor.handle)).rejects.toMatchObject({
      code: 'ERR_ATTACH_REFUSED',
      message: expect.stringMatching(/pre-bound/),
    });
    expect(opsMetric(consumer, 'attach', 'error', 'none')).toBe(1);
    // The claimed stream is untouched.
    const read = readAll(anchor);
    await s.send('y');
    await s.finalize();
    expect(await read).toEqual(['x', 'y']);
  });

  it('a ticket holder that does not offer the mux key is refused naming messenger-mux-v2, the pre-bind is released, and the next attach binds afresh', async () => {
    const { consumer, producer, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    const bind = anchor.bind!;
    // A producer without the mux advertises only its per-stream key (and names the ticket's session).
    const body = {
      handle: { hi: hex(consumer.workerId), lo: hex(anchor.localId) },
      session_id: hex(bind.sessionId),
      supported_transport_keys: ['tcp-stream'],
    };
    const answer = (await mp.request(mc_id(consumer), '_anchor_attach', body)) as { Err?: { reason: string } };
    expect(answer.Err?.reason).toMatch(/messenger-mux-v2/);
    expect(bind.ended, 'the pre-bind is released').toBe(true);
    // The ticket no longer opens anything.
    const stray = await producer.openAnchorStream(anchor.handle, ticket);
    await closedWith(stray, 'ERR_UNKNOWN_SLOT');
    // A mux sender now attaches with a fresh bind (new session).
    const s = await producer.attachAnchor<string>(anchor.handle);
    expect(anchor.bind).not.toBe(bind);
    expect(anchor.bind!.sessionId).not.toBe(bind.sessionId);
    const read = readAll(anchor);
    await s.send('fresh');
    await s.finalize();
    expect(await read).toEqual(['fresh']);
  });

  it('an anchor whose pre-bind a refused (non-mux) attach released is not left without a timer: it ends when nobody attaches', async () => {
    const { consumer, mp } = await pair({ consumer: { unattachedTimeout: 60, mux: { creditSweepInterval: 10 } } });
    const anchor = consumer.createAnchor<string>();
    consumer.prebindAnchor(anchor);
    // Past the unattached timeout while pre-bound: the pre-bind keeps the anchor (rightly).
    await new Promise((r) => setTimeout(r, 120));
    expect(anchor.finished).toBe(false);
    const body = {
      handle: { hi: hex(consumer.workerId), lo: hex(anchor.localId) },
      session_id: hex(anchor.bind!.sessionId),
      supported_transport_keys: ['tcp-stream'],
    };
    const answer = (await mp.request(mc_id(consumer), '_anchor_attach', body)) as { Err?: { reason: string } };
    expect(answer.Err).toBeDefined();
    expect(anchor.feedKind).toBe('none');
    // No sender, no bind: the unattached timer must run again, or the anchor waits forever.
    const deadline = performance.now() + 1_000;
    while (!anchor.finished && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(anchor.finished, 'the anchor ended within 1 s of the release (unattached timeout 60 ms)').toBe(true);
    await expect(anchor.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
  });

  it('a same-worker attach releases an unclaimed pre-bind (the remote ticket then gets UnknownSlot); after a claim it is AlreadyAttached', async () => {
    const { consumer, producer } = await pair();
    const a = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(a)!;
    const bind = a.bind!;
    const local = await consumer.attachAnchor<string>(a.handle);
    expect(local.negotiatedTransport).toBeNull();
    expect(bind.ended).toBe(true);
    const stray = await producer.openAnchorStream(a.handle, ticket);
    await closedWith(stray, 'ERR_UNKNOWN_SLOT');
    const read = readAll(a);
    await local.send('local');
    await local.finalize();
    expect(await read).toEqual(['local']);

    const b = consumer.createAnchor<string>();
    const remote = await producer.openAnchorStream<string>(b.handle, consumer.prebindAnchor(b)!);
    await remote.send('claimed');
    expect(b.bind!.claimed).toBe(true);
    await expect(consumer.attachAnchor(b.handle)).rejects.toMatchObject({ code: 'ERR_ALREADY_ATTACHED' });
    const readB = readAll(b);
    await remote.finalize();
    expect(await readB).toEqual(['claimed']);
  });

  it('dropping an anchor releases its unclaimed pre-bind at once (its lane load too); the ticket then gets UnknownSlot', async () => {
    const { consumer, producer } = await pair({ loop: { lanes: 4 } });
    const first = consumer.createAnchor();
    const ticket = consumer.prebindAnchor(first)!;
    expect(first.bind!.lane).toBe(0);
    const bind = first.bind!;
    first.cancel();
    expect(bind.ended, 'released synchronously').toBe(true);
    // Lane 0 is free again for the next unkeyed pre-bind.
    const next = consumer.createAnchor();
    consumer.prebindAnchor(next);
    expect(next.bind!.lane).toBe(0);
    const stray = await producer.openAnchorStream(first.handle, ticket);
    await closedWith(stray, 'ERR_UNKNOWN_SLOT');
  });

  it('cancelling (dropping) an anchor whose pre-bind was claimed posts CloseSlot{UnknownSlot} with its LifecycleSlot{cancel}: the idle producer learns without sending', async () => {
    const { consumer, producer, mc, mp } = await pair();
    const anchor = consumer.createAnchor<string>();
    const s = await producer.openAnchorStream<string>(anchor.handle, consumer.prebindAnchor(anchor)!);
    await s.send('one');
    const it = anchor[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ done: false, value: 'one' });
    const slot = sentRecords(mp).find((r) => r.type === RecordType.OpenSlot)!.slot;
    const sentBefore = mp.sent.length;
    anchor.cancel();
    await new Promise<void>((r) => s.cancelSignal.addEventListener('abort', () => r(), { once: true }));
    expect(mp.sent.length, 'the producer sent nothing to learn it').toBe(sentBefore);
    const closes = sentRecords(mc).filter((r) => r.type === RecordType.CloseSlot && r.slot === slot);
    expect(closes.map((r) => r.closeReason)).toEqual([CloseReason.UnknownSlot]);
    // cancel() is a LifecycleSlot{cancel} riding with the CloseSlot: the producer learns it was cancelled.
    await expect(s.send('two')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    expect(await s.retired()).toBe('Discarded');
    expect(producer.metricsRegistry.liveSlots).toBe(0);
    expect(consumer.metricsRegistry.liveSlots).toBe(0);
  });

  it('detach gives the pre-bind back and re-arms the unattached timer; the anchor can be attached again', async () => {
    // The unattached timer is short, the accept window long: a pre-bound anchor must not be ended by the former.
    // Short, but not so short that the re-attach below (a round trip) races it on a loaded machine.
    const { consumer, producer } = await pair({
      consumer: {
        unattachedTimeout: 400,
        mux: { acceptWindow: 60_000, prebindTimeout: 60_000, creditSweepInterval: 10 },
      },
    });
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    await new Promise((r) => setTimeout(r, 600));
    expect(anchor.finished, 'a pre-bound anchor is not unattached').toBe(false);
    const s = await producer.openAnchorStream<string>(anchor.handle, ticket);
    await s.send('a');
    await s.detach();
    const it = anchor[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ done: false, value: 'a' });
    // The old ticket no longer opens it.
    const stray = await producer.openAnchorStream(anchor.handle, ticket);
    await closedWith(stray, 'ERR_UNKNOWN_SLOT');
    // The reader takes the Detached (lanemux handles it where the consumer reads) and waits for a new sender.
    const pending = it.next();
    for (let i = 0; i < 100 && anchor.feedKind !== 'none'; i++) await new Promise((r) => setImmediate(r));
    expect(anchor.feedKind).toBe('none');
    expect(anchor.bind).toBeNull();
    const s2 = await producer.attachAnchor<string>(anchor.handle);
    await s2.send('b');
    await s2.detach();
    expect(await pending).toEqual({ done: false, value: 'b' });
    // After the second detach nobody attaches: the re-armed unattached timer ends the anchor.
    const t0 = performance.now();
    await expect(it.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(200);
  });

  it("credit is exact: the producer holds the ticket's C (not its own config) and gets no CreditUpdate on claim", async () => {
    const { consumer, producer, mc } = await pair({
      consumer: { mux: { initialCredit: 3 } },
      producer: { mux: { initialCredit: 50 } },
    });
    const anchor = consumer.createAnchor<number>();
    const ticket = consumer.prebindAnchor(anchor)!;
    expect(anchor.bind!.limit).toBe(3);
    expect(anchor.bind!.buffer.capacity).toBe(4);
    const s = await producer.openAnchorStream<number>(anchor.handle, ticket);
    for (let i = 0; i < 10; i++) s.trySend(i);
    for (let i = 0; i < 1_000 && anchor.bind!.buffer.length < 3; i++) await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r)); // room for a (wrong) extra grant to act
    expect(anchor.bind!.buffer.length, 'exactly C delivered while nothing is read').toBe(3);
    expect(producer.metricsRegistry.withheldRecords).toBe(7);
    expect(sentRecords(mc).filter((r) => r.type === RecordType.CreditUpdate)).toEqual([]);
    const read = readAll(anchor);
    await s.finalize();
    expect(await read).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(consumer.metrics()['velo_streaming_mux_reader_stall_total']).toBe(0);
  });

  it('prebind declines (undefined) for an anchor already pre-bound, attached or finished, counting {prebind, error}; without a mux it declines with no metric', async () => {
    const { consumer, producer } = await pair();
    const a = consumer.createAnchor();
    expect(consumer.prebindAnchor(a)).toBeTypeOf('string');
    expect(consumer.prebindAnchor(a)).toBeUndefined();
    const b = consumer.createAnchor();
    await producer.attachAnchor(b.handle);
    expect(consumer.prebindAnchor(b)).toBeUndefined();
    const c = consumer.createAnchor();
    c.cancel();
    expect(consumer.prebindAnchor(c)).toBeUndefined();
    expect(opsMetric(consumer, 'prebind', 'success')).toBe(1);
    expect(opsMetric(consumer, 'prebind', 'error')).toBe(3);

    const [m] = LoopMessenger.pair();
    const noMux = await createNode({ messenger: m, mux: { enabled: false } });
    nodes.push(noMux);
    expect(noMux.prebindAnchor(noMux.createAnchor())).toBeUndefined();
    expect(
      Object.keys(noMux.metrics()).filter((k) => k.includes('operation="prebind"') && (noMux.metrics()[k] ?? 0) > 0),
    ).toEqual([]);
  });
});

describe('the accept window', () => {
  it('is one deadline queue expired by the sweep (no timer per bind); expired pre-binds end Dropped and are counted', async () => {
    const rt = new ManualRuntime();
    const mux = { prebindTimeout: 10_000, creditSweepInterval: 200 };
    const { consumer, producer } = await pair({ consumer: { runtime: rt, mux }, producer: { runtime: rt, mux } });
    await rt.runMacrotasks();
    const timersBefore = rt.timerCount;
    const anchors = Array.from({ length: 500 }, () => consumer.createAnchor<string>());
    const tickets = anchors.map((a) => consumer.prebindAnchor(a)!);
    expect(rt.timerCount - timersBefore, 'timers added by 500 anchors + pre-binds').toBeLessThanOrEqual(2);
    // One of them is claimed before the window closes: it must survive.
    const s = await producer.openAnchorStream<string>(anchors[0]!.handle, tickets[0]!);
    await rt.runMacrotasks();
    await rt.advance(9_000);
    expect(anchors.some((a) => a.bind?.ended)).toBe(false);
    await rt.advance(1_000 + 200 + 1);
    expect(consumer.metrics()['velo_streaming_unclaimed_bind_reaped_total']).toBe(499);
    for (const a of anchors.slice(1)) await expect(a.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    const read = readAll(anchors[0]!);
    await s.send('survivor');
    await s.finalize();
    await rt.advance(10);
    expect(await read).toEqual(['survivor']);
  });

  it('an answered attach whose OpenSlot never arrives is reaped by its own accept window (mux.acceptWindow)', async () => {
    const { consumer, producer, mp } = await pair({
      consumer: { mux: { acceptWindow: 80, prebindTimeout: 60_000, creditSweepInterval: 10 } },
    });
    const anchor = consumer.createAnchor<string>();
    mp.holdDelivery(); // the producer's OpenSlot batch waits; the attach answer does not
    const s = await producer.attachAnchor<string>(anchor.handle);
    expect(anchor.bind!.claimed).toBe(false);
    await expect(anchor.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    expect(consumer.metrics()['velo_streaming_unclaimed_bind_reaped_total']).toBe(1);
    // The OpenSlot that finally arrives finds no bind: UnknownSlot, and the producer learns it.
    mp.resumeDelivery();
    await closedWith(s, 'ERR_UNKNOWN_SLOT');
  });

  it('by default lets a ticket wait in its envelope for 180 s (the issue: prebindTimeout, 180 s)', async () => {
    const rt = new ManualRuntime();
    const { consumer, producer } = await pair({ consumer: { runtime: rt }, producer: { runtime: rt } });
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    await rt.advance(179_000);
    expect(anchor.bind?.ended ?? true, 'pre-bind still waiting after 179 s').toBe(false);
    expect(consumer.metrics()['velo_streaming_unclaimed_bind_reaped_total']).toBe(0);
    const s = await producer.openAnchorStream<string>(anchor.handle, ticket);
    const read = readAll(anchor);
    await s.send('late but in time');
    await s.finalize();
    await rt.advance(10);
    expect(await read).toEqual(['late but in time']);
  });
});

/** The consumer's peer id as the producer's messenger knows it. */
function mc_id(consumer: LanemuxNode): string {
  return consumer.workerId.toString(16).padStart(16, '0');
}

describe('spec names (prebind_anchor_keyed, attach_anchor_keyed) and handle strings', () => {
  it('prebindAnchorKeyed / attachAnchorKeyed place the stream on splitmix64(key) % lanes, and prebindAnchor accepts the handle string', async () => {
    const { consumer, producer } = await pair({ loop: { lanes: 8 } });
    const key = 0x1234_5678_9abc_def0n;
    const a = consumer.createAnchor<string>();
    const t = consumer.prebindAnchorKeyed(a.handle, key)!;
    expect(parseTicket(t).lane).toBe(laneForKey(key, 8));
    const s = await producer.openAnchorStream<string>(a.handle, t);
    await s.send('k');
    expect((await a.next()).value).toBe('k');
    expect(a.credit).toMatchObject({ limit: consumer.config.initialCredit });
    const b = consumer.createAnchor<string>();
    const sb = await producer.attachAnchorKeyed<string>(b.handle, key);
    await sb.send('k2');
    expect((await b.next()).value).toBe('k2');
    expect(b.bind!.lane).toBe(laneForKey(key, 8));
    expect(consumer.prebindAnchor('lmx1.' + '0'.repeat(32))).toBeUndefined();
  });
});
