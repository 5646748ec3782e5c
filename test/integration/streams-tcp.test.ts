// The public streams API over real TCP: negotiation (mux, per-stream fallback, rollback, zero
// credit), zero-RTT tickets, same-worker attach, heartbeats vs the watchdog, lifecycle, config.
import { afterEach, describe, expect, it } from 'vitest';
import { createMessenger } from '../../src/messenger/messenger.ts';
import { tcpStreamTransport } from '../../src/adapters/node-tcp-stream.ts';
import { createNode } from '../../src/stream/node.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import { MESSENGER_MUX_KEY } from '../../src/wire/index.ts';
import { closeAll, open, suiteTransports, tcpNode } from './helpers.ts';
import { readAll } from '../support/read-all.ts';
import { waitFor } from '../support/wait-for.ts';

afterEach(closeAll);

describe('negotiation over TCP', () => {
  it('mux-disabled rollback (LANEMUX_MUX_DISABLE=1 on the producer) negotiates tcp-stream and still delivers', async () => {
    const consumer = await tcpNode({ perStream: tcpStreamTransport() });
    const env = systemRuntime();
    const killed = { ...env, env: (n: string) => (n === 'LANEMUX_MUX_DISABLE' ? '1' : env.env(n)) };
    const producer = await tcpNode({ listen: false, perStream: tcpStreamTransport(), runtime: killed });
    expect(producer.muxEnabled).toBe(false);
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    expect(s.negotiatedTransport).toBe('tcp-stream');
    const read = readAll(anchor);
    for (let i = 0; i < 100; i++) await s.send(`t${i}`);
    await s.finalize();
    expect(await read).toEqual(Array.from({ length: 100 }, (_, i) => `t${i}`));
    expect(producer.perStreamWrites).toBe(101);
    expect(await s.retired()).toBe('Sent');
  });

  it('a peer without the mux (mux.enabled = false) negotiates tcp-stream with a mux consumer', async () => {
    const consumer = await tcpNode({ perStream: tcpStreamTransport() });
    const producer = await tcpNode({ listen: false, perStream: tcpStreamTransport(), mux: { enabled: false } });
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    expect(s.negotiatedTransport).toBe('tcp-stream');
    const read = readAll(anchor);
    await s.send('hello');
    await s.finalize();
    expect(await read).toEqual(['hello']);
  });

  it('both sides with the mux select messenger-mux-v2 even with a per-stream transport installed', async () => {
    const consumer = await tcpNode({ perStream: tcpStreamTransport() });
    const producer = await tcpNode({ listen: false, perStream: tcpStreamTransport() });
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    expect(s.negotiatedTransport).toBe(MESSENGER_MUX_KEY);
    expect(producer.perStreamWrites).toBe(0);
    const read = readAll(anchor);
    await s.send('x');
    await s.finalize();
    expect(await read).toEqual(['x']);
  });

  it('a mux answer with zero credit fails the attach, naming the key and initial_credit = 0', async () => {
    const fake = await createMessenger({
      transports: [suiteTransports.tcp({ listen: true })],
      transportKeys: [MESSENGER_MUX_KEY],
      healthCheck: false,
    });
    fake.handle('_anchor_attach', () => ({ Ok: { streaming_transport_key: MESSENGER_MUX_KEY } }));
    try {
      const producer = await tcpNode({ listen: false });
      await producer.connect(fake.addresses[0]!);
      const handle = `lmx1.${fake.self.id}${'1'.padStart(16, '0')}`;
      await expect(producer.attachAnchor(handle)).rejects.toThrow(
        /messenger-mux-v2.*initial_credit = 0|initial_credit = 0.*messenger-mux-v2/,
      );
      expect(producer.metricsRegistry.liveSlots).toBe(0);
    } finally {
      await fake.close();
    }
  });

  it('no common transport: the attach is refused with a clear error', async () => {
    const consumer = await tcpNode({ mux: { enabled: false } }); // no per-stream transport either
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor();
    await expect(producer.attachAnchor(anchor.handle)).rejects.toMatchObject({ code: 'ERR_ATTACH_REFUSED' });
  });
});

