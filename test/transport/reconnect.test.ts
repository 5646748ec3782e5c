// `connect(address, { reconnect })` on an adapter that does not reconnect by itself (memory here):
// the transport core re-dials with jittered exponential back-off on the node's runtime, presents
// the last link's claim token, stops on a terminal refusal or a local close, gives up within its
// bounds, and a connect always settles — whatever the adapter does. Manual clock throughout.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport, type MemoryNetwork } from '../../src/adapters/memory.ts';
import { createMessenger, type MessengerOptions } from '../../src/messenger/messenger.ts';
import type { Messenger, PeerStateEvent } from '../../src/messenger/types.ts';
import { TransportError } from '../../src/transport/errors.ts';
import type { Connection, ConnectionReceiver, DialRequest, TransportAdapter } from '../../src/transport/port.ts';
import { reconnectDelay, resolveReconnect } from '../../src/transport/reconnect.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

let rt = new ManualRuntime();
const open: Messenger[] = [];

afterEach(async () => {
  await drive(Promise.all(open.splice(0).map((m) => m.close())));
  rt = new ManualRuntime();
});

async function drive<T>(p: Promise<T>): Promise<T> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 1_000 && !settled; i++) await rt.runMacrotasks();
  if (!settled) throw new Error('still pending while the manual clock stands still');
  return p;
}

async function messenger(
  options: Partial<MessengerOptions> & Pick<MessengerOptions, 'transports'>,
): Promise<Messenger> {
  const m = await createMessenger({ healthCheck: false, runtime: rt, ...options });
  open.push(m);
  return m;
}

function record(m: Messenger): PeerStateEvent[] {
  const events: PeerStateEvent[] = [];
  m.onPeerState!((e) => events.push(e));
  return events;
}

/**
 * A connection the test can sever on this side only: the dialler sees it closed, the acceptor still
 * holds its end (a half-open TCP connection, as after a cable pull).
 */
class Severable implements Connection {
  readonly #inner: Connection;
  #receiver: ConnectionReceiver | undefined;
  #severed = false;

