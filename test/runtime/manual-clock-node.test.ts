// Whole nodes on one manual clock: the runtime given to createNode reaches the messenger, the
// transport core (hello, connect, link timers) and the adapters (memory delivery, the WebTransport
// client's reconnect back-off), so time passes only when the test says so and no global timer is set.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { webTransportClientTransport, type WebTransportSession } from '../../src/adapters/webtransport.ts';
import { WtSessionLanes, WtStreamConn, type WtBidiStream } from '../../src/adapters/webtransport-stream.ts';
import type { DialEndedEvent } from '../../src/messenger/types.ts';
import { createMessenger, type MessengerOptions } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import type { ListenHost, TransportAdapter } from '../../src/transport/port.ts';
import { MESSENGER_MUX_KEY } from '../../src/wire/constants.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';
import { readAll } from '../support/read-all.ts';

let rt = new ManualRuntime();
const nodes: LanemuxNode[] = [];
const messengers: Messenger[] = [];

afterEach(async () => {
  const closing = Promise.all([
    ...nodes.splice(0).map((n) => n.close()),
    ...messengers.splice(0).map((m) => m.close()),
  ]);
  await drive(closing);
  vi.restoreAllMocks();
  rt = new ManualRuntime();
});

/** Run the manual runtime's macrotasks, its clock standing still, until `p` settles. */
async function drive<T>(p: Promise<T>): Promise<T> {
  const s = watch(p);
  for (let i = 0; i < 1_000 && !s.settled; i++) await rt.runMacrotasks();
  if (!s.settled) throw new Error('still pending while the manual clock stands still');
  return p;
}

/** Let the manual clock run 1 ms at a time (the mux's credit replies linger 1 ms) until `p` settles. */
async function tick<T>(p: Promise<T>, limitMs = 10_000): Promise<T> {
  const s = watch(p);
  for (let i = 0; i < limitMs && !s.settled; i++) await rt.advance(1);
  if (!s.settled) throw new Error(`still pending after ${limitMs} ms of the manual clock`);
  return p;
}

/** Whether `p` has settled yet (its rejection is handled by whoever awaits `p`). */
function watch(p: Promise<unknown>): { readonly settled: boolean } {
  const s = { settled: false };
  p.then(
    () => (s.settled = true),
    () => (s.settled = true),
  );
  return s;
}

/** Count calls of the global timers from now on. */
function globalTimers(): () => number {
  const spies = [
    vi.spyOn(globalThis, 'setTimeout'),
    vi.spyOn(globalThis, 'setInterval'),
    vi.spyOn(globalThis, 'setImmediate'),
  ];
  return () => spies.reduce((n, s) => n + s.mock.calls.length, 0);
}

async function node(transports: TransportAdapter[]): Promise<LanemuxNode> {
  const n = await createNode({ transports, runtime: rt });
  nodes.push(n);
  return n;
}

/** A node on a messenger of its own making (timeouts createNode does not expose), on the same clock. */
async function nodeOn(options: MessengerOptions): Promise<{ node: LanemuxNode; messenger: Messenger }> {
  const messenger = await createMessenger({ transportKeys: [MESSENGER_MUX_KEY], runtime: rt, ...options });
  messengers.push(messenger);
  const n = await createNode({ messenger, runtime: rt });
  nodes.push(n);
  return { node: n, messenger };
}

const peerId = (n: LanemuxNode): string => n.workerId.toString(16).padStart(16, '0');

describe('hello timeouts on the manual clock', () => {
  it('an acceptor whose authenticate never answers drops the connection exactly when its 10 s hello timeout passes', async () => {
    const timers = globalTimers();
    const network = createMemoryNetwork();
    let authCalls = 0;
    const stuck = memoryTransport({
      network,
      name: 'stuck',
      authenticate: () => {
        authCalls++;
        return new Promise<string>(() => {});
      },
    });
    const acceptor = await node([stuck]);
    const { node: dialler } = await nodeOn({
      transports: [memoryTransport({ network, listen: false })],
      helloTimeoutMs: 60_000,
      connectTimeoutMs: 60_000,
    });
    const connect = dialler.connect(acceptor.address);
    const state = watch(connect);
    await rt.runMacrotasks();
    expect(authCalls, 'the HELLO reached the acceptor').toBe(1);
    await rt.advance(9_999);
    expect(state.settled, 'still in its hello 1 ms before the timeout').toBe(false);
    await rt.advance(1);
    await expect(drive(connect)).rejects.toMatchObject({
      code: 'ERR_CONNECT',
      message: expect.stringContaining('no complete hello from memory://'),
    });
    expect(timers()).toBe(0);
  });

  it("a dialler whose HELLO is never answered gives up exactly at its helloTimeoutMs, before the acceptor's", async () => {
    const timers = globalTimers();
    const network = createMemoryNetwork();
    const acceptor = await node([
      memoryTransport({ network, name: 'stuck', authenticate: () => new Promise<string>(() => {}) }),
    ]);
    const { node: dialler } = await nodeOn({
      transports: [memoryTransport({ network, listen: false })],
      helloTimeoutMs: 2_000,
      connectTimeoutMs: 60_000,
    });
    const connect = dialler.connect(acceptor.address);
    const state = watch(connect);
    await rt.advance(1_999);
    expect(state.settled).toBe(false);
    await rt.advance(1);
    await expect(drive(connect)).rejects.toMatchObject({
      code: 'ERR_HANDSHAKE',
      retryable: true,
      message: expect.stringContaining('did not complete within 2000 ms'),
    });
    expect(timers()).toBe(0);
  });
});

