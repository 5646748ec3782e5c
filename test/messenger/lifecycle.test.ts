// Each peer's life as the application sees it — up, down, reconnecting, resumed, gone — in order,
// on both ends of a link, as a listener and as a bounded async iterator; `ready(address)` and
// `waitForPeer(peer)` across a reconnect. Memory transport on a manual clock: time passes only when
// the test says so.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryNetwork, memoryTransport, type MemoryNetwork } from '../../src/adapters/memory.ts';
import { createMessenger, type MessengerOptions } from '../../src/messenger/messenger.ts';
import type { Messenger, PeerEvent, PeerStateEvent } from '../../src/messenger/types.ts';
import { createNode, type LanemuxNode } from '../../src/stream/node.ts';
import { TransportError } from '../../src/transport/errors.ts';
import type { Connection, TransportAdapter } from '../../src/transport/port.ts';
import { MESSENGER_MUX_KEY } from '../../src/wire/constants.ts';
import { ManualRuntime } from '../support/manual-runtime.ts';

let rt = new ManualRuntime();
const open: Messenger[] = [];
const nodes: LanemuxNode[] = [];

afterEach(async () => {
  await drive(Promise.all([...nodes.splice(0).map((n) => n.close()), ...open.splice(0).map((m) => m.close())]));
  rt = new ManualRuntime();
});

/** Run macrotasks, the clock standing still, until `p` settles. */
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

/** A memory adapter whose dialled connections the test can cut, as a lost network would (both ends see it). */
function cuttable(inner: TransportAdapter): { adapter: TransportAdapter; cut(): void } {
  const conns = new Set<Connection>();
  const adapter: TransportAdapter = {
    name: inner.name,
    dialSchemes: inner.dialSchemes,
    listen: (host) => inner.listen(host),
    dial: (request, events) =>
      inner.dial(request, {
        open: (conn) => {
          conns.add(conn);
          events.open(conn);
        },
        fail: (error) => events.fail(error),
      }),
    close: () => inner.close(),
  };
  return {
    adapter,
    cut() {
      for (const c of [...conns])
        c.close(new TransportError('ERR_PEER_GONE', 'network cut', { retryable: true }), 'abort');
      conns.clear();
    },
  };
}

async function messenger(
  options: Partial<MessengerOptions> & Pick<MessengerOptions, 'transports'>,
): Promise<Messenger> {
  const m = await createMessenger({ healthCheck: false, runtime: rt, ...options });
  open.push(m);
  return m;
}

/** Every peer-state event of `m`, compacted to `type` (and `attempt` for reconnecting). */
function record(m: Messenger): PeerStateEvent[] {
  const events: PeerStateEvent[] = [];
  m.onPeerState!((e) => events.push(e));
  return events;
}

const types = (events: readonly PeerStateEvent[]): string[] => events.map((e) => e.type);

/** A server listening at memory://server and a client whose dials can be cut. */
async function pair(network: MemoryNetwork, clientOptions: Partial<MessengerOptions> = {}) {
  const server = await messenger({ transports: [memoryTransport({ network, name: 'server' })] });
  const link = cuttable(memoryTransport({ network, listen: false }));
  const client = await messenger({ transports: [link.adapter], ...clientOptions });
  return { server, client, cut: link.cut, address: 'memory://server' };
}

const fast = { initialDelayMs: 100, jitterMs: 0, factor: 2, maxDelayMs: 1_000 };