describe('zero-RTT tickets over TCP', () => {
  it('prebindAnchor + openAnchorStream deliver with no attach round trip', async () => {
    const consumer = await tcpNode({ mux: { initialCredit: 8 } });
    const producer = await tcpNode({ listen: false, mux: { initialCredit: 8 } });
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor);
    expect(typeof ticket).toBe('string');
    const attachesBefore =
      consumer.metrics()[
        'velo_streaming_anchor_operations_total{operation="attach",outcome="success",transport_scheme="mux"}'
      ] ?? 0;
    const s = await producer.openAnchorStream<string>(anchor.handle, ticket!);
    const read = readAll(anchor);
    for (let i = 0; i < 20; i++) await s.send(`z${i}`);
    await s.finalize();
    expect(await read).toEqual(Array.from({ length: 20 }, (_, i) => `z${i}`));
    expect(
      consumer.metrics()[
        'velo_streaming_anchor_operations_total{operation="attach",outcome="success",transport_scheme="mux"}'
      ] ?? 0,
    ).toBe(attachesBefore);
    // A second open with the same ticket gets no slot: UnknownSlot, and the stray sender errors.
    const stray = await producer.openAnchorStream<string>(anchor.handle, ticket!);
    await waitFor(() => stray.closed, 5_000, 'stray sender closed');
    await expect(stray.send('nope')).rejects.toMatchObject({ code: 'ERR_UNKNOWN_SLOT' });
  });

  it('an attach presenting the ticket adopts the unclaimed pre-bind; opening a ticket on its own worker fails fast', async () => {
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const ticket = consumer.prebindAnchor(anchor)!;
    await expect(consumer.openAnchorStream(anchor.handle, ticket)).rejects.toMatchObject({
      code: 'ERR_TRANSPORT_ERROR',
    });
    const s = await producer.attachAnchor<string>(anchor.handle, { ticket });
    const read = readAll(anchor);
    await s.send('adopted');
    await s.finalize();
    expect(await read).toEqual(['adopted']);
  });
});

describe('push-mode reading over the suite transport', () => {
  it('64 streams read with anchor.consume deliver exactly, in order; a producer that goes away ends them retryable', async () => {
    const consumer = await tcpNode({ mux: { initialCredit: 8 } });
    const producer = await tcpNode({ listen: false, mux: { initialCredit: 8 } });
    await producer.connect(consumer.address);
    const anchors = Array.from({ length: 64 }, () => consumer.createAnchor<string>());
    const got = anchors.map(() => [] as string[]);
    const ends = anchors.map(
      (a, i) => new Promise<unknown>((resolve) => a.consume({ item: (t) => void got[i]!.push(t), end: resolve })),
    );
    const senders = await Promise.all(anchors.map((a) => producer.attachAnchor<string>(a.handle)));
    for (let k = 0; k < 30; k++) await Promise.all(senders.map((s, i) => s.send(`s${i}-${k}`)));
    await Promise.all(senders.slice(0, 32).map((s) => s.finalize()));
    expect(await Promise.all(ends.slice(0, 32))).toEqual(Array.from({ length: 32 }, () => null));
    for (let i = 0; i < 64; i++) {
      await waitFor(() => got[i]!.length === 30, 5_000, `stream ${i} got its 30 tokens`);
      expect(got[i]).toEqual(Array.from({ length: 30 }, (_, k) => `s${i}-${k}`));
    }
    // The other 32 producers vanish with the node: their consumers end with ERR_SENDER_DROPPED.
    await producer.close();
    for (const e of await Promise.all(ends.slice(32)))
      expect(e).toMatchObject({ code: 'ERR_SENDER_DROPPED', retryable: true });
  });
});

