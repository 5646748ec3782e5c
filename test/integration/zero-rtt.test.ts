// Issue 5, zero-RTT tickets over TCP (8 lanes): opens put zero `_anchor_attach` messages on the wire
// (counted by a tap on the TCP adapter of both nodes), the first token needs no consumer → producer
// message at all (shown by muting the consumer's whole outbound side), the ticket quotes the exact
// limits the buffer was sized from and no CreditUpdate follows the claim, a missing or mistyped
// ticket field is a clear error, and an unclaimed pre-bind is reaped by the accept window.
import { decode as msgpackDecode, encode as msgpackEncode } from '@msgpack/msgpack';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeTicket, parseTicket } from '../../src/stream/ticket.ts';
import type { LanemuxNode } from '../../src/stream/node.ts';
import { RecordType } from '../../src/wire/constants.ts';
import { closeAll } from './helpers.ts';
import { readAll } from '../support/read-all.ts';
import { waitFor } from '../support/wait-for.ts';
import { Tap, tappedPair } from './wire-tap.ts';

afterEach(closeAll);

const b64url = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');
const ticketBody = (ticket: string): Record<string, unknown> =>
  msgpackDecode(Buffer.from(ticket, 'base64url')) as Record<string, unknown>;
const metric = (n: LanemuxNode, name: string): number => n.metrics()[name] ?? 0;