  constructor(inner: Connection) {
    this.#inner = inner;
  }
  get remote(): string {
    return this.#inner.remote;
  }
  start(receiver: ConnectionReceiver): void {
    this.#receiver = receiver;
    this.#inner.start({
      message: (bytes) => {
        if (!this.#severed) receiver.message(bytes);
      },
      closed: (error) => {
        if (!this.#severed) receiver.closed(error);
      },
    });
  }
  setFrameLimit(bytes: number): void {
    this.#inner.setFrameLimit(bytes);
  }
  send(head: Uint8Array, body?: Uint8Array) {
    if (this.#severed) return Promise.reject(new TransportError('ERR_PEER_GONE', 'severed', { retryable: true }));
    return this.#inner.send(head, body);
  }
  bufferedAmount(): number {
    return this.#inner.bufferedAmount();
  }
  pause(): boolean {
    return this.#inner.pause();
  }
  resume(): void {
    this.#inner.resume();
  }
  close(reason: Parameters<Connection['close']>[0], mode?: Parameters<Connection['close']>[1]): void {
    if (!this.#severed) this.#inner.close(reason, mode);
  }
  sever(): void {
    if (this.#severed) return;
    this.#severed = true;
    this.#receiver?.closed(new TransportError('ERR_PEER_GONE', 'network cut', { retryable: true }));
  }
}

/** Wrap an adapter's dials: every connection is {@link Severable}; `requests` records each dial request. */
function wrapped(inner: TransportAdapter, reconnects?: boolean) {
  const conns: Severable[] = [];
  const requests: DialRequest[] = [];
  const adapter: TransportAdapter = {
    name: inner.name,
    dialSchemes: inner.dialSchemes,
    ...(reconnects !== undefined ? { reconnects } : {}),
    listen: (host) => inner.listen(host),
    dial: (request, events) => {
      requests.push(request);
      let mine: Severable | undefined;
      const handle = inner.dial(request, {
        open: (conn) => {
          mine = new Severable(conn);
          conns.push(mine);
          events.open(mine);
        },
        fail: (error) => events.fail(error),
      });
      // Closing the dial closes its connection through the wrapper, so a severed one stays open on the far side.
      return {
        close: () =>
          mine === undefined ? handle.close() : mine.close(new TransportError('ERR_CLOSED', 'dial closed'), 'abort'),
      };
    },
    close: () => inner.close(),
  };
  return { adapter, requests, sever: () => conns.splice(0).forEach((c) => c.sever()) };
}

async function pair(network: MemoryNetwork, server: Partial<MessengerOptions> = {}) {
  const s = await messenger({ transports: [memoryTransport({ network, name: 'server' })], ...server });
  const w = wrapped(memoryTransport({ network, listen: false }));
  const c = await messenger({ transports: [w.adapter] });
  return { server: s, client: c, ...w, address: 'memory://server' };
}

describe('the re-dial back-off', () => {
  it('defaults to the WebSocket client’s: first 500 ms + random·2,500 ms, ×1.3 per attempt, at most 30 s', () => {
    const p = resolveReconnect(true);
    expect(p).toEqual({
      initialDelayMs: 500,
      jitterMs: 2_500,
      factor: 1.3,
      maxDelayMs: 30_000,
      maxRetries: 100,
      maxDownMs: 300_000,
    });
    if (p === false || p === undefined) throw new Error('a policy');
    for (let step = 0; step < 30; step++) {
      const d = reconnectDelay(p, step, rt);
      expect(d).toBeGreaterThanOrEqual(Math.min(30_000, 500 * 1.3 ** step));
      expect(d).toBeLessThanOrEqual(Math.min(30_000, 3_000 * 1.3 ** step));
    }
  });

  it('each attempt waits its delay on the runtime and the delays grow until the cap', async () => {
    const { server, client, sever, address } = await pair(createMemoryNetwork());
    const events = record(client);
    await drive(
      client.connect(address, { reconnect: { initialDelayMs: 1_000, jitterMs: 1_000, factor: 2, maxDelayMs: 5_000 } }),
    );
    sever();
    await drive(server.close());
    await rt.advance(60_000);
    const delays = events.filter((e) => e.type === 'reconnecting').map((e) => e.delayMs!);
    expect(delays.length).toBeGreaterThan(6);
    delays.forEach((d, n) => {
      expect(d).toBeGreaterThanOrEqual(Math.min(5_000, 1_000 * 2 ** n));
      expect(d).toBeLessThanOrEqual(Math.min(5_000, 2_000 * 2 ** n));
    });
    expect(delays.slice(3).every((d) => d === 5_000)).toBe(true);
  });

  it('every link that formed starts the back-off over: a link cut each time it comes back waits the first delay every time', async () => {
    const { client, sever, address } = await pair(createMemoryNetwork());
    const events = record(client);
    await drive(client.connect(address, { reconnect: { initialDelayMs: 1_000, jitterMs: 0, factor: 2 } }));
    for (let cut = 0; cut < 8; cut++) {
      const resumed = events.filter((e) => e.type === 'resumed').length;
      sever();
      await rt.advance(1_000);
      expect(events.filter((e) => e.type === 'resumed')).toHaveLength(resumed + 1);
    }
    // Resume needs the link back well within its window however often the network blinks.
    expect(events.filter((e) => e.type === 'reconnecting').map((e) => e.delayMs)).toEqual(Array(8).fill(1_000));
  });

  it('gives up once the link has been down for maxDownMs, however many attempts remain', async () => {
    const { server, client, sever, address } = await pair(createMemoryNetwork());
    const events = record(client);
    const ended: string[] = [];
    client.onDialEnded((e) => ended.push(e.reason));
    await drive(
      client.connect(address, {
        reconnect: { initialDelayMs: 1_000, jitterMs: 0, factor: 1, maxRetries: 1_000, maxDownMs: 10_000 },
      }),
    );
    sever();
    await drive(server.close());
    await rt.advance(9_999);
    expect(ended).toEqual([]);
    await rt.advance(1);
    expect(ended).toHaveLength(1);
    expect(ended[0]).toContain('maxDownMs 10000');
    expect(events.at(-1)?.type).toBe('gone');
    expect(events.filter((e) => e.type === 'reconnecting')).toHaveLength(10);
  });

  it('refuses bad reconnect options with one ConfigError naming each field', async () => {
    const { client, address } = await pair(createMemoryNetwork());
    await expect(client.connect(address, { reconnect: { factor: 0.5, maxRetries: -1 } })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
      fields: ['reconnect.factor', 'reconnect.maxRetries'],
    });
    await expect(client.connect(address, { reconnect: { initialDelay: 5 } as never })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
    });
    await expect(client.connect(address, { reconnect: 'yes' as never })).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
      field: 'reconnect',
    });
  });
});