describe('the health check on the manual clock', () => {
  it('closes a link whose peer stops reading once one interval and one ping timeout (5 s + 5 s) have passed', async () => {
    const timers = globalTimers();
    const network = createMemoryNetwork();
    // The peer checks nobody itself: only the checking node's health check can close the link.
    const { node: peer, messenger: peerMessenger } = await nodeOn({
      transports: [memoryTransport({ network, name: 'peer' })],
      healthCheck: false,
    });
    const checker = await node([memoryTransport({ network, listen: false })]);
    const ended: DialEndedEvent[] = [];
    checker.onDialEnded((e) => ended.push(e));
    expect(await drive(checker.connect(peer.address))).toBe(peerId(peer));
    // The peer stops reading: the checker's PING is never answered.
    expect(peerMessenger.pause(peerId(checker))).toBe(true);
    await rt.advance(9_999);
    expect(ended).toEqual([]);
    await rt.advance(1);
    expect(ended).toHaveLength(1);
    expect(ended[0]).toMatchObject({ address: peer.address, code: 'ERR_HEALTH_CHECK_FAILED' });
    expect(ended[0]!.reason).toContain('unanswered after 5000 ms');
    expect(timers()).toBe(0);
  });
});

describe('a reconnecting dial on the manual clock', () => {
  it('re-dials a dropped WebTransport link only when the back-off has passed on the manual clock (20 s, none real)', async () => {
    const timers = globalTimers();
    const fake = fakeWebTransport();
    const server = await node([fake.server]);
    const client = await node([
      webTransportClientTransport({
        WebTransport: fake.WebTransport,
        minReconnectionDelay: 20_000,
        reconnectionJitter: 0,
        maxReconnectionDelay: 20_000,
      }),
    ]);
    const ended: DialEndedEvent[] = [];
    client.onDialEnded((e) => ended.push(e));
    const startedAt = performance.now();
    await rt.advance(100);
    expect(await drive(client.connect(server.address))).toBe(peerId(server));
    expect(fake.sessions).toHaveLength(1);

    fake.sessions[0]!.drop();
    await rt.advance(19_999);
    expect(fake.sessions, 'no new session before the back-off').toHaveLength(1);
    await rt.advance(1);
    expect(fake.sessions, 'a new session when it has passed').toHaveLength(2);
    // The dial kept going: a connect joins it and gets the re-established link.
    expect(await drive(client.connect(server.address))).toBe(peerId(server));
    expect(ended).toEqual([]);
    expect(performance.now() - startedAt, 'the 20 s back-off took no real time').toBeLessThan(10_000);
    expect(timers()).toBe(0);
  });
  it("connect's reconnect policy replaces a re-dialling adapter's own back-off for that dial; reconnect: true keeps the adapter's", async () => {
    const fake = fakeWebTransport();
    const server = await node([fake.server]);
    const slow = { WebTransport: fake.WebTransport, minReconnectionDelay: 20_000, reconnectionJitter: 0 };
    const client = await node([webTransportClientTransport(slow)]);
    await rt.advance(100);
    expect(
      await drive(client.connect(server.address, { reconnect: { initialDelayMs: 50, jitterMs: 0, maxDelayMs: 50 } })),
    ).toBe(peerId(server));
    fake.sessions[0]!.drop();
    await rt.advance(49);
    expect(fake.sessions, "not before the policy's 50 ms").toHaveLength(1);
    await rt.advance(1);
    expect(fake.sessions, "at the policy's 50 ms, not the adapter's 20 s").toHaveLength(2);

    const other = await node([webTransportClientTransport(slow)]);
    expect(await drive(other.connect(server.address, { reconnect: true }))).toBe(peerId(server));
    const before = fake.sessions.length;
    fake.sessions.at(-1)!.drop();
    await rt.advance(19_999);
    expect(fake.sessions, "reconnect: true: the adapter's own 20 s").toHaveLength(before);
    await rt.advance(1);
    expect(fake.sessions).toHaveLength(before + 1);
  });

  it('every WebTransport link that formed starts the back-off over: a session dropped each time it comes back re-opens after the first delay', async () => {
    const fake = fakeWebTransport();
    const server = await node([fake.server]);
    const client = await node([
      webTransportClientTransport({
        WebTransport: fake.WebTransport,
        minReconnectionDelay: 1_000,
        reconnectionJitter: 0,
        reconnectionDelayGrowFactor: 2,
        maxReconnectionDelay: 60_000,
      }),
    ]);
    await rt.advance(100);
    expect(await drive(client.connect(server.address))).toBe(peerId(server));
    for (let drop = 1; drop <= 6; drop++) {
      fake.sessions.at(-1)!.drop();
      await rt.advance(999);
      expect(fake.sessions, `drop ${drop}: not before the first delay`).toHaveLength(drop);
      await rt.advance(1);
      expect(fake.sessions, `drop ${drop}: at the first delay, not a grown one`).toHaveLength(drop + 1);
      expect(await drive(client.connect(server.address))).toBe(peerId(server));
    }
  });
});

