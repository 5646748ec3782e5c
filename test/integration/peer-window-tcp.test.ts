// The peer-level byte window over real loopback TCP: what a receiver holds for one peer's unread
// records stays within peerByteBudget + one batch whatever the record size, producers wait instead;
// a stream read beside unread ones keeps flowing; a peer that advertises no window keeps the old
// behaviour; a sender that ignores the window loses only the slot that overruns it.
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { parseHandle } from '../../src/stream/handle.ts';
import type { StreamError } from '../../src/stream/errors.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import type { StreamSender } from '../../src/stream/sender.ts';
import {
  BatchEncoder,
  CloseReason,
  MESSENGER_MUX_KEY,
  RecordType,
  decodeBatch,
  encodeFrame,
} from '../../src/wire/index.ts';
import { Relay, closeAll, open, parseTcp, suiteTransports, tcpNode } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';

afterEach(closeAll);

const BUDGET = 8 * 1024 * 1024; // the default peerByteBudget, advertised as the window
const ONE_BATCH = 65_536; // the batch cap never exceeds this

/** Record `k` of stream `i`: its index in the first 4 bytes, the rest filled. */
function item(i: number, k: number, size: number): Uint8Array {
  const b = new Uint8Array(size).fill(0x61);
  b[0] = i >>> 8;
  b[1] = i & 0xff;
  b[2] = k >>> 8;
  b[3] = k & 0xff;
  return b;
}

/** Read a stream and check it holds records 0..n−1 of stream i, each `size` bytes, in order (nothing kept). */
async function readExact(anchor: AsyncIterable<Uint8Array>, i: number, n: number, size: number): Promise<void> {
  let k = 0;
  for await (const x of anchor) {
    if (x.byteLength !== size || ((x[0]! << 8) | x[1]!) !== i || ((x[2]! << 8) | x[3]!) !== k)
      throw new Error(`stream ${i}: record ${k} is wrong`);
    k++;
  }
  if (k !== n) throw new Error(`stream ${i}: ${k} records, expected ${n}`);
}

async function attachAll<T>(producer: LanemuxNode, handles: string[]): Promise<StreamSender<T>[]> {
  const out: StreamSender<T>[] = [];
  for (let i = 0; i < handles.length; i += 128)
    out.push(...(await Promise.all(handles.slice(i, i + 128).map((h) => producer.attachAnchor<T>(h)))));
  return out;
}

const gauge = (n: LanemuxNode, name: string): number => n.metrics()[`velo_streaming_mux_${name}`] ?? Number.NaN;