describe('peer lifecycle events', () => {
  it('a cut link that re-dials by itself: up → down → reconnecting → resumed on the dialler, up → down → resumed on the acceptor, same instance and address', async () => {
    const { server, client, cut, address } = await pair(createMemoryNetwork());
    const onClient = record(client);
    const onServer = record(server);
    const peer = await drive(client.connect(address, { reconnect: fast }));
    expect(types(onClient)).toEqual(['up']);
    expect(onClient[0]).toMatchObject({ peer: peer.id, instanceId: peer.instanceId, address, epoch: peer.epoch });

    cut();
    await rt.runMacrotasks();
    expect(types(onClient)).toEqual(['up', 'down', 'reconnecting']);
    expect(onClient[1]!.error).toMatchObject({ code: 'ERR_PEER_GONE' });
    expect(onClient[2]).toMatchObject({ attempt: 1, delayMs: 100, address, peer: peer.id });
    expect(client.peer(peer.id)).toBeUndefined();

    await rt.advance(99);
    expect(types(onClient), 'no re-dial before the back-off').toHaveLength(3);
    await rt.advance(1);
    expect(types(onClient)).toEqual(['up', 'down', 'reconnecting', 'resumed']);
    const resumed = onClient[3]!;
    expect(resumed).toMatchObject({ peer: peer.id, workerId: peer.workerId, instanceId: peer.instanceId, address });
    expect(resumed.epoch).toBeGreaterThan(peer.epoch);
    expect(client.peer(peer.id)?.epoch).toBe(resumed.epoch);

    expect(types(onServer)).toEqual(['up', 'down', 'resumed']);
    expect(new Set(onServer.map((e) => e.instanceId))).toEqual(new Set([client.self.instanceId]));
  });

  it('a re-dial that gives up ends the peer: down → reconnecting ×N → gone, with the final error, and onDialEnded', async () => {
    const { server, client, cut, address } = await pair(createMemoryNetwork());
    const onClient = record(client);
    const ended: string[] = [];
    client.onDialEnded((e) => ended.push(e.code));
    await drive(client.connect(address, { reconnect: { ...fast, maxRetries: 3 } }));
    cut();
    // Nothing listens there any more: every attempt is refused.
    await drive(server.close());
    await rt.advance(10_000);
    expect(types(onClient)).toEqual(['up', 'down', 'reconnecting', 'reconnecting', 'reconnecting', 'gone']);
    expect(onClient.slice(2, 5).map((e) => [e.attempt, e.delayMs])).toEqual([
      [1, 100],
      [2, 200],
      [3, 400],
    ]);
    expect(onClient[5]!.error).toMatchObject({ code: 'ERR_CONNECT', message: expect.stringContaining('gave up') });
    expect(ended).toEqual(['ERR_CONNECT']);
    expect(rt.timerCount, 'only the messenger tick is left').toBe(1);
  });

  it('nothing re-dials a lost peer: it stays down for downTimeoutMs, then is gone (both ends)', async () => {
    const { server, client, cut, address } = await pair(createMemoryNetwork(), { downTimeoutMs: 2_000 });
    const onClient = record(client);
    const onServer = record(server);
    await drive(client.connect(address));
    cut();
    await rt.runMacrotasks();
    expect(types(onClient)).toEqual(['up', 'down']);
    expect(types(onServer)).toEqual(['up', 'down']);
    await rt.advance(1_999);
    expect(types(onClient)).toEqual(['up', 'down']);
    await rt.advance(1);
    expect(types(onClient)).toEqual(['up', 'down', 'gone']);
    expect(onClient[2]!.error).toMatchObject({ code: 'ERR_PEER_GONE', message: expect.stringContaining('2000 ms') });
    // The server waits its own default 30 s: the client may still dial back.
    expect(types(onServer)).toEqual(['up', 'down']);
    await rt.advance(28_000);
    expect(types(onServer)).toEqual(['up', 'down', 'gone']);
  });

  it('a peer that dials back within downTimeoutMs is resumed, not gone', async () => {
    const { server, client, cut, address } = await pair(createMemoryNetwork());
    const onServer = record(server);
    await drive(client.connect(address));
    cut();
    await rt.advance(5_000);
    await drive(client.connect(address));
    expect(types(onServer)).toEqual(['up', 'down', 'resumed']);
  });

  it('a peer that closes on purpose is gone at once, and so is one this node disconnects', async () => {
    const network = createMemoryNetwork();
    const { server, client, address } = await pair(network);
    const onClient = record(client);
    const onServer = record(server);
    const peer = await drive(client.connect(address));
    client.disconnect(peer.id);
    await rt.runMacrotasks();
    expect(types(onClient)).toEqual(['up', 'down', 'gone']);
    expect(onClient[2]!.error).toMatchObject({ code: 'ERR_CLOSED' });
    expect(types(onServer)).toEqual(['up', 'down', 'gone']);

    await drive(client.connect(address));
    await drive(server.close());
    await rt.runMacrotasks();
    expect(types(onClient)).toEqual(['up', 'down', 'gone', 'up', 'down', 'gone']);
  });

  it('a worker that comes back as another instance: the old instance is gone, then the new one is up', async () => {
    const network = createMemoryNetwork();
    const server = await messenger({ transports: [memoryTransport({ network, name: 'server' })] });
    const onServer = record(server);
    const first = cuttable(memoryTransport({ network, listen: false }));
    const old = await messenger({ transports: [first.adapter], workerId: 0x77n, instanceId: 'old' });
    await drive(old.connect('memory://server'));
    first.cut();
    await rt.runMacrotasks();
    const restarted = await messenger({
      transports: [memoryTransport({ network, listen: false })],
      workerId: 0x77n,
      instanceId: 'new',
    });
    await drive(restarted.connect('memory://server'));
    expect(onServer.map((e) => `${e.type}:${e.instanceId}`)).toEqual(['up:old', 'down:old', 'gone:old', 'up:new']);
    expect(onServer[2]!.error?.message).toContain('another instance');
  });

  it('a re-dial that reaches another worker at the address: the lost one is gone at once (replacedBy), the new one up', async () => {
    const network = createMemoryNetwork();
    const first = await messenger({ transports: [memoryTransport({ network, name: 'server' })], workerId: 0xa1n });
    const link = cuttable(memoryTransport({ network, listen: false }));
    const client = await messenger({ transports: [link.adapter] });
    const events = record(client);
    const a = await drive(client.connect('memory://server', { reconnect: fast }));
    // The server process dies (no GOAWAY reaches the client) and another one, with a new worker id, takes its address.
    link.cut();
    await rt.runMacrotasks();
    await drive(first.close());
    const second = await messenger({ transports: [memoryTransport({ network, name: 'server' })], workerId: 0xb2n });
    await rt.advance(100);
    await rt.runMacrotasks();
    expect(events.map((e) => `${e.type}:${e.peer}`)).toEqual([
      `up:${a.id}`,
      `down:${a.id}`,
      `reconnecting:${a.id}`,
      `gone:${a.id}`,
      `up:${second.self.id}`,
    ]);
    const gone = events[3]!;
    expect(gone.replacedBy).toBe(second.self.id);
    expect(gone.error).toMatchObject({ code: 'ERR_PEER_GONE', retryable: true });
    expect(gone.error?.message).toContain(`now answers as worker ${second.self.id}`);
    expect(client.peer(second.self.id)).toBeDefined();
  });

  it('closing the messenger reports every peer gone, cancels the back-off, and leaves no timer', async () => {
    const { client, cut, address } = await pair(createMemoryNetwork());
    const onClient = record(client);
    await drive(client.connect(address, { reconnect: true }));
    cut();
    await rt.runMacrotasks();
    expect(types(onClient)).toEqual(['up', 'down', 'reconnecting']);
    await drive(client.close());
    expect(types(onClient)).toEqual(['up', 'down', 'reconnecting', 'gone']);
    expect(onClient[3]!.error).toMatchObject({ code: 'ERR_CLOSED' });
    await drive(open.shift()!.close());
    expect(rt.timerCount).toBe(0);
  });

  it('a listener that throws is reported through onError and does not stop the others', async () => {
    const { server, client, address } = await pair(createMemoryNetwork());
    const errors: string[] = [];
    server.onError((e) => errors.push(e.handler ?? ''));
    server.onPeerState!(() => {
      throw new Error('listener bug');
    });
    const seen = record(server);
    await drive(client.connect(address));
    expect(types(seen)).toEqual(['up']);
    expect(errors).toEqual(['onPeerState']);
  });
});