describe('a whole exchange on the manual clock', () => {
  it('connects two nodes, streams 200 items through the mux and closes them with no global timer set', async () => {
    const timers = globalTimers();
    const network = createMemoryNetwork();
    const consumer = await node([memoryTransport({ network, name: 'consumer' })]);
    const producer = await node([memoryTransport({ network, listen: false })]);
    await drive(producer.connect(consumer.address));
    const anchor = consumer.createAnchor<number>();
    const sender = await drive(producer.attachAnchor<number>(anchor.handle));
    expect(sender.negotiatedTransport).toBe('messenger-mux-v2');
    const read = readAll(anchor);
    const items = Array.from({ length: 200 }, (_, i) => i);
    const sending = (async () => {
      for (const i of items) await sender.send(i);
      await sender.finalize();
    })();
    await tick(sending);
    expect(await tick(read)).toEqual(items);
    await tick(Promise.all([consumer.close(), producer.close()]));
    expect(rt.time, 'the manual clock moved, a few ms').toBeGreaterThan(0);
    expect(rt.time).toBeLessThan(1_000);
    expect(timers()).toBe(0);
  });
});

/**
 * A `WebTransport` constructor whose sessions end at `server`, an in-process listening adapter that
 * serves each session's bidirectional streams as lanes ({@link WtStreamConn}, as the Deno server
 * does). WHATWG streams only: no network and no timers. `drop()` ends a session for both sides.
 */
function fakeWebTransport() {
  let host: ListenHost | undefined;
  const limits = { highWaterMark: 1 << 20, maxPendingBytes: 8 << 20 };
  const server: TransportAdapter = {
    name: 'fake-webtransport-server',
    dialSchemes: [],
    async listen(h) {
      host = h;
      return 'https://fake.test/lanemux';
    },
    dial() {
      throw new Error('the fake server does not dial');
    },
    async close() {},
  };
  const sessions: FakeSession[] = [];
  class FakeSession implements WebTransportSession {
    readonly ready = Promise.resolve();
    readonly closed: Promise<unknown>;
    readonly #lanes: WtSessionLanes;
    #end!: () => void;
    constructor(_url: string) {
      this.closed = new Promise<unknown>((resolve) => (this.#end = () => resolve(undefined)));
      if (host === undefined) throw new Error('the fake server is not listening');
      this.#lanes = new WtSessionLanes({ closed: this.closed, close: () => this.#end() }, 'fake', 1_000, host.runtime);
      sessions.push(this);
    }
    async createBidirectionalStream(): Promise<WtBidiStream> {
      const h = host as ListenHost;
      const up = new TransformStream<Uint8Array, Uint8Array>();
      const down = new TransformStream<Uint8Array, Uint8Array>();
      const conn = new WtStreamConn(
        { readable: up.readable, writable: down.writable },
        'fake',
        h.frameLimit,
        limits,
        this.#lanes,
      );
      h.accept(conn);
      return { readable: down.readable, writable: up.writable };
    }
    close(): void {
      this.#end();
    }
    /** The network loses the session: both ends see it closed. */
    drop(): void {
      this.#end();
    }
  }
  return { server, sessions, WebTransport: FakeSession };
}