describe('peer window over TCP', () => {
  it.each([
    // 64-byte records: credit stops them long before the window; enough per stream that the
    // withheld records reach the sender's own peer budget and its producers wait.
    [64, 160],
    [4_096, 8],
    [61_440, 3],
  ])(
    '1,024 unread streams of %i-byte records: the receiver holds at most peerByteBudget + one batch while producers wait; once read, every stream completes exact and in order',
    async (size, n) => {
      const C = 32;
      const consumer = await tcpNode({ mux: { initialCredit: C } });
      const producer = await tcpNode({ listen: false, mux: { initialCredit: C } });
      await producer.connect(consumer.address);
      const X = 1_024;
      const anchors = Array.from({ length: X }, () => consumer.createAnchor<Uint8Array>());
      const senders = await attachAll<Uint8Array>(
        producer,
        anchors.map((a) => a.handle),
      );
      let sent = 0;
      const producing = senders.map(async (s, i) => {
        for (let k = 0; k < n; k++) {
          await s.send(item(i, k, size));
          sent++;
        }
        await s.finalize();
      });
      // Steady state: every byte in flight has landed unread, and the sender can send no more.
      if (size === 64) {
        // 64-byte records fit the window many times over: credit is what stops them.
        await waitFor(() => anchors.every((a) => a.bind?.buffer.length === C), 20_000, 'every slot at its credit');
      } else {
        await waitFor(
          () =>
            producer.metricsRegistry.sendWindowBlocked > 0 &&
            gauge(producer, 'send_window_inflight_bytes') === gauge(consumer, 'receive_window_held_bytes'),
          20_000,
          'window full',
        );
        expect(gauge(consumer, 'receive_window_held_bytes')).toBeGreaterThan(BUDGET - 2 * (size + 64)); // the window, not credit, binds
        expect(producer.metricsRegistry.withheldRecords).toBeGreaterThan(0);
      }
      expect(gauge(consumer, 'receive_window_peak_bytes')).toBeLessThanOrEqual(BUDGET + ONE_BATCH);
      expect(sent, 'producers are back-pressured').toBeLessThan(X * n);
      expect(producer.metricsRegistry.producerSendBackpressure).toBeGreaterThan(0);
      if (size === 61_440) expect(producer.metricsRegistry.rendezvousSingletons).toBeGreaterThan(0); // these go as rendezvous transfers
      // The consumers read: everything arrives, exact and in order, and the window never overflowed.
      await Promise.all(anchors.map((a, i) => readExact(a, i, n, size)));
      await Promise.all(producing);
      expect(await senders[X - 1]!.retired()).toBe('Sent');
      expect(gauge(consumer, 'receive_window_peak_bytes')).toBeLessThanOrEqual(BUDGET + ONE_BATCH);
      expect(consumer.metricsRegistry.peerWindowOverrun).toBe(0);
      expect(producer.metricsRegistry.windowOverRelease).toBe(0);
      // Everything read is released back to the sender (the last bytes by the sweep's backstop).
      await waitFor(() => gauge(producer, 'send_window_inflight_bytes') === 0, 5_000, 'window released');
      expect(gauge(consumer, 'receive_window_held_bytes')).toBe(0);
    },
    60_000,
  );

  it('a stream read beside 1,023 unread ones keeps flowing while the window has room: 16 MiB through an 8 MiB window', async () => {
    const C = 32;
    const consumer = await tcpNode({ mux: { initialCredit: C } });
    const producer = await tcpNode({ listen: false, mux: { initialCredit: C } });
    await producer.connect(consumer.address);
    const anchors = Array.from({ length: 1_024 }, () => consumer.createAnchor<Uint8Array>());
    const senders = await attachAll<Uint8Array>(
      producer,
      anchors.map((a) => a.handle),
    );
    // 1,023 streams fill their credit with 64-byte records nobody reads (about 2.5 MiB held) …
    for (let i = 1; i < 1_024; i++) for (let k = 0; k <= C; k++) senders[i]!.trySend(item(i, k, 64));
    await waitFor(
      () => anchors.slice(1).every((a) => a.bind?.buffer.length === C),
      20_000,
      'unread streams at their credit',
    );
    // … while stream 0, read as it arrives, carries 4,096 records of 4 KiB.
    const N = 4_096;
    const reading = readExact(anchors[0]!, 0, N, 4_096);
    for (let k = 0; k < N; k++) await senders[0]!.send(item(0, k, 4_096));
    await senders[0]!.finalize();
    await reading;
    expect(await senders[0]!.retired()).toBe('Sent');
    expect(consumer.metricsRegistry.windowUpdatesSent).toBeGreaterThan(1); // the window was recycled
    expect(gauge(consumer, 'receive_window_peak_bytes')).toBeLessThanOrEqual(BUDGET + ONE_BATCH);
    expect(anchors.slice(1).every((a) => a.bind!.buffer.length === C)).toBe(true);
    for (const a of anchors.slice(1)) a.cancel();
  }, 60_000);

  it('streams waiting for the window are not dead to the watchdog (their heartbeats cannot pass their queue): none fires over 12 windows, and all complete once read', async () => {
    const mux = { initialCredit: 32, peerByteBudget: 64 * 1024, heartbeatInterval: 50, creditSweepInterval: 10 };
    const consumer = await tcpNode({ mux });
    const producer = await tcpNode({ listen: false, mux });
    await producer.connect(consumer.address);
    const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<Uint8Array>());
    const senders = await attachAll<Uint8Array>(
      producer,
      anchors.map((a) => a.handle),
    );
    const producing = senders.map(async (s, i) => {
      for (let k = 0; k < 8; k++) await s.send(item(i, k, 4_096));
      await s.finalize();
    });
    await waitFor(
      () =>
        producer.metricsRegistry.sendWindowBlocked > 0 &&
        gauge(producer, 'send_window_inflight_bytes') === gauge(consumer, 'receive_window_held_bytes'),
      10_000,
      'window full',
    );
    expect(anchors.filter((a) => a.bind!.buffer.length === 0).length).toBeGreaterThan(32); // most streams got nothing yet
    await new Promise((r) => setTimeout(r, 600)); // 12 heartbeat windows: the watchdog has no event to wait for
    expect(consumer.metricsRegistry.watchdogFirings).toBe(0);
    await Promise.all(anchors.map((a, i) => readExact(a, i, 8, 4_096)));
    await Promise.all(producing);
  }, 30_000);

  it('a silent peer whose streams the window excuses from the watchdog is still found dead: the consumer pings it and its streams end SenderDropped', async () => {
    const mux = {
      initialCredit: 32,
      peerByteBudget: 64 * 1024,
      heartbeatInterval: 50,
      creditSweepInterval: 10,
      healthCheckInterval: 100,
      healthCheckTimeout: 100,
    };
    // Without resume: a dead link ends the streams at once (with resume they wait for it to come back).
    const consumer = await tcpNode({ mux, resume: false });
    const relay = new Relay(parseTcp(consumer.address));
    // The producer's own health check would close the link itself: only the consumer may notice here.
    const producer = await tcpNode({ listen: false, mux: { ...mux, healthCheckInterval: 60_000 }, resume: false });
    try {
      await producer.connect(await relay.listen());
      const anchors = Array.from({ length: 16 }, () => consumer.createAnchor<Uint8Array>());
      const senders = await attachAll<Uint8Array>(
        producer,
        anchors.map((a) => a.handle),
      );
      for (const [i, s] of senders.entries())
        void (async () => {
          for (let k = 0; k < 8; k++) await s.send(item(i, k, 4_096));
        })().catch(() => {});
      await waitFor(
        () =>
          producer.metricsRegistry.sendWindowBlocked > 0 &&
          gauge(producer, 'send_window_inflight_bytes') === gauge(consumer, 'receive_window_held_bytes'),
        10_000,
        'window full',
      );
      relay.blackHole = true; // the producer goes silent; nothing is read, so the window stays in use
      await waitFor(() => anchors.every((a) => a.bind!.ended), 5_000, 'every stream ended');
      expect(consumer.metricsRegistry.watchdogFirings).toBe(0); // the ping found it, not the watchdog
      for (const a of anchors) {
        const end = await (async () => {
          try {
            for await (const _ of a) void _;
            return 'finished';
          } catch (e) {
            return (e as StreamError).code;
          }
        })();
        expect(end).toBe('ERR_SENDER_DROPPED');
      }
    } finally {
      await relay.close();
    }
  }, 30_000);

  it('window updates that are malformed (length, zero, above 2^53) or release more than is in flight are counted and ignored', async () => {
    const node = await tcpNode({ mux: { initialCredit: 32 } });
    const peerNode = await tcpNode({ listen: false, mux: { initialCredit: 32 } });
    await peerNode.connect(node.address);
    const sink = peerNode.createAnchor<Uint8Array>();
    const s = await node.attachAnchor<Uint8Array>(sink.handle);
    await s.send(item(0, 0, 4_096));
    await waitFor(() => gauge(node, 'send_window_inflight_bytes') > 0, 5_000, 'bytes in flight');
    const inflight = gauge(node, 'send_window_inflight_bytes');
    const rogue = await createMessenger({
      transports: [suiteTransports.tcp({ listen: false })],
      transportKeys: [MESSENGER_MUX_KEY],
      healthCheck: false,
      receiveWindow: 1 << 20,
    });
    try {
      const peer = (await rogue.connect(node.address)).id;
      const u64 = (v: bigint): Uint8Array => {
        const b = new Uint8Array(8);
        new DataView(b.buffer).setBigUint64(0, v);
        return b;
      };
      for (const body of [new Uint8Array(4), u64(0n), u64(1n << 60n), u64(100n)])
        await rogue.send(peer, 0, '_stream_window', body);
      await waitFor(
        () => node.metricsRegistry.windowUpdateMalformed + node.metricsRegistry.windowOverRelease === 4,
        5_000,
        'every update handled',
      );
      expect([node.metricsRegistry.windowUpdateMalformed, node.metricsRegistry.windowOverRelease]).toEqual([3, 1]);
      expect(gauge(node, 'send_window_inflight_bytes')).toBe(inflight); // another peer's releases touch nothing here
    } finally {
      await rogue.close();
    }
    const got = sink.next();
    expect(((await got).value as Uint8Array).byteLength).toBe(4_096);
    await s.finalize();
  }, 30_000);

  it('the window starts afresh with a new link: unread bytes of the dead link do not hold back the reconnected sender', async () => {
    const mux = { initialCredit: 32, peerByteBudget: 64 * 1024 };
    // Without resume: the old streams end with their link and stay unread.
    const consumer = await tcpNode({ mux, resume: false });
    const relay = new Relay(parseTcp(consumer.address));
    const producer = await tcpNode({ listen: false, mux, resume: false });
    try {
      const via = await relay.listen();
      await producer.connect(via);
      const old = Array.from({ length: 8 }, () => consumer.createAnchor<Uint8Array>());
      const senders = await attachAll<Uint8Array>(
        producer,
        old.map((a) => a.handle),
      );
      for (const [i, s] of senders.entries())
        void (async () => {
          for (let k = 0; k < 8; k++) await s.send(item(i, k, 4_096));
        })().catch(() => {});
      await waitFor(
        () =>
          producer.metricsRegistry.sendWindowBlocked > 0 &&
          gauge(producer, 'send_window_inflight_bytes') === gauge(consumer, 'receive_window_held_bytes'),
        10_000,
        'window full',
      );
      const heldBefore = gauge(consumer, 'receive_window_held_bytes');
      expect(heldBefore).toBeGreaterThan(60 * 1024);
      relay.kill();
      await waitFor(
        () => old.every((a) => a.bind!.ended) && senders.every((s) => s.closed),
        5_000,
        'the link is gone on both sides',
      );
      await producer.connect(via); // the same peer, a new link
      // The old streams' records are still unread (real memory, still in the gauge) but belong to the dead link.
      expect(gauge(consumer, 'receive_window_held_bytes')).toBe(heldBefore);
      const fresh = consumer.createAnchor<Uint8Array>();
      const s = await producer.attachAnchor<Uint8Array>(fresh.handle);
      const reading = readExact(fresh, 0, 64, 4_096); // 256 KiB through a 64 KiB window
      for (let k = 0; k < 64; k++) await s.send(item(0, k, 4_096));
      await s.finalize();
      await reading;
      for (const a of old) a.cancel();
      expect(gauge(consumer, 'receive_window_held_bytes')).toBe(0);
    } finally {
      await relay.close();
    }
  }, 30_000);

  /** A node over a messenger built without `receiveWindow`: it advertises no window (an older peer does the same). */
  async function noWindowNode(messengers: Messenger[], listen: boolean, mux: object): Promise<LanemuxNode> {
    const messenger = await createMessenger({
      transports: [suiteTransports.tcp({ listen })],
      transportKeys: [MESSENGER_MUX_KEY],
      healthCheck: false,
    });
    messengers.push(messenger);
    const node = await createNode({ messenger, mux });
    open.push(node);
    return node;
  }

  it("a consumer that advertises no window keeps today's behaviour within 4 windows: its sender is not limited, it holds past peerByteBudget, nobody sends updates", async () => {
    const messengers: Messenger[] = [];
    try {
      const mux = { initialCredit: 32, peerByteBudget: 4 << 20 };
      const consumer = await noWindowNode(messengers, true, mux);
      const producer = await tcpNode({ listen: false, mux });
      await producer.connect(consumer.address);
      const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<Uint8Array>());
      const senders = await attachAll<Uint8Array>(
        producer,
        anchors.map((a) => a.handle),
      );
      const producing = senders.map(async (s, i) => {
        for (let k = 0; k < 32; k++) await s.send(item(i, k, 4_096));
        await s.finalize();
      });
      await waitFor(
        () => anchors.every((a) => a.bind?.buffer.length === 33),
        20_000,
        'every slot holds its 32 records and its terminal',
      );
      // 64 × 32 × 4 KiB = 8 MiB held against a 4 MiB budget: bounded by credit only, as before the window (and by 4 windows).
      expect(gauge(consumer, 'receive_window_held_bytes')).toBeGreaterThan(8 * (1 << 20));
      expect([producer.metricsRegistry.sendWindowBlocked, gauge(producer, 'send_window_inflight_bytes')]).toEqual([
        0, 0,
      ]);
      await Promise.all(anchors.map((a, i) => readExact(a, i, 32, 4_096)));
      await Promise.all(producing);
      expect(consumer.metricsRegistry.windowUpdatesSent).toBe(0);
    } finally {
      for (const m of messengers) await m.close();
    }
  }, 60_000);

  it('a producer that advertises no window is not limited within 4 windows and its consumer neither faults nor sends updates (counted all the same)', async () => {
    const messengers: Messenger[] = [];
    try {
      const mux = { initialCredit: 32, peerByteBudget: 4 << 20 };
      const consumer = await tcpNode({ mux });
      const producer = await noWindowNode(messengers, false, mux);
      await producer.connect(consumer.address);
      const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<Uint8Array>());
      const senders = await attachAll<Uint8Array>(
        producer,
        anchors.map((a) => a.handle),
      );
      const producing = senders.map(async (s, i) => {
        for (let k = 0; k < 32; k++) await s.send(item(i, k, 4_096));
        await s.finalize();
      });
      await waitFor(
        () => anchors.every((a) => a.bind?.buffer.length === 33),
        20_000,
        'every slot holds its 32 records and its terminal',
      );
      expect(gauge(consumer, 'receive_window_held_bytes')).toBeGreaterThan(8 * (1 << 20));
      expect(consumer.metricsRegistry.peerWindowOverrun).toBe(0);
      await Promise.all(anchors.map((a, i) => readExact(a, i, 32, 4_096)));
      await Promise.all(producing);
      expect([consumer.metricsRegistry.windowUpdatesSent, producer.metricsRegistry.sendWindowBlocked]).toEqual([0, 0]);
    } finally {
      for (const m of messengers) await m.close();
    }
  }, 60_000);

  it('a producer that advertises no window (an old build, or a hostile one leaving it out) is still bounded: past 4 windows only its overrunning streams are closed', async () => {
    const messengers: Messenger[] = [];
    try {
      const budget = 1 << 20;
      const mux = { initialCredit: 32, peerByteBudget: budget };
      const consumer = await tcpNode({ mux });
      const producer = await noWindowNode(messengers, false, mux);
      await producer.connect(consumer.address);
      const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<Uint8Array>());
      const senders = await attachAll<Uint8Array>(
        producer,
        anchors.map((a) => a.handle),
      );
      // Nobody reads yet: 8 MiB offered against a 4 MiB + batch bound.
      const producing = senders.map(async (s, i) => {
        try {
          for (let k = 0; k < 32; k++) await s.send(item(i, k, 4_096));
          await s.finalize();
        } catch {
          // its slot was closed for the overrun
        }
      });
      await Promise.all(producing);
      await waitFor(
        () =>
          consumer.metricsRegistry.peerWindowOverrun > 0 &&
          anchors.every((a) => a.bind === null || a.bind.ended || a.bind.buffer.length === 33),
        20_000,
        'an overrun, and every slot full or closed',
      );
      // 4 windows plus one batch of the peer (its max message size toward us, 1 MiB).
      expect(gauge(consumer, 'receive_window_peak_bytes')).toBeLessThanOrEqual(4 * budget + (1 << 20));
      expect(consumer.metricsRegistry.peerWindowOverrun).toBeGreaterThan(0);
      const codes = await Promise.all(
        anchors.map(async (a) => {
          try {
            for await (const _ of a) void _;
            return 'ok';
          } catch (e) {
            return (e as StreamError).code;
          }
        }),
      );
      // Streams that overran end with a coded error; the others complete.
      expect(codes.filter((c) => c !== 'ok').length).toBeGreaterThan(0);
      for (const c of codes) expect(typeof c).toBe('string');
    } finally {
      for (const m of messengers) await m.close();
    }
  }, 60_000);

  it("a sender that advertises a window but ignores the consumer's gets only its overrunning slot closed (ProtocolError), and is told every released byte in _stream_window updates", async () => {
    const W = 65_536;
    const consumer = await tcpNode({ maxMessageSize: 65_536, mux: { initialCredit: 32, peerByteBudget: W } });
    const limit = W + (65_536 - 1); // window + one batch (the largest batch payload toward it)
    // A hand-driven peer: it says it is this version (a window in its HELLO) and then overruns.
    const rogue = await createMessenger({
      transports: [suiteTransports.tcp({ listen: false })],
      transportKeys: [MESSENGER_MUX_KEY],
      healthCheck: false,
      receiveWindow: 1 << 20,
    });
    const replies: Uint8Array[] = [];
    const updates: number[] = [];
    rogue.registerBatchHandler(0, (_from, _lane, payload) => replies.push(payload.slice()));
    rogue.on('_stream_window', (_from, _lane, body) => {
      expect(body.byteLength).toBe(8);
      updates.push(Number(new DataView(body.buffer, body.byteOffset, 8).getBigUint64(0)));
    });
    try {
      const peer = (await rogue.connect(consumer.address)).id;
      const anchors = Array.from({ length: 6 }, () => consumer.createAnchor<Uint8Array>());
      const hex = (v: bigint) => `0x${v.toString(16)}`;
      const body = encodeFrame({ kind: 'Item', value: new Uint8Array(1_000) });
      let batchSeq = 0;
      const batch = (fill: (enc: BatchEncoder) => void): Promise<void> | true => {
        const enc = new BatchEncoder({ maxBytes: 60_000 });
        enc.begin(1n, batchSeq++, 0);
        fill(enc);
        return rogue.sendBatch(peer, 0, enc.finish().slice());
      };
      const slots: number[] = [];
      for (const [k, a] of anchors.entries()) {
        const h = parseHandle(a.handle);
        const answer = (await rogue.request(peer, '_anchor_attach', {
          handle: { hi: hex(h.workerId), lo: hex(h.localId) },
          supported_transport_keys: [MESSENGER_MUX_KEY],
        })) as { Ok: { routing_session_id: string } };
        const slot = ((k + 1) << 8) | 1;
        slots.push(slot);
        await batch((enc) => enc.appendOpenSlot(slot, 0, h.localId, BigInt(answer.Ok.routing_session_id)));
      }
      // Within credit (32 per slot), records that together pass window + one batch: the first one over is refused.
      const fit = Math.floor(limit / body.byteLength);
      const perSlot: number[] = slots.map((_, k) => Math.max(0, Math.min(32, fit + 1 - 32 * k)));
      const over = perSlot.findIndex((n) => n < 32); // the slot whose last record overruns
      for (const [k, slot] of slots.entries()) {
        for (let from = 1; from <= perSlot[k]!; from += 16) {
          await batch((enc) => {
            for (let seq = from; seq < from + 16 && seq <= perSlot[k]!; seq++) enc.appendData(slot, seq, body);
          });
        }
      }
      await waitFor(() => consumer.metricsRegistry.peerWindowOverrun === 1, 5_000, 'the overrun');
      await waitFor(
        () => replies.some((p) => decodeBatch(p).records.some((r) => r.type === RecordType.CloseSlot)),
        5_000,
        'close reply',
      );
      const closes = replies.flatMap((p) => decodeBatch(p).records).filter((r) => r.type === RecordType.CloseSlot);
      expect(closes.map((r) => [r.slot, r.closeReason])).toEqual([[slots[over]!, CloseReason.ProtocolError]]);
      // Every other slot keeps all it sent; the faulted one ends after what was admitted.
      for (const [k, a] of anchors.entries()) {
        if (k === over) {
          const got: Uint8Array[] = [];
          const end = await (async () => {
            try {
              for await (const x of a) got.push(x);
              return 'finished';
            } catch (e) {
              return (e as StreamError).code;
            }
          })();
          expect([got.length, end]).toEqual([perSlot[k]! - 1, 'ERR_SENDER_DROPPED']);
        } else if (perSlot[k]! > 0) {
          const got: Uint8Array[] = [];
          for (let i = 0; i < perSlot[k]!; i++) got.push((await a.next()).value as Uint8Array);
          expect(got.every((x) => x.byteLength === 1_000)).toBe(true);
        }
      }
      expect(consumer.metricsRegistry.peerWindowOverrun).toBe(1);
      // Released bytes went back as u64 big-endian updates: every body sent, the refused one included.
      const total = perSlot.reduce((a, b) => a + b, 0) * body.byteLength;
      await waitFor(() => updates.reduce((a, b) => a + b, 0) === total, 5_000, 'updates for every released byte');
      expect(consumer.metricsRegistry.windowUpdatesSent).toBe(updates.length);
      for (const a of anchors) a.cancel();
    } finally {
      await rogue.close();
    }
  }, 30_000);
});
