// The transport conformance suite: one behavioural suite run against every adapter (memory, TCP
// with 1 and 8 lanes, WebSocket server + partysocket client), in the spirit of crossws' per-adapter
// runs. Each `*.test.ts` in this folder calls `transportConformance(harness)` inside a describe.
import { afterEach, expect, it } from 'vitest';
import { isLanemuxError } from '../../src/errors.ts';
import { createMessenger, type MessengerOptions } from '../../src/messenger/messenger.ts';
import type { Messenger, PeerInfo } from '../../src/messenger/types.ts';
import { encodeHello } from '../../src/transport/hello.ts';
import { systemRuntime } from '../../src/runtime/runtime.ts';
import {
  HELLO_FRAME_LIMIT,
  PROTOCOL_VERSION,
  type Connection,
  type TransportAdapter,
} from '../../src/transport/port.ts';
import { LanemuxError } from '../../src/errors.ts';
import { intact, isSettled, nextGone, nextPeer, readTag, tagged, within } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';

/** What the suite needs from an adapter. */
export interface Harness {
  readonly name: string;
  /** Lanes both sides offer. */
  readonly lanes: number;
  /** Transports of a listening node; with `at`, listen again on that earlier address (restart). */
  server(at?: string): TransportAdapter[];
  /** Transports of a dialling node. */
  client(): TransportAdapter[];
  /** True if a client re-establishes a dropped link by itself (partysocket). */
  readonly reconnects: boolean;
  /**
   * False if the server adapter cannot stop reading (Deno's server WebSocket): the tests that stall
   * a reader are replaced by one checking that `pause()` says so. Defaults to true.
   */
  readonly pauses?: boolean;
}

const MAX = 256 * 1024;

/** A raw adapter-level connection (no hello unless the test sends one). */
interface Raw {
  conn: Connection;
  messages: Uint8Array[];
  closed: Promise<LanemuxError>;
}