describe('peerEvents(): the lifecycle as a bounded async iterator', () => {
  it('yields the events in order and ends when the signal aborts', async () => {
    const { server, client, cut, address } = await pair(createMemoryNetwork());
    const ac = new AbortController();
    const events = client.peerEvents!({ signal: ac.signal });
    await drive(client.connect(address, { reconnect: fast }));
    cut();
    await rt.advance(100);
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) seen.push(((await events.next()).value as PeerEvent).type);
    expect(seen).toEqual(['up', 'down', 'reconnecting', 'resumed']);
    const pending = events.next();
    ac.abort();
    await expect(pending).resolves.toEqual({ value: undefined, done: true });
    void server;
  });

  it('a reader that falls behind loses the oldest events and is told how many, never holding more than maxQueued', async () => {
    const { client, cut, address } = await pair(createMemoryNetwork());
    const events = client.peerEvents!({ maxQueued: 2 });
    await drive(client.connect(address, { reconnect: fast }));
    cut();
    await rt.advance(100);
    cut();
    await rt.advance(200);
    // up, down, reconnecting, resumed, down, reconnecting, resumed: 7 events, 2 kept.
    const out: PeerEvent[] = [];
    for (let i = 0; i < 3; i++) out.push((await events.next()).value as PeerEvent);
    expect(out[0]).toEqual({ type: 'overflow', dropped: 5 });
    expect(out.slice(1).map((e) => e.type)).toEqual(['reconnecting', 'resumed']);
    await events.return!();
    await expect(events.next()).resolves.toEqual({ value: undefined, done: true });
  });

  it('ends after the events queued before the messenger closed (the gone of each peer included)', async () => {
    const { client, address } = await pair(createMemoryNetwork());
    const events = client.peerEvents!();
    await drive(client.connect(address));
    await drive(client.close());
    const seen: string[] = [];
    for await (const e of events) seen.push(e.type);
    expect(seen).toEqual(['up', 'down', 'gone']);
    // A new reader of a closed messenger ends at once.
    await expect(client.peerEvents!().next()).resolves.toEqual({ value: undefined, done: true });
  });

  it('refuses a maxQueued that is not an integer from 1', async () => {
    const { client } = await pair(createMemoryNetwork());
    expect(() => client.peerEvents!({ maxQueued: 0 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }),
    );
  });
});

