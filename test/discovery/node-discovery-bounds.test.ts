// createNode({ discovery }) at its edges, over the static store: one resolve and dial per worker,
// the bound on dials in flight and on each resolve, records this node cannot use, abort and close,
// and the option checks.
import { afterEach, describe, expect, it } from 'vitest';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import type { Discovery } from '../../src/discovery/discovery.ts';
import { createStaticStore, staticDiscovery } from '../../src/discovery/static.ts';
import type { ConfigError, LanemuxError } from '../../src/errors.ts';
import { formatHandle } from '../../src/stream/handle.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { readAll } from '../support/read-all.ts';
import { freePort } from '../support/server-process.ts';

const nodes: LanemuxNode[] = [];
const clients: Discovery[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
  await Promise.all(clients.splice(0).map((d) => d.close()));
});

const hex = (id: bigint): string => id.toString(16).padStart(16, '0');
const track = (d: Discovery): Discovery => {
  clients.push(d);
  return d;
};
const node = async (options: NodeOptions): Promise<LanemuxNode> => {
  const n = await createNode(options);
  nodes.push(n);
  return n;
};
const engine = (options: Omit<NodeOptions, 'transports'> = {}) =>
  node({ transports: [tcpTransport({ port: 0 })], ...options });
const frontend = (discovery: NonNullable<NodeOptions['discovery']>) =>
  node({ transports: [tcpTransport({ listen: false })], discovery });
const failure = (p: Promise<unknown>): Promise<LanemuxError> =>
  p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e as LanemuxError,
  );
const record = (workerId: bigint, addresses: Record<string, string>) => ({
  v: 1,
  workerId: hex(workerId),
  addresses,
  lanes: 1,
});

/** A static client whose file arrives when the test says (`release`): until then every resolve waits. */
function gatedClient(): { client: Discovery; release(workers: unknown[]): void } {
  let release!: (text: string) => void;
  const file = new Promise<string>((resolve) => {
    release = resolve;
  });
  const client = track(staticDiscovery({ file: 'workers.json', readFile: () => file, timeoutMs: 60_000 }));
  return { client, release: (workers) => release(JSON.stringify({ workers })) };
}

/** Streams `items` from `from` to a new anchor of `to`, attached by handle; resolves with what arrived. */
async function streamTo(from: LanemuxNode, to: LanemuxNode, items: string[]): Promise<string[]> {
  const anchor = to.createAnchor<string>();
  const read = readAll(anchor);
  const sender = await from.attachAnchor<string>(anchor.handle);
  for (const item of items) await sender.send(item);
  await sender.finalize();
  return read;
}

