// The mux over real loopback TCP: many streams on one connection, Manual flushing, credit
// isolation of a stalled consumer, connection loss, a credit-violating peer, and the invariants.
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import {
  BatchEncoder,
  decodeBatch,
  FRAME_FINALIZED,
  RecordType,
  CloseReason,
  MESSENGER_MUX_KEY,
} from '../../src/wire/index.ts';
import { parseHandle } from '../../src/stream/handle.ts';
import type { StreamError } from '../../src/stream/errors.ts';
import { Relay, closeAll, open, parseTcp, suiteTransports, tcpNode } from './helpers.ts';
import { readAll } from '../support/read-all.ts';
import { waitFor } from '../support/wait-for.ts';

afterEach(closeAll);

const sent = (n: { metrics(): Record<string, number> }) =>
  n.metrics()['velo_streaming_mux_batches_total{direction="sent"}']!;

describe('mux over TCP loopback', () => {
  it('1,024 streams × 100 tokens through one connection: exact content and order per stream', async () => {
    const consumer = await tcpNode({ mux: { initialCredit: 32 } });
    const producer = await tcpNode({ listen: false, mux: { initialCredit: 32 } });
    await producer.connect(consumer.address);
    const X = 1024;
    const N = 100;
    const anchors = Array.from({ length: X }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    const reads = anchors.map((a) => readAll(a));
    for (let k = 0; k < N; k++) await Promise.all(senders.map((s, i) => s.send(`${i}:${k}`)));
    await Promise.all(senders.map((s) => s.finalize()));
    const got = await Promise.all(reads);
    for (let i = 0; i < X; i++) expect(got[i]).toEqual(Array.from({ length: N }, (_, k) => `${i}:${k}`));
    // One connection (one peer, one lane) carried all of it, in far fewer writes than tokens.
    expect(producer.metricsRegistry.recordsSent[RecordType.Data]).toBe(X * (N + 1));
    const dataBatches = sent(producer) - X; // minus the OpenSlot batches
    expect(dataBatches).toBeLessThan((X * N) / 50);
    expect(await senders[0]!.retired()).toBe('Sent');
  }, 60_000);

  it('Manual: a pass of X sends + one flushBatch() makes exactly one wire batch per peer', async () => {
    const frontends = [
      await tcpNode({ mux: { flushPolicy: { kind: 'manual' } } }),
      await tcpNode({ mux: { flushPolicy: { kind: 'manual' } } }),
    ];
    const engine = await tcpNode({ listen: false, mux: { flushPolicy: { kind: 'manual' }, initialCredit: 64 } });
    for (const f of frontends) await engine.connect(f.address);
    const X = 256;
    const anchors = Array.from({ length: X }, (_, i) => frontends[i % 2]!.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => engine.attachAnchor<string>(a.handle)));
    const reads = anchors.map((a) => readAll(a));
    for (let pass = 0; pass < 10; pass++) {
      const before = sent(engine);
      for (let i = 0; i < X; i++) await senders[i]!.send(`p${pass}s${i}`);
      expect(sent(engine), 'nothing is written before the flush').toBe(before);
      engine.flushBatch();
      expect(sent(engine) - before, `pass ${pass}: one batch per peer`).toBe(frontends.length);
      expect(engine.metrics()['velo_streaming_mux_staged_records']).toBe(0);
    }
    for (const s of senders) await s.finalize();
    const got = await Promise.all(reads);
    got.forEach((items, i) => expect(items).toEqual(Array.from({ length: 10 }, (_, p) => `p${p}s${i}`)));
  }, 30_000);

  it('a consumer that never reads holds its sender to exactly C records in flight while 255 other streams finish', async () => {
    const C = 8;
    const consumer = await tcpNode({ mux: { initialCredit: C } });
    const producer = await tcpNode({ listen: false, mux: { initialCredit: C } });
    await producer.connect(consumer.address);
    const anchors = Array.from({ length: 256 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    const N = 200;
    // Stream 0: the producer hands over N records; nobody reads them.
    for (let k = 0; k < N; k++) expect(senders[0]!.trySend(`stalled-${k}`)).toBe(true);
    const others = anchors.slice(1).map((a) => readAll(a));
    for (let k = 0; k < N; k++) await Promise.all(senders.slice(1).map((s, i) => s.send(`${i + 1}:${k}`)));
    await Promise.all(senders.slice(1).map((s) => s.finalize()));
    const got = await Promise.all(others);
    got.forEach((items, _i) => expect(items).toHaveLength(N));
    // Exactly C records of stream 0 crossed the wire; the rest wait withheld on the producer.
    const stalledBind = anchors[0]!.bind!;
    expect(stalledBind.buffer.length).toBe(C);
    expect(producer.metricsRegistry.withheldRecords).toBe(N - C);
    expect(producer.metricsRegistry.slotCreditExhausted).toBeGreaterThanOrEqual(1);
    // The consumer wakes up: everything arrives, in order.
    const rest = readAll(anchors[0]!);
    await senders[0]!.finalize();
    expect(await rest).toEqual(Array.from({ length: N }, (_, k) => `stalled-${k}`));
    expect(producer.metricsRegistry.withheldRecords).toBe(0);
  }, 30_000);

  it('without resume, killing the connection mid-stream ends every stream with SenderDropped', async () => {
    // With resume (the default) the streams wait for the link to come back: test/integration/resume-tcp.test.ts.
    const consumer = await tcpNode({ mux: { initialCredit: 16 }, resume: false });
    const relay = new Relay(parseTcp(consumer.address));
    const producer = await tcpNode({ listen: false, mux: { initialCredit: 16 }, resume: false });
    try {
      await producer.connect(await relay.listen());
      const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<string>());
      const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
      const outcomes = anchors.map((a) =>
        readAll(a).then(
          () => 'finished',
          (e: unknown) => (e as StreamError).code,
        ),
      );
      for (const s of senders) await s.send('first');
      await waitFor(() => anchors.every((a) => a.bind?.slot?.arrivals === 1), 5_000, 'first tokens');
      relay.kill();
      const t0 = performance.now();
      expect(await Promise.all(outcomes)).toEqual(anchors.map(() => 'ERR_SENDER_DROPPED'));
      expect(performance.now() - t0).toBeLessThan(15_000); // far inside the watchdog bound (3 × 5 s)
      // The producer learns too: its sends fail, its slots are gone.
      await waitFor(() => senders.every((s) => s.closed), 5_000, 'producer slots closed');
      await expect(senders[0]!.send('late')).rejects.toMatchObject({ code: expect.stringMatching(/^ERR_/) });
    } finally {
      await relay.close();
    }
  }, 30_000);

  it('a black-holed connection ends every stream with SenderDropped within the watchdog bound', async () => {
    const heartbeatInterval = 100;
    const mux = { initialCredit: 16, heartbeatInterval, creditSweepInterval: 10, healthCheckInterval: 60_000 };
    const consumer = await tcpNode({ mux });
    const relay = new Relay(parseTcp(consumer.address));
    const producer = await tcpNode({ listen: false, mux });
    try {
      await producer.connect(await relay.listen());
      const anchors = Array.from({ length: 16 }, () => consumer.createAnchor<string>());
      const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
      const outcomes = anchors.map((a) =>
        readAll(a).then(
          () => 'finished',
          (e: unknown) => (e as StreamError).code,
        ),
      );
      for (const s of senders) await s.send('first');
      await waitFor(() => anchors.every((a) => a.bind?.slot?.arrivals === 1), 5_000, 'first tokens');
      relay.blackHole = true;
      const t0 = performance.now();
      expect(await Promise.all(outcomes)).toEqual(anchors.map(() => 'ERR_SENDER_DROPPED'));
      const elapsed = performance.now() - t0;
      // 3 dead windows (+1 for the window already running, + sweep granularity), ~400 ms here. The
      // upper bound leaves room for timer lag on a loaded machine and still fails a watchdog that
      // counts several times too many windows, or only fires on the default 5 s interval.
      expect(elapsed).toBeGreaterThanOrEqual(2 * heartbeatInterval);
      expect(elapsed).toBeLessThan(5 * heartbeatInterval + 1_500);
      expect(consumer.metrics()['velo_streaming_heartbeat_watchdog_firings_total']).toBe(16);
    } finally {
      await relay.close();
    }
  }, 30_000);

  it('a peer sending past its credit gets that slot closed with ProtocolError; other streams are untouched', async () => {
    const C = 4;
    const consumer = await tcpNode({ mux: { initialCredit: C } });
    const good = await tcpNode({ listen: false, mux: { initialCredit: C } });
    await good.connect(consumer.address);
    // A hand-driven peer: a raw messenger that attaches like a mux sender, then overspends.
    const rogue = await createMessenger({
      transports: [suiteTransports.tcp({ listen: false })],
      transportKeys: [MESSENGER_MUX_KEY],
      healthCheck: false,
    });
    const replies: Uint8Array[] = [];
    rogue.registerBatchHandler(0, (_from, _lane, payload) => replies.push(payload.slice()));
    try {
      const peer = (await rogue.connect(consumer.address)).id;
      const victim = consumer.createAnchor<string>();
      const bystander = consumer.createAnchor<string>();
      const h = parseHandle(victim.handle);
      const hex = (v: bigint) => `0x${v.toString(16)}`;
      const answer = (await rogue.request(peer, '_anchor_attach', {
        handle: { hi: hex(h.workerId), lo: hex(h.localId) },
        supported_transport_keys: [MESSENGER_MUX_KEY],
      })) as { Ok: { routing_session_id: string; initial_credit: number } };
      expect(answer.Ok.initial_credit).toBe(C);
      const slot = (7 << 8) | 1;
      const enc = new BatchEncoder();
      enc.begin(1n, 0, 0);
      enc.appendOpenSlot(slot, 0, h.localId, BigInt(answer.Ok.routing_session_id));
      await rogue.sendBatch(peer, 0, enc.finish().slice());
      enc.begin(1n, 1, 0);
      for (let k = 1; k <= C + 1; k++) enc.appendItemString(slot, k, `over-${k}`); // C + 1 data records
      await rogue.sendBatch(peer, 0, enc.finish().slice());
      // Meanwhile an honest stream on the same consumer flows.
      const bs = await good.attachAnchor<string>(bystander.handle);
      const bRead = readAll(bystander);
      for (let k = 0; k < 50; k++) await bs.send(`ok-${k}`);
      await bs.finalize();
      // The victim reads the C admitted records, then SenderDropped.
      const got: string[] = [];
      const end = await (async () => {
        try {
          for await (const x of victim) got.push(x);
          return 'finished';
        } catch (e) {
          return (e as StreamError).code;
        }
      })();
      expect(got).toEqual(['over-1', 'over-2', 'over-3', 'over-4']);
      expect(end).toBe('ERR_SENDER_DROPPED');
      expect(await bRead).toEqual(Array.from({ length: 50 }, (_, k) => `ok-${k}`));
      // The rogue was told: CloseSlot{ProtocolError} for its slot.
      await waitFor(
        () =>
          replies.some((p) => decodeBatch(p).records.some((r) => r.type === RecordType.CloseSlot && r.slot === slot)),
        5_000,
        'close reply',
      );
      const close = replies
        .flatMap((p) => decodeBatch(p).records)
        .find((r) => r.type === RecordType.CloseSlot && r.slot === slot)!;
      expect(close.closeReason).toBe(CloseReason.ProtocolError);
      void FRAME_FINALIZED;
    } finally {
      await rogue.close();
    }
  }, 30_000);

  it('live_slots returns to 0 after streams end, on both sides, before any close', async () => {
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const anchors = Array.from({ length: 32 }, () => consumer.createAnchor<string>());
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    expect(producer.metricsRegistry.liveSlots).toBe(32);
    const reads = anchors.map((a) => readAll(a));
    for (const s of senders) await s.send('x');
    for (const s of senders) await s.finalize();
    await Promise.all(reads);
    expect(producer.metricsRegistry.liveSlots).toBe(0);
    expect(consumer.metricsRegistry.liveSlots).toBe(0);
    expect(open.length).toBe(2);
  });
});