describe('ready(address) and waitForPeer(peer)', () => {
  it('ready resolves at once while the link is up, and after the reconnect while it is down', async () => {
    const { client, cut, address } = await pair(createMemoryNetwork());
    const peer = await drive(client.connect(address, { reconnect: fast }));
    await expect(drive(client.ready!(address))).resolves.toMatchObject({ id: peer.id, epoch: peer.epoch });
    cut();
    await rt.runMacrotasks();
    const ready = client.ready!(address);
    const waited = client.waitForPeer!(peer.id);
    await rt.advance(100);
    const back = await drive(ready);
    expect(back.id).toBe(peer.id);
    expect(back.epoch).toBeGreaterThan(peer.epoch);
    await expect(drive(waited)).resolves.toBe(peer.id);
  });

  it('ready rejects at its timeout, on abort, and when the dial to the address ended', async () => {
    const { client, cut, address } = await pair(createMemoryNetwork());
    await drive(client.connect(address));
    cut();
    await rt.runMacrotasks();
    // The dial ended with the link, but the peer is down, not gone: ready waits, bounded.
    const timedOut = client.ready!(address, { timeoutMs: 1_000 });
    const ac = new AbortController();
    const aborted = client.ready!(address, { signal: ac.signal });
    ac.abort();
    await expect(drive(aborted)).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await rt.advance(1_000);
    await expect(drive(timedOut)).rejects.toMatchObject({ code: 'ERR_CONNECT', retryable: true });
    // Nothing listens at an address: the refused dial settles ready at once with its error.
    const nowhere = client.ready!('memory://nowhere');
    await expect(drive(client.connect('memory://nowhere'))).rejects.toMatchObject({ code: 'ERR_CONNECT' });
    await expect(drive(nowhere)).rejects.toMatchObject({ code: 'ERR_CONNECT' });
  });

  it('ready rejects when the peer there is gone for good', async () => {
    const { server, client, cut, address } = await pair(createMemoryNetwork());
    await drive(client.connect(address, { reconnect: { ...fast, maxRetries: 1 } }));
    cut();
    await drive(server.close());
    const ready = client.ready!(address);
    await rt.advance(200);
    await expect(drive(ready)).rejects.toMatchObject({
      code: 'ERR_PEER_GONE',
      message: expect.stringContaining('gave up'),
    });
  });

  it('waitForPeer rejects ERR_UNKNOWN_PEER at once for a peer never seen or down with nothing re-dialling it, at its timeout for one that stays reconnecting', async () => {
    const { client, cut, address } = await pair(createMemoryNetwork());
    await expect(client.waitForPeer!('00000000000000aa')).rejects.toMatchObject({ code: 'ERR_UNKNOWN_PEER' });
    const plain = await drive(client.connect(address));
    cut();
    await rt.runMacrotasks();
    await expect(client.waitForPeer!(plain.id)).rejects.toMatchObject({ code: 'ERR_UNKNOWN_PEER' });
    const peer = await drive(client.connect(address, { reconnect: { initialDelayMs: 60_000, jitterMs: 0 } }));
    cut();
    await rt.runMacrotasks();
    const waited = client.waitForPeer!(peer.id, { timeoutMs: 500 });
    await rt.advance(500);
    await expect(drive(waited)).rejects.toMatchObject({
      code: 'ERR_UNKNOWN_PEER',
      message: expect.stringContaining('500 ms'),
    });
  });

  it('a wait in progress rejects ERR_CLOSED when the messenger closes', async () => {
    const { client, cut, address } = await pair(createMemoryNetwork());
    const peer = await drive(client.connect(address, { reconnect: true }));
    cut();
    await rt.runMacrotasks();
    const waited = client.waitForPeer!(peer.id);
    const ready = client.ready!('memory://elsewhere');
    await drive(client.close());
    await expect(drive(waited)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    await expect(drive(ready)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
  });
});

describe('the node exposes the lifecycle', () => {
  it('node.onPeerState, node.peerEvents and node.ready follow a reconnect of node.connect(address, { reconnect })', async () => {
    const network = createMemoryNetwork();
    const server = await createNode({ transports: [memoryTransport({ network, name: 'srv' })], runtime: rt });
    nodes.push(server);
    const link = cuttable(memoryTransport({ network, listen: false }));
    const m = await createMessenger({ transports: [link.adapter], transportKeys: [MESSENGER_MUX_KEY], runtime: rt });
    open.push(m);
    const client = await createNode({ messenger: m, runtime: rt });
    nodes.push(client);
    const seen: string[] = [];
    client.onPeerState((e) => seen.push(e.type));
    const iter = client.peerEvents();
    const id = await drive(client.connect(server.address, { reconnect: fast }));
    link.cut();
    await rt.runMacrotasks();
    const ready = client.ready(server.address);
    await rt.advance(100);
    expect(await drive(ready)).toBe(id);
    expect(seen).toEqual(['up', 'down', 'reconnecting', 'resumed']);
    expect(((await iter.next()).value as PeerEvent).type).toBe('up');
    await iter.return!();
  });
});