describe('same-worker, lifecycle, heartbeats', () => {
  it('a sender on the anchor own node writes to it directly (no transport)', async () => {
    const node = await tcpNode();
    const anchor = node.createAnchor<number>();
    const s = await node.attachAnchor<number>(anchor.handle);
    expect(s.negotiatedTransport).toBeNull();
    const read = readAll(anchor);
    for (let i = 0; i < 1000; i++) await s.send(i);
    await s.finalize();
    expect(await read).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    expect(node.metrics()['velo_streaming_mux_batches_total{direction="sent"}']).toBe(0);
    expect(await s.retired()).toBe('Sent');
  });

  it('heartbeats keep an idle stream alive past the watchdog bound; the stream then finishes', async () => {
    const mux = { heartbeatInterval: 50, creditSweepInterval: 10 };
    const consumer = await tcpNode({ mux });
    const producer = await tcpNode({ listen: false, mux });
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    const read = readAll(anchor);
    await s.send('before');
    await new Promise((r) => setTimeout(r, 600)); // 12 windows of silence from the application
    expect(consumer.metrics()['velo_streaming_heartbeat_watchdog_firings_total']).toBe(0);
    await s.send('after');
    await s.finalize();
    expect(await read).toEqual(['before', 'after']);
  });

  it('cancel on the consumer fails the producer; requestStop fires only its stop signal', async () => {
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const a1 = consumer.createAnchor<string>();
    const a2 = consumer.createAnchor<string>();
    const s1 = await producer.attachAnchor<string>(a1.handle);
    const s2 = await producer.attachAnchor<string>(a2.handle);
    await s1.send('x');
    a2.requestStop();
    await waitFor(() => s2.stopSignal.aborted, 5_000, 'stop signal');
    expect(s2.cancelSignal.aborted).toBe(false);
    await s2.send('final words');
    await s2.finalize();
    expect(await readAll(a2)).toEqual(['final words']);
    a1.cancel();
    await waitFor(() => s1.cancelSignal.aborted, 5_000, 'cancel reached the producer');
    await expect(s1.send('y')).rejects.toMatchObject({ code: 'ERR_STREAM_CANCELLED' });
    expect(await s1.retired()).toBe('Discarded');
  });

  it('sender.error() is a non-terminal SenderError; the stream goes on', async () => {
    const consumer = await tcpNode();
    const producer = await tcpNode({ listen: false });
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    await s.send('a');
    await s.error('tokenizer hiccup');
    await s.send('b');
    await s.finalize();
    const it = anchor[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ done: false, value: 'a' });
    await expect(it.next()).rejects.toMatchObject({ code: 'ERR_SENDER_ERROR', message: 'tokenizer hiccup' });
    expect(await it.next()).toEqual({ done: false, value: 'b' });
    expect((await it.next()).done).toBe(true);
  });

  it('anchor.readable is a ReadableStream whose back-pressure is the slot credit', async () => {
    const consumer = await tcpNode({ mux: { initialCredit: 4 } });
    const producer = await tcpNode({ listen: false, mux: { initialCredit: 4 } });
    await producer.connect(consumer.address);
    const anchor = consumer.createAnchor<string>();
    const s = await producer.attachAnchor<string>(anchor.handle);
    for (let i = 0; i < 20; i++) s.trySend(`r${i}`);
    await waitFor(() => anchor.bind?.buffer.length === 4, 5_000, 'C records delivered');
    expect(producer.metricsRegistry.withheldRecords).toBe(16); // nothing read yet: the stream holds exactly C
    const reader = anchor.readable.getReader();
    const got: string[] = [];
    const reading = (async () => {
      for (;;) {
        const r = await reader.read();
        if (r.done) return;
        got.push(r.value);
      }
    })();
    await s.finalize();
    await reading;
    expect(got).toEqual(Array.from({ length: 20 }, (_, i) => `r${i}`));
  });
});

describe('configuration', () => {
  it('a bad mux value is an error naming the field; initial_credit = 0 and a zero sweep are refused', async () => {
    await expect(
      createNode({ transports: [suiteTransports.tcp({ listen: false })], mux: { initialCredit: -1 } }),
    ).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG', field: 'mux.initialCredit' });
    await expect(
      createNode({ transports: [suiteTransports.tcp({ listen: false })], mux: { initialCredit: 0 } }),
    ).rejects.toThrow(/initial_credit = 0/);
    await expect(
      createNode({ transports: [suiteTransports.tcp({ listen: false })], mux: { creditSweepInterval: 0 } }),
    ).rejects.toThrow(/creditSweepInterval/);
    await expect(
      createNode({
        transports: [suiteTransports.tcp({ listen: false })],
        mux: { flushPolicy: { kind: 'sometimes' } } as never,
      }),
    ).rejects.toMatchObject({ field: expect.stringMatching(/^mux\.flushPolicy/) });
    await expect(
      createNode({ transports: [suiteTransports.tcp({ listen: false })], mux: { bogus: 1 } as never }),
    ).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG' });
    expect(open.length).toBe(0);
  });
});