describe('what the re-dial does and does not do', () => {
  it('presents the last link’s claim token: an acceptor still holding the old (half-open) link takes the re-dial at once for the same peer', async () => {
    const { server, client, sever, address } = await pair(createMemoryNetwork());
    const onServer = record(server);
    const peer = await drive(client.connect(address, { reconnect: { initialDelayMs: 10, jitterMs: 0 } }));
    sever();
    await rt.runMacrotasks();
    expect(server.peers(), 'the acceptor has not noticed').toHaveLength(1);
    await rt.advance(10);
    const back = client.peer(peer.id);
    expect(back?.id).toBe(peer.id);
    expect(back?.epoch).toBeGreaterThan(peer.epoch);
    expect(server.stats().refused.worker_id_in_use).toBe(0);
    expect(server.peers().map((p) => p.instanceId)).toEqual([client.self.instanceId]);
    expect(onServer.map((e) => e.type)).toEqual(['up', 'down', 'resumed']);
    expect(onServer[1]!.error?.message).toContain('superseded');
  });

  it('stops on a terminal refusal: an acceptor that no longer authenticates the dialler ends the dial with ERR_UNAUTHENTICATED', async () => {
    let allow = true;
    const { client, sever, requests, address } = await pair(createMemoryNetwork(), {
      authenticate: () => (allow ? 'client' : null),
    });
    const ended: string[] = [];
    client.onDialEnded((e) => ended.push(e.code));
    const events = record(client);
    await drive(client.connect(address, { reconnect: { initialDelayMs: 10, jitterMs: 0 } }));
    allow = false;
    sever();
    await rt.advance(10_000);
    expect(ended).toEqual(['ERR_UNAUTHENTICATED']);
    expect(requests, 'one re-dial, then none').toHaveLength(2);
    expect(events.map((e) => e.type)).toEqual(['up', 'down', 'reconnecting', 'gone']);
  });

  it('stops when this node disconnects the peer: disconnect means drop it', async () => {
    const { client, requests, address } = await pair(createMemoryNetwork());
    const ended: string[] = [];
    client.onDialEnded((e) => ended.push(e.code));
    const peer = await drive(client.connect(address, { reconnect: true }));
    client.disconnect(peer.id);
    await rt.advance(60_000);
    expect(ended).toEqual(['ERR_CLOSED']);
    expect(requests).toHaveLength(1);
  });

  it('a connect that gives up while the dial re-dials does not stop it: the link comes back after the back-off', async () => {
    const { client, sever, address } = await pair(createMemoryNetwork());
    const events = record(client);
    await drive(client.connect(address, { reconnect: { initialDelayMs: 10_000, jitterMs: 0 } }));
    sever();
    const impatient = client.connect(address, { timeoutMs: 1_000 });
    await rt.advance(1_000);
    await expect(drive(impatient)).rejects.toMatchObject({ code: 'ERR_CONNECT' });
    await rt.advance(9_000);
    expect(events.map((e) => e.type)).toEqual(['up', 'down', 'reconnecting', 'resumed']);
  });

  it('a first connect that cannot reach the address fails at once, reconnect or not', async () => {
    const network = createMemoryNetwork();
    const client = await messenger({ transports: [memoryTransport({ network, listen: false })] });
    await expect(drive(client.connect('memory://nobody', { reconnect: true }))).rejects.toMatchObject({
      code: 'ERR_CONNECT',
    });
    expect(rt.timerCount, 'no re-dial pending, only the messenger tick').toBe(1);
  });

  it('without reconnect a TCP-like dial ends with its link, as before', async () => {
    const { client, sever, requests, address } = await pair(createMemoryNetwork());
    const ended: string[] = [];
    client.onDialEnded((e) => ended.push(e.code));
    await drive(client.connect(address));
    sever();
    await rt.advance(60_000);
    expect(ended).toEqual(['ERR_PEER_GONE']);
    expect(requests).toHaveLength(1);
  });

  it('tells a reconnecting adapter what the connect asked: reconnect false turns its re-dial off, true turns it on', async () => {
    const network = createMemoryNetwork();
    await messenger({ transports: [memoryTransport({ network, name: 'server' })] });
    const w = wrapped(memoryTransport({ network, listen: false }), true);
    const client = await messenger({ transports: [w.adapter], reconnect: false });
    await drive(client.connect('memory://server'));
    await drive(client.connect('memory://server', { reconnect: true }));
    expect(w.requests.map((r) => r.reconnect)).toEqual([false]);
    client.disconnect(client.peers()[0]!.id);
    await drive(client.connect('memory://server', { reconnect: true }));
    expect(w.requests.map((r) => r.reconnect)).toEqual([false, true]);
  });
});