describe('createNode({ discovery }) bounds', () => {
  it('twenty attaches to one unknown worker share one resolve and one dial', async () => {
    const store = createStaticStore();
    const e = await engine({ discovery: track(staticDiscovery({ store })) });
    const real = track(staticDiscovery({ store }));
    let resolves = 0;
    const counting: Discovery = {
      register: (r) => real.register(r),
      resolve: (id) => {
        resolves++;
        return real.resolve(id);
      },
      watch: (o) => real.watch(o),
      deregister: () => real.deregister(),
      close: (o) => real.close(o),
    };
    const f = await frontend(counting);
    let ups = 0;
    f.onPeerState((ev) => ev.type === 'up' && ups++);
    const got = await Promise.all(Array.from({ length: 20 }, (_, i) => streamTo(f, e, [`#${i}`])));
    expect(got).toEqual(Array.from({ length: 20 }, (_, i) => [`#${i}`]));
    expect(resolves).toBe(1);
    expect(ups).toBe(1);
  });

  it('past maxPendingDials workers in flight an attach fails ERR_DISCOVERY_UNAVAILABLE at once; one to a worker in flight joins it', async () => {
    const e = await engine();
    const { client, release } = gatedClient();
    const f = await frontend({ client, maxPendingDials: 1 });
    const [a1, a2] = [e.createAnchor<string>(), e.createAnchor<string>()];
    const first = f.attachAnchor<string>(a1.handle);
    const joined = f.attachAnchor<string>(a2.handle);
    const full = await failure(f.attachAnchor(formatHandle({ workerId: 0x77n, localId: 1n })));
    expect(full.code).toBe('ERR_DISCOVERY_UNAVAILABLE');
    expect(full.retryable).toBe(true);
    expect(full.message).toMatch(/maxPendingDials/);
    release([record(e.workerId, { tcp: e.address })]);
    const senders = await Promise.all([first, joined]);
    const reads = [readAll(a1), readAll(a2)];
    for (const s of senders) await s.finalize();
    expect(await Promise.all(reads)).toEqual([[], []]);
  });

  it('a resolve with no answer within timeoutMs fails ERR_DISCOVERY_UNAVAILABLE (retryable); the next attach resolves again', async () => {
    const e = await engine();
    const { client, release } = gatedClient();
    const f = await frontend({ client, timeoutMs: 100 });
    const anchor = e.createAnchor<string>();
    const err = await failure(f.attachAnchor(anchor.handle));
    expect(err.code).toBe('ERR_DISCOVERY_UNAVAILABLE');
    expect(err.retryable).toBe(true);
    expect(err.message).toMatch(new RegExp(`resolve of worker ${hex(e.workerId)}: no answer within 100 ms`));
    release([record(e.workerId, { tcp: e.address })]);
    const read = readAll(anchor);
    const sender = await f.attachAnchor<string>(anchor.handle);
    await sender.send('late');
    await sender.finalize();
    expect(await read).toEqual(['late']);
  });

  it('addresses no transport of the node dials are skipped; a record with none it dials fails ERR_ATTACH_REFUSED naming them', async () => {
    const e = await engine({ workerId: 0xa1n });
    const entries = [
      { workerId: 0xa1n, addresses: { ws: 'ws://127.0.0.1:1/never', tcp: e.address } },
      { workerId: 0xb2n, addresses: { ws: 'ws://127.0.0.1:1/never' } },
    ];
    const f = await frontend(track(staticDiscovery({ entries })));
    expect(await streamTo(f, e, ['over tcp'])).toEqual(['over tcp']);
    const err = await failure(f.attachAnchor(formatHandle({ workerId: 0xb2n, localId: 1n })));
    expect(err.code).toBe('ERR_ATTACH_REFUSED');
    expect(err.message).toMatch(/ws:\/\/127\.0\.0\.1:1\/never, and no transport of this node dials it/);
  });

  it('a record whose address reaches another worker fails ERR_UNKNOWN_PEER (retryable, stale); a corrupt record fails ERR_DISCOVERY_INVALID_RECORD', async () => {
    const e = await engine();
    const store = createStaticStore();
    const f = await frontend(
      track(staticDiscovery({ store, entries: [{ workerId: 0xc3n, addresses: { tcp: e.address } }] })),
    );
    const stale = await failure(f.attachAnchor(formatHandle({ workerId: 0xc3n, localId: 1n })));
    expect(stale.code).toBe('ERR_UNKNOWN_PEER');
    expect(stale.retryable).toBe(true);
    expect(stale.message).toMatch(new RegExp(`reached worker ${hex(e.workerId)}: the record is stale`));
    store.writeRaw(hex(0xd4n), '{"v":1,"workerId":');
    const bad = await failure(f.attachAnchor(formatHandle({ workerId: 0xd4n, localId: 1n })));
    expect(bad.code).toBe('ERR_DISCOVERY_INVALID_RECORD');
  });

  it('an aborted attach ends only its own wait; close() fails the attaches still waiting with ERR_CLOSED', async () => {
    const e = await engine();
    const { client, release } = gatedClient();
    const f = await frontend(client);
    const anchor = e.createAnchor<string>();
    const ac = new AbortController();
    const aborted = failure(f.attachAnchor(e.createAnchor<string>().handle, { signal: ac.signal }));
    const kept = f.attachAnchor<string>(anchor.handle);
    ac.abort();
    expect((await aborted).code).toBe('ERR_ABORTED');
    release([record(e.workerId, { tcp: e.address })]);
    const read = readAll(anchor);
    const sender = await kept;
    await sender.send('kept');
    await sender.finalize();
    expect(await read).toEqual(['kept']);

    const gated = gatedClient();
    const g = await frontend(gated.client);
    const waiting = failure(g.attachAnchor(e.createAnchor<string>().handle));
    await g.close();
    expect((await waiting).code).toBe('ERR_CLOSED');
  });

  it('checks its options by name; a wildcard listen address is refused and frees the port', async () => {
    const client = track(staticDiscovery());
    const bad = (discovery: unknown) =>
      failure(createNode({ transports: [tcpTransport({ listen: false })], discovery: discovery as never }));
    expect((await bad({ client: {} })).code).toBe('ERR_INVALID_CONFIG');
    expect(((await bad({ client: {} })) as ConfigError).fields).toEqual(['discovery.client']);
    expect(((await bad({ client, timeoutMs: 0 })) as ConfigError).fields).toEqual(['discovery.timeoutMs']);
    expect(((await bad({ client, maxPendingDials: 1e9 })) as ConfigError).fields).toEqual([
      'discovery.maxPendingDials',
    ]);
    expect(((await bad({ client, connect: { reconnect: { factor: 99 } } })) as ConfigError).fields).toEqual([
      'discovery.connect.reconnect',
    ]);
    expect(((await bad({ client, register: { lanes: 0 } })) as ConfigError).fields).toEqual([
      'discovery.register.lanes',
    ]);
    expect(((await bad({ client, register: {} })) as ConfigError).fields).toEqual(['discovery.register.addresses']);

    const port = await freePort();
    const wild = await failure(
      createNode({ transports: [tcpTransport({ host: '0.0.0.0', port })], discovery: client }),
    );
    expect((wild as ConfigError).fields).toEqual(['discovery.register.addresses']);
    expect(wild.message).toMatch(/0\.0\.0\.0.*peers elsewhere cannot dial/);
    // Refused after it listened: the node closed, so the port is free again.
    const again = await node({
      transports: [tcpTransport({ host: '0.0.0.0', port })],
      discovery: { client, register: { addresses: { tcp: `tcp://127.0.0.1:${port}` } } },
    });
    expect(again.addresses).toHaveLength(1);
  });

  it('a node that only dials registers nothing; register: false registers nothing either; close() removes what it registered', async () => {
    const store = createStaticStore();
    const reader = track(staticDiscovery({ store }));
    const quiet = await engine({ discovery: { client: track(staticDiscovery({ store })), register: false } });
    expect(await reader.resolve(quiet.workerId)).toBeUndefined();
    const e = await engine({ discovery: { client: track(staticDiscovery({ store })), closeClient: true } });
    expect((await reader.resolve(e.workerId))?.addresses).toEqual({ tcp: e.address });
    await e.close();
    expect(await reader.resolve(e.workerId)).toBeUndefined();
    expect(store.keys()).toEqual([]);
  });
});