describe('zero-RTT opens over TCP (8 lanes)', () => {
  it('200 zero-RTT opens put zero attach messages on the wire; 200 ordinary attaches put 200 (the counter works)', async () => {
    const { consumer, producer, ctap, ptap } = await tappedPair();
    const anchors = Array.from({ length: 200 }, () => consumer.createAnchor<number>());
    const tickets = anchors.map((a) => consumer.prebindAnchor(a)!);
    const senders = await Promise.all(anchors.map((a, i) => producer.openAnchorStream<number>(a.handle, tickets[i]!)));
    const reads = anchors.map((a) => readAll(a));
    senders.forEach((s, i) => void s.send(i));
    await Promise.all(senders.map((s) => s.finalize()));
    (await Promise.all(reads)).forEach((items, i) => expect(items).toEqual([i]));
    expect(ptap.requests('out', '_anchor_attach').length, 'attach requests written by the producer').toBe(0);
    expect(ctap.requests('in', '_anchor_attach').length, 'attach requests read by the consumer').toBe(0);
    expect(ctap.requests('in').length, 'no request of any kind').toBe(0);
    // Each stream's OpenSlot claimed its pre-bind: 200 OpenSlots with the tickets' sessions.
    const opens = Tap.records(ptap.msgs.filter((m) => m.dir === 'out')).filter((r) => r.type === RecordType.OpenSlot);
    expect(new Set(opens.map((r) => r.sessionId)).size).toBe(200);
    expect(opens.map((r) => r.sessionId).sort()).toEqual(
      tickets.map((t) => BigInt(ticketBody(t)['routing_session_id'] as string)).sort(),
    );
    expect(
      metric(
        producer,
        'velo_streaming_anchor_operations_total{operation="open",outcome="success",transport_scheme="mux"}',
      ),
    ).toBe(200);
    expect(
      metric(
        consumer,
        'velo_streaming_anchor_operations_total{operation="prebind",outcome="success",transport_scheme="mux"}',
      ),
    ).toBe(200);

    // Control: the same count with ordinary attaches.
    const plain = Array.from({ length: 200 }, () => consumer.createAnchor<number>());
    const ps = await Promise.all(plain.map((a) => producer.attachAnchor<number>(a.handle)));
    const pr = plain.map((a) => readAll(a));
    await Promise.all(ps.map((s) => s.finalize()));
    await Promise.all(pr);
    expect(ptap.requests('out', '_anchor_attach').length).toBe(200);
    expect(ctap.requests('in', '_anchor_attach').length).toBe(200);
  });

  it.each([false, true])(
    'the first token needs no round trip: with every consumer → producer message swallowed, a ticket stream still delivers (asyncOpenAck %s)',
    async (asyncOpenAck) => {
      const { consumer, producer, ctap, ptap } = await tappedPair({ initialCredit: 4, asyncOpenAck });
      const anchor = consumer.createAnchor<string>();
      const ticket = consumer.prebindAnchor(anchor)!;
      const mark = ptap.msgs.length;
      ctap.mute = true; // from here on the consumer cannot say anything to the producer
      const s = await producer.openAnchorStream<string>(anchor.handle, ticket);
      await s.send('first');
      await anchor.waitAvailable();
      // The first token is here. The producer heard nothing in between, and wrote only batches (and
      // the PINGs behind them that let its replay log go, docs/protocol.md §8.3: nothing waits on them).
      expect(
        ptap.msgs.slice(mark).filter((m) => m.dir === 'in'),
        'messages the producer received',
      ).toEqual([]);
      const written = ptap.msgs.slice(mark).filter((m) => m.dir === 'out' && m.kind !== 0x07);
      expect(
        written.every((m) => m.kind === 0x01),
        'producer wrote only batches',
      ).toBe(true);
      const recs = Tap.records(written);
      expect(recs[0]!.type, 'OpenSlot first').toBe(RecordType.OpenSlot);
      expect(
        recs.find((r) => r.type === RecordType.Data),
        'the first data record followed the OpenSlot without waiting',
      ).toBeDefined();
      expect(written.length, 'OpenSlot batch + data batch at most').toBeLessThanOrEqual(2);
      // The rest of the window and the terminal also need nothing back.
      for (const t of ['b', 'c', 'd']) await s.send(t);
      await s.finalize();
      expect(await readAll(anchor)).toEqual(['first', 'b', 'c', 'd']);
      expect(ctap.msgs.filter((m) => m.dir === 'out' && !m.muted)).toEqual([]);
      ctap.mute = false;

      // Contrast: an ordinary attach cannot even start while the consumer is mute.
      ctap.mute = true;
      const other = consumer.createAnchor();
      await expect(producer.attachAnchor(other.handle, { timeoutMs: 200 })).rejects.toBeDefined();
      ctap.mute = false;
    },
  );

  it('the ticket quotes the limits the buffer was sized from; no CreditUpdate on claim; a slot budget of 0 resolves to 1 MiB', async () => {
    const { consumer, producer, ctap } = await tappedPair({
      initialCredit: 5,
      slotByteBudget: 0,
      heartbeatInterval: 7_000,
    });
    const anchor = consumer.createAnchor<number>();
    const ticket = consumer.prebindAnchor(anchor)!;
    const body = ticketBody(ticket);
    expect(body).toEqual({
      streaming_transport_key: 'messenger-mux-v2',
      heartbeat_interval_ms: 7_000,
      routing_session_id: `0x${anchor.bind!.sessionId.toString(16)}`,
      initial_credit: 5,
      slot_byte_budget: 1_048_576,
      ...(anchor.bind!.lane !== 0 ? { lane: anchor.bind!.lane } : {}),
      anchor_id: `0x${anchor.localId.toString(16)}`,
    });
    expect(anchor.bind!.buffer.capacity).toBe(6); // C + 1
    const mark = ctap.msgs.length;
    const s = await producer.openAnchorStream<number>(anchor.handle, ticket);
    // Nothing is read: the producer may have exactly C data records out; the rest wait with it.
    for (let i = 0; i < 9; i++) s.trySend(i);
    await waitFor(() => anchor.bind?.buffer.length === 5, 5_000, 'C records delivered');
    expect(producer.metricsRegistry.withheldRecords).toBe(4);
    const credit = Tap.records(ctap.msgs.slice(mark).filter((m) => m.dir === 'out')).filter(
      (r) => r.type === RecordType.CreditUpdate,
    );
    expect(credit, 'no CreditUpdate on the claim').toEqual([]);
    const read = readAll(anchor);
    await s.finalize();
    expect(await read).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it("a lane-0 ticket has the five pre-lanes fields then `anchor_id` (the encoder's bytes); another lane adds `lane` before it", async () => {
    const { consumer } = await tappedPair();
    const a0 = consumer.createAnchor();
    const t0 = consumer.prebindAnchor(a0)!;
    const a1 = consumer.createAnchor();
    const t1 = consumer.prebindAnchor(a1)!;
    expect([a0.bind!.lane, a1.bind!.lane]).toEqual([0, 1]);
    const b0 = ticketBody(t0);
    expect(Object.keys(b0)).toEqual([
      'streaming_transport_key',
      'heartbeat_interval_ms',
      'routing_session_id',
      'initial_credit',
      'slot_byte_budget',
      'anchor_id',
    ]);
    // The same values through the MessagePack encoder: the same bytes.
    expect(t0).toBe(b64url(msgpackEncode(b0)));
    // Serialisable both ways: the exported codec round-trips both tickets.
    expect(encodeTicket(parseTicket(t0))).toBe(t0);
    expect(encodeTicket(parseTicket(t1))).toBe(t1);
    expect(Object.keys(ticketBody(t1))).toEqual([
      'streaming_transport_key',
      'heartbeat_interval_ms',
      'routing_session_id',
      'initial_credit',
      'slot_byte_budget',
      'lane',
      'anchor_id',
    ]);
    expect(ticketBody(t1)['lane']).toBe(1);
  });

  it('a missing or mistyped ticket field is a clear ERR_INVALID_TICKET naming the field; a missing lane is lane 0', async () => {
    const { consumer, producer } = await tappedPair();
    const anchor = consumer.createAnchor<string>();
    const good = ticketBody(consumer.prebindAnchor(anchor)!);
    const encode = (o: Record<string, unknown>) => b64url(msgpackEncode(o));
    for (const field of [
      'streaming_transport_key',
      'heartbeat_interval_ms',
      'routing_session_id',
      'initial_credit',
      'slot_byte_budget',
    ]) {
      const { [field]: _dropped, ...rest } = good;
      const err = await producer.openAnchorStream(anchor.handle, encode(rest)).then(
        () => null,
        (e: unknown) => e as { code?: string; message?: string },
      );
      expect(err, `missing ${field}`).toMatchObject({ code: 'ERR_INVALID_TICKET' });
      expect(err!.message, `missing ${field}`).toContain(field);
    }
    const mistyped: Array<[string, unknown]> = [
      ['streaming_transport_key', 7],
      ['heartbeat_interval_ms', '5000'],
      ['routing_session_id', 12],
      ['routing_session_id', 'zz'],
      ['initial_credit', -1],
      ['initial_credit', 1.5],
      ['slot_byte_budget', 'big'],
      ['lane', 16],
      ['lane', 'one'],
    ];
    for (const [field, value] of mistyped) {
      const err = await producer.openAnchorStream(anchor.handle, encode({ ...good, [field]: value })).then(
        () => null,
        (e: unknown) => e as { code?: string; message?: string },
      );
      expect(err, `${field} = ${JSON.stringify(value)}`).toMatchObject({ code: 'ERR_INVALID_TICKET' });
      expect(err!.message).toContain(field);
    }
    await expect(producer.openAnchorStream(anchor.handle, 'not a ticket!')).rejects.toMatchObject({
      code: 'ERR_INVALID_TICKET',
    });
    await expect(producer.openAnchorStream(anchor.handle, encode({ ...good, initial_credit: 0 }))).rejects.toThrow(
      /initial_credit = 0/,
    );
    expect(producer.metricsRegistry.liveSlots, 'no slot opened by a refused ticket').toBe(0);
    // None of that touched the pre-bind: the real ticket (lane omitted when 0) still opens it.
    const { lane: _l, ...noLane } = good;
    const s = await producer.openAnchorStream<string>(
      anchor.handle,
      encode(good['lane'] === undefined ? noLane : good),
    );
    const read = readAll(anchor);
    await s.send('ok');
    await s.finalize();
    expect(await read).toEqual(['ok']);
  });

  it('heartbeats follow the ticket: a waiting pre-bind is not a watchdog miss, and a claimed idle ticket stream stays alive', async () => {
    const mux = { heartbeatInterval: 40, creditSweepInterval: 10 };
    const { consumer, producer } = await tappedPair(mux);
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    expect(ticketBody(ticket)['heartbeat_interval_ms']).toBe(40);
    // Six heartbeat windows with no OpenSlot (the watchdog fires after 3): the pre-bind waits.
    await new Promise((r) => setTimeout(r, 250));
    expect(anchor.finished).toBe(false);
    const s = await producer.openAnchorStream<string>(anchor.handle, ticket);
    await s.send('before');
    // Six more windows of application silence: the producer heartbeats at the ticket's interval.
    await new Promise((r) => setTimeout(r, 250));
    expect(metric(consumer, 'velo_streaming_heartbeat_watchdog_firings_total')).toBe(0);
    await s.send('after');
    await s.finalize();
    expect(await readAll(anchor)).toEqual(['before', 'after']);
  });

  it('an unclaimed pre-bind is reaped by the accept window: the consumer ends Dropped, the metric counts it, a late open gets UnknownSlot', async () => {
    const mux = { prebindTimeout: 150, creditSweepInterval: 20 };
    const { consumer, producer } = await tappedPair(mux);
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    const t0 = performance.now();
    await expect(anchor.next()).rejects.toMatchObject({ code: 'ERR_SENDER_DROPPED' });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    expect(metric(consumer, 'velo_streaming_unclaimed_bind_reaped_total')).toBe(1);
    const late = await producer.openAnchorStream<string>(anchor.handle, ticket);
    await waitFor(() => late.closed, 5_000, 'late sender closed');
    await expect(late.send('x')).rejects.toMatchObject({ code: 'ERR_UNKNOWN_SLOT' });
    expect(late.cancelSignal.aborted).toBe(true);
  });
});