describe('a connect always settles, whatever the adapter does', () => {
  function adapter(dial: TransportAdapter['dial']): TransportAdapter {
    return { name: 'odd', dialSchemes: ['odd'], listen: async () => undefined, dial, close: async () => {} };
  }

  it('an adapter whose dial throws: the connect rejects at once with ERR_CONNECT naming the adapter', async () => {
    const m = await messenger({
      transports: [
        adapter(() => {
          throw new RangeError('port out of range');
        }),
      ],
    });
    await expect(drive(m.connect('odd://x'))).rejects.toMatchObject({
      code: 'ERR_CONNECT',
      message: expect.stringContaining('the odd adapter threw dialling odd://x: port out of range'),
    });
    expect(rt.timerCount, 'the connect deadline is cleared').toBe(1);
    // The failed dial is forgotten: the next connect dials again.
    await expect(drive(m.connect('odd://x'))).rejects.toMatchObject({ code: 'ERR_CONNECT' });
  });

  it('an adapter that reports a failure from inside dial(): the connect rejects with it', async () => {
    const m = await messenger({
      transports: [
        adapter((_request, events) => {
          events.fail(new TransportError('ERR_CONNECT', 'refused synchronously', { retryable: true }));
          return { close() {} };
        }),
      ],
    });
    await expect(drive(m.connect('odd://x'))).rejects.toMatchObject({ message: 'refused synchronously' });
  });

  it('an adapter that never reports: the connect rejects at exactly its timeout and the dial is dropped', async () => {
    let closed = 0;
    const m = await messenger({
      transports: [
        adapter(() => ({
          close() {
            closed++;
          },
        })),
      ],
    });
    let settled = false;
    const p = m.connect('odd://x', { timeoutMs: 2_000, reconnect: true });
    p.catch(() => {}).finally(() => (settled = true));
    await rt.advance(1_999);
    expect(settled).toBe(false);
    await rt.advance(1);
    await expect(p).rejects.toMatchObject({ code: 'ERR_CONNECT', message: expect.stringContaining('2000 ms') });
    expect(closed).toBe(1);
  });
});