export function transportConformance(h: Harness): void {
  const open: Messenger[] = [];
  const adapters: TransportAdapter[] = [];

  afterEach(async () => {
    await Promise.all(open.splice(0).map((m) => m.close()));
    await Promise.all(adapters.splice(0).map((a) => a.close()));
  });

  async function node(
    role: 'server' | 'client',
    extra: Partial<MessengerOptions> = {},
    at?: string,
  ): Promise<Messenger> {
    const m = await createMessenger({
      transports: role === 'server' ? h.server(at) : h.client(),
      lanes: h.lanes,
      maxMessageSize: MAX,
      healthCheck: false,
      transportKeys: ['messenger-mux-v2'],
      ...extra,
    });
    open.push(m);
    return m;
  }

  async function pair(
    serverExtra: Partial<MessengerOptions> = {},
    clientExtra: Partial<MessengerOptions> = {},
  ): Promise<{ server: Messenger; client: Messenger; atServer: PeerInfo; atClient: PeerInfo }> {
    const server = await node('server', serverExtra);
    const client = await node('client', clientExtra);
    const seen = nextPeer(server);
    const atClient = await client.connect(server.addresses[0] as string);
    const atServer = await within(seen, 2_000, 'server onPeer');
    return { server, client, atServer, atClient };
  }

  async function raw(address: string): Promise<Raw> {
    const adapter = h.client()[0] as TransportAdapter;
    adapters.push(adapter);
    return new Promise<Raw>((resolve, reject) => {
      adapter.dial(
        { address, lane: 0, frameLimit: 1 << 20, maxMessageSize: 1 << 20, reconnect: false, runtime: systemRuntime() },
        {
          open(conn) {
            const messages: Uint8Array[] = [];
            let done!: (e: LanemuxError) => void;
            const closed = new Promise<LanemuxError>((r) => (done = r));
            conn.start({ message: (b) => messages.push(b.slice()), closed: (e) => done(e) });
            resolve({ conn, messages, closed });
          },
          fail: reject,
        },
      );
    });
  }

  it('exchanges identities in the hello and agrees on lanes', async () => {
    const { server, client, atServer, atClient } = await pair();
    expect(atClient.id).toBe(server.self.id);
    expect(atClient.workerId).toBe(server.self.workerId);
    expect(atClient.instanceId).toBe(server.self.instanceId);
    expect(atClient.lanes).toBe(h.lanes);
    expect(atClient.maxMessageSize).toBe(MAX);
    expect(atClient.transportKeys).toEqual(['messenger-mux-v2']);
    expect(atClient.protocolVersion).toBe(PROTOCOL_VERSION);
    expect(atClient.address).toBe(server.addresses[0]);
    expect(atClient.epoch).toBeGreaterThan(0);
    expect(atServer.id).toBe(client.self.id);
    expect(atServer.workerId).toBe(client.self.workerId);
    expect(client.lanes(atClient.id)).toBe(h.lanes);
    expect(server.lanes(atServer.id)).toBe(h.lanes);
    expect(client.maxMessageSize(atClient.id)).toBe(MAX - 1);
    expect(client.peers().map((p) => p.id)).toEqual([server.self.id]);
    expect(client.lanes('0000000000000000')).toBe(0);
  });

  it('keeps per-lane order under concurrent senders, in both directions', async () => {
    const server = await node('server');
    const clients = await Promise.all([node('client'), node('client'), node('client')]);
    const perSender = 150;
    const got = new Map<string, number[]>();
    const record = (at: string, from: string, lane: number, payload: Uint8Array): void => {
      const { tag, seq } = readTag(payload);
      expect(tag).toBe(lane);
      expect(intact(payload)).toBe(true);
      const key = `${at}<-${from}/${lane}`;
      let list = got.get(key);
      if (list === undefined) got.set(key, (list = []));
      list.push(seq);
    };
    // Batches and named messages share the per-lane order.
    for (const m of [server, ...clients]) {
      const handler = (from: string, lane: number, payload: Uint8Array): void => record(m.self.id, from, lane, payload);
      for (let lane = 0; lane < h.lanes; lane++) m.registerBatchHandler(lane, handler);
      m.on('tok', handler);
    }
    const peersAtServer: string[] = [];
    server.onPeer((p) => peersAtServer.push(p.id));
    const ids = await Promise.all(clients.map((c) => c.connect(server.addresses[0] as string)));
    await waitFor(() => peersAtServer.length === clients.length, 2_000, 'server sees every client');

    const pump = async (m: Messenger, to: string): Promise<void> => {
      await Promise.all(
        Array.from({ length: h.lanes }, async (_, lane) => {
          for (let seq = 0; seq < perSender; seq++) {
            const payload = tagged(16 + (seq % 200), lane, seq);
            const a = seq % 3 === 0 ? m.send(to, lane, 'tok', payload) : m.sendBatch(to, lane, payload);
            // The caller may reuse its buffer at once: scribble over it.
            payload.fill(0xee);
            if (a !== true) await a;
          }
        }),
      );
    };
    await Promise.all([
      ...clients.map((c, i) => pump(c, (ids[i] as PeerInfo).id)),
      ...peersAtServer.map((id) => pump(server, id)),
    ]);
    const expected = Array.from({ length: perSender }, (_, i) => i);
    await waitFor(
      () => [...got.values()].reduce((n, l) => n + l.length, 0) === perSender * h.lanes * clients.length * 2,
      5_000,
      'all messages',
    );
    expect(got.size).toBe(h.lanes * clients.length * 2);
    for (const list of got.values()) expect(list).toEqual(expected);
  });

  it('carries messages up to the maximum and refuses larger ones clearly', async () => {
    const { server, client, atClient } = await pair();
    const received: Uint8Array[] = [];
    const lane = h.lanes - 1;
    server.registerBatchHandler(lane, (_f, _l, p) => received.push(p.slice()));
    server.on('big', (_f, _l, p) => received.push(p.slice()));
    const max = client.maxMessageSize(atClient.id);
    const full = tagged(max, lane, 1);
    const a = client.sendBatch(atClient.id, lane, full);
    if (a !== true) await a;
    const named = tagged(max - 'big'.length - 1, lane, 2);
    const b = client.send(atClient.id, lane, 'big', named);
    if (b !== true) await b;
    await waitFor(() => received.length === 2, 5_000, 'two maximal messages');
    expect(received[0]?.byteLength).toBe(max);
    expect(intact(received[0] as Uint8Array)).toBe(true);
    expect(intact(received[1] as Uint8Array)).toBe(true);

    const over = client.sendBatch(atClient.id, lane, new Uint8Array(max + 1));
    expect(over).not.toBe(true);
    await expect(over).rejects.toMatchObject({ code: 'ERR_FRAME_TOO_LARGE' });
    await expect(client.send(atClient.id, lane, 'big', new Uint8Array(max))).rejects.toMatchObject({
      code: 'ERR_FRAME_TOO_LARGE',
    });
    await expect(client.request(atClient.id, 'x', new Uint8Array(MAX))).rejects.toMatchObject({
      code: 'ERR_FRAME_TOO_LARGE',
    });
    // Bad lane and unknown peer are refusals too, never throws.
    await expect(client.sendBatch(atClient.id, h.lanes, new Uint8Array(1))).rejects.toMatchObject({
      code: 'ERR_BAD_LANE',
    });
    await expect(client.sendBatch('00000000000000aa', 0, new Uint8Array(1))).rejects.toMatchObject({
      code: 'ERR_UNKNOWN_PEER',
    });
    // The link survived the refusals.
    await expect(client.ping(atClient.id)).resolves.toBeTypeOf('number');
  });

  /**
   * Send 64 KiB batches, awaiting admission, until one admission stays pending for 150 ms: the
   * reader is really stalled (TCP kernel buffers autotune, so the first wait may still drain).
   */
  async function fillUntilStalled(
    m: Messenger,
    peer: string,
    lane: number,
  ): Promise<{ pending: Promise<void>; sent: number }> {
    for (let seq = 0; seq < 4096; seq++) {
      const a = m.sendBatch(peer, lane, tagged(64 * 1024, lane, seq));
      if (a === true) continue;
      const soon = await Promise.race([
        a.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), 150)),
      ]);
      if (!soon) return { pending: a, sent: seq + 1 };
    }
    throw new Error('admission never waited: the transport queues without bound');
  }

  const pauses = h.pauses ?? true;
  if (!pauses) {
    it('cannot pause reading: pause() returns false and the link stays usable', async () => {
      const { server, client, atServer, atClient } = await pair();
      server.handle('echo', (_f, b) => b);
      expect(server.pause(atServer.id)).toBe(false);
      await expect(client.request(atClient.id, 'echo', 'after pause')).resolves.toBe('after pause');
      server.resume(atServer.id);
      await expect(client.ping(atClient.id)).resolves.toBeTypeOf('number');
    });
  }

  if (pauses)
    it('makes admission wait while the reader is stalled, stays bounded, then drains', async () => {
      const { server, client, atServer, atClient } = await pair();
      const lane = h.lanes - 1;
      const seqs: number[] = [];
      server.registerBatchHandler(lane, (_f, _l, p) => {
        seqs.push(readTag(p).seq);
      });
      expect(server.pause(atServer.id)).toBe(true);
      const { pending, sent } = await fillUntilStalled(client, atClient.id, lane);
      // A sender that does not wait for admission is refused, never queued without bound.
      const extra: Promise<void>[] = [];
      let refused: unknown;
      let seq = sent;
      for (let i = 0; i < 1024 && refused === undefined; i++, seq++) {
        const a = client.sendBatch(atClient.id, lane, tagged(64 * 1024, lane, seq));
        if (a === true) throw new Error('admitted while others wait');
        extra.push(
          a.catch((e: unknown) => {
            refused ??= e;
          }),
        );
        await isSettled(a);
      }
      expect(isLanemuxError(refused, 'ERR_SEND_REFUSED')).toBe(true);
      const accepted = sent + extra.length - 1;
      // Memory stays flat: nothing grows while the reader is stalled.
      const samples: number[] = [];
      for (let i = 0; i < 10; i++) {
        samples.push(client.bufferedAmount(atClient.id, lane));
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(Math.max(...samples)).toBeLessThanOrEqual(samples[0] as number);
      // At most the high-water mark, one message over it, and the bounded pending queue (1 MiB here).
      expect(samples[0]).toBeLessThanOrEqual(256 * 1024 + 64 * 1024 + 1024 * 1024 + 1024);
      expect(await isSettled(pending)).toBe(false);

      server.resume(atServer.id);
      await within(pending, 5_000, 'admission after resume');
      await within(Promise.all(extra), 5_000, 'queued admissions');
      await waitFor(() => seqs.length === accepted, 5_000, `${accepted} messages after resume`);
      // In order, and only the refused one is missing.
      expect(seqs).toEqual([...Array.from({ length: accepted }, (_, i) => i)]);
    });

  it('does unary round trips, remote errors, timeouts and aborts', async () => {
    const { server, client, atClient } = await pair();
    server.handle('echo', (from, body) => ({ from, body }));
    server.handle('async', async (_from, body) => {
      await new Promise((r) => setTimeout(r, 5));
      return (body as number) * 2;
    });
    server.handle('fails', () => {
      throw new LanemuxError('ERR_APP_SPECIFIC', 'nope', { retryable: true });
    });
    let aborted: unknown;
    const started: string[] = [];
    server.handle('hang', (_from, body, signal) => {
      started.push(body as string);
      return new Promise((_, reject) => {
        signal.addEventListener('abort', () => {
          aborted = signal.reason;
          reject(signal.reason);
        });
      });
    });
    const id = atClient.id;
    await expect(client.request(id, 'echo', { a: [1, 2, 3], n: 2n ** 60n })).resolves.toEqual({
      from: client.self.id,
      body: { a: [1, 2, 3], n: 2n ** 60n },
    });
    await expect(client.request(id, 'async', 21)).resolves.toBe(42);
    const many = await Promise.all(Array.from({ length: 200 }, (_, i) => client.request(id, 'async', i)));
    expect(many).toEqual(Array.from({ length: 200 }, (_, i) => i * 2));
    await expect(client.request(id, 'fails', null)).rejects.toMatchObject({
      code: 'ERR_APP_SPECIFIC',
      retryable: true,
    });
    await expect(client.request(id, 'nobody', null)).rejects.toMatchObject({ code: 'ERR_UNKNOWN_HANDLER' });

    const t0 = performance.now();
    await expect(client.request(id, 'hang', 'timeout', { timeoutMs: 50 })).rejects.toMatchObject({
      code: 'ERR_TIMEOUT',
      retryable: true,
    });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
    await waitFor(() => aborted !== undefined, 2_000, 'remote handler sees the cancel');

    aborted = undefined;
    const ac = new AbortController();
    const p = client.request(id, 'hang', 'abort', { signal: ac.signal });
    await waitFor(() => started.includes('abort'), 2_000, 'handler started');
    ac.abort(new Error('user gave up'));
    await expect(p).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await waitFor(() => aborted !== undefined, 2_000, 'remote handler sees the abort');
    await expect(client.request(id, 'echo', 1, { signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: 'ERR_ABORTED',
    });
    // Round-trip time of a ping is reported.
    expect(await client.ping(id)).toBeGreaterThanOrEqual(0);
  });

  if (pauses)
    it('reports a peer that stops answering gone within the health-check bound', async () => {
      const intervalMs = 100;
      const timeoutMs = 150;
      const { server, client, atServer, atClient } = await pair({}, { healthCheck: { intervalMs, timeoutMs } });
      // Healthy for a few rounds.
      await new Promise((r) => setTimeout(r, intervalMs * 3));
      expect(client.peer(atClient.id)).toBeDefined();
      const gone = nextGone(client, (e) => e.peer === atClient.id);
      // "Kill" the server silently: it stops reading, so pings go unanswered (no FIN, no RST).
      server.pause(atServer.id);
      const t0 = performance.now();
      const e = await within(gone, 3_000, 'peer gone');
      const took = performance.now() - t0;
      expect(e.code).toBe('ERR_HEALTH_CHECK_FAILED');
      expect(e.epoch).toBe(atClient.epoch);
      // The bound is interval + timeout (~250 ms measured); the slack absorbs timer lateness on a loaded
      // 2-core CI box, where this runs once per adapter beside other files, and still fails a check that
      // waits several intervals too many.
      expect(took).toBeLessThanOrEqual(intervalMs + timeoutMs + 1_500);
      expect(client.peer(atClient.id)?.epoch ?? 0).not.toBe(atClient.epoch);
    });

  it('reports a peer that closes gone at once, and fails its pending requests retryably', async () => {
    const { server, client, atClient } = await pair();
    server.handle('hang', () => new Promise(() => {}));
    const pending = client.request(atClient.id, 'hang', null, { timeoutMs: 10_000 });
    const outcome = pending.catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 20));
    const gone = nextGone(client, (e) => e.peer === atClient.id);
    await server.close();
    const e = await within(gone, 2_000, 'peer gone after close');
    expect(e.code).toBe('ERR_PEER_GONE');
    expect(await outcome).toMatchObject({ code: 'ERR_PEER_GONE', retryable: true });
    await expect(client.sendBatch(atClient.id, 0, new Uint8Array(4))).rejects.toMatchObject({
      code: 'ERR_UNKNOWN_PEER',
    });
  });

  it('closes a connection that sends garbage, with a clear error, and leaves other peers untouched', async () => {
    const { server, client, atClient } = await pair();
    server.handle('echo', (_f, b) => b);
    const gone: string[] = [];
    server.onPeerGone((e) => gone.push(e.code));
    const address = server.addresses[0] as string;

    // 1. Garbage instead of a HELLO.
    const r1 = await raw(address);
    void r1.conn.send(Uint8Array.from([0x47, 0x45, 0x54, 0x20, 0x2f, 0x0d, 0x0a]));
    const e1 = await within(r1.closed, 3_000, 'garbage connection closed');
    expect(e1).toBeInstanceOf(LanemuxError);
    const goaway1 = r1.messages.find((m) => m[0] === 0xf1);
    expect(goaway1, 'a GOAWAY explains the close').toBeDefined();

    // 2. A valid HELLO, then a message of an unknown kind: the established link is closed.
    const r2 = await raw(address);
    const fake = 0x1234567890abcdefn;
    void r2.conn.send(
      encodeHello({
        protocolVersion: PROTOCOL_VERSION,
        worker: fake.toString(16),
        instance: 'raw',
        session: 1,
        lane: 0,
        lanes: 1,
        maxMessageSize: MAX,
        keys: [],
      }),
    );
    await waitFor(() => r2.messages.length > 0, 2_000, 'HELLO answer');
    expect(r2.messages[0]?.[0]).toBe(0xf0);
    void r2.conn.send(Uint8Array.from([0x7e, 1, 2, 3]));
    await within(r2.closed, 3_000, 'link closed after bad kind');
    const goaway2 = r2.messages.find((m) => m[0] === 0xf1);
    expect(goaway2).toBeDefined();
    expect(new TextDecoder().decode(goaway2)).toContain('ERR_MALFORMED_ENVELOPE');
    await waitFor(() => gone.includes('ERR_MALFORMED_ENVELOPE'), 2_000, 'server reports the bad peer gone');

    // 3. A HELLO frame larger than the pre-hello limit.
    const r3 = await raw(address);
    void r3.conn.send(new Uint8Array(HELLO_FRAME_LIMIT + 1));
    await within(r3.closed, 3_000, 'oversized hello closed');

    // The honest peer never noticed.
    expect(client.peer(atClient.id)?.epoch).toBe(atClient.epoch);
    await expect(client.request(atClient.id, 'echo', 'still here')).resolves.toBe('still here');
    expect(gone.filter((c) => c !== 'ERR_MALFORMED_ENVELOPE')).toEqual([]);
  });

  it('gets a fresh epoch after the server restarts; nothing from the old link reaches the new one', async () => {
    const server1 = await node('server');
    const client = await node('client');
    const address = server1.addresses[0] as string;
    const first = await client.connect(address);
    const atServer1 = server1.peers()[0] as PeerInfo;
    // Stall the old server and leave an admission pending on the old link (if the server can stall).
    let outcome: Promise<unknown> | undefined;
    if (pauses) {
      server1.pause(atServer1.id);
      const { pending } = await fillUntilStalled(client, first.id, 0);
      outcome = pending.then(
        () => 'admitted',
        (e: unknown) => e,
      );
    }
    const gone = nextGone(client, (e) => e.epoch === first.epoch);
    await server1.close();
    open.splice(open.indexOf(server1), 1);
    await within(gone, 3_000, 'old link gone');
    if (outcome !== undefined) expect(await outcome).toMatchObject({ code: 'ERR_PEER_GONE', retryable: true });

    // The same worker restarts: same worker id, new instance id.
    const server2 = await node('server', { workerId: server1.self.workerId }, address);
    expect(server2.addresses[0]).toBe(address);
    const received: number[] = [];
    server2.registerBatchHandler(0, (_f, _l, p) => received.push(readTag(p).seq));
    const back = h.reconnects
      ? nextPeer(client, (p) => p.instanceId === server2.self.instanceId)
      : client.connect(address);
    const second = await within(back, 5_000, 'link re-established');
    expect(second.id).toBe(first.id);
    expect(second.instanceId).toBe(server2.self.instanceId);
    expect(second.instanceId).not.toBe(first.instanceId);
    expect(second.epoch).toBeGreaterThan(first.epoch);
    // A batch encoded for the old epoch is refused, never sent on the new link.
    await expect(client.sendBatch(second.id, 0, tagged(8, 0, 999), { epoch: first.epoch })).rejects.toMatchObject({
      code: 'ERR_PEER_GONE',
    });
    const a = client.sendBatch(second.id, 0, tagged(8, 0, 7), { epoch: second.epoch });
    if (a !== true) await a;
    await waitFor(() => received.length === 1, 2_000, 'fresh batch');
    expect(received).toEqual([7]);
  });
}
