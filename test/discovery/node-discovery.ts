/**
 * `createNode({ discovery })` against a real store (the static store in memory, etcd, nats-server):
 * an engine registers where it listens; a frontend that knows no address attaches by handle alone;
 * a closed engine, or one whose lease ran out, is no longer found (a retryable error); links that
 * exist keep working while the store is out of reach. Loopback TCP between the nodes.
 */
import type { ChildProcess } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import type { Discovery, DiscoveryWatch } from '../../src/discovery/discovery.ts';
import type { DiscoveryOptions } from '../../src/discovery/options.ts';
import { LanemuxError } from '../../src/errors.ts';
import { formatHandle, parseHandle } from '../../src/stream/handle.ts';
import { createNode, type LanemuxNode, type NodeOptions } from '../../src/stream/node.ts';
import { readAll } from '../support/read-all.ts';
import { TTL_MS, until, type DiscoveryHarness, type DiscoverySpace } from './conformance.ts';

export interface NodeDiscoveryFeatures {
  /** Start an engine in a child process registered in `space`; resolves with it and an anchor handle of it. */
  readonly spawnEngine?: (space: DiscoverySpace) => Promise<{ child: ChildProcess; handle: string }>;
  /** The store is a server the harness can stop and start (`harness.stop`, `harness.start`). */
  readonly outage?: boolean;
}

const hex = (id: bigint): string => id.toString(16).padStart(16, '0');

/** What a rejected promise rejected with. */
const failure = (p: Promise<unknown>): Promise<LanemuxError> =>
  p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e as LanemuxError,
  );

export function describeNodeDiscovery(
  name: string,
  setup: () => Promise<DiscoveryHarness>,
  features: NodeDiscoveryFeatures = {},
): void {
  describe(`createNode({ discovery }): ${name}`, () => {
    let h: DiscoveryHarness;
    const nodes: LanemuxNode[] = [];
    const clients: Discovery[] = [];
    const watches: DiscoveryWatch[] = [];
    const children: ChildProcess[] = [];

    const client = (space: DiscoverySpace, options?: DiscoveryOptions): Discovery => {
      const d = space.create(options);
      clients.push(d);
      return d;
    };
    const node = async (options: NodeOptions): Promise<LanemuxNode> => {
      const n = await createNode(options);
      nodes.push(n);
      return n;
    };
    /** An engine: listens on loopback TCP and registers there. */
    const engine = (discovery: NonNullable<NodeOptions['discovery']>, options: Omit<NodeOptions, 'discovery'> = {}) =>
      node({ transports: [tcpTransport({ port: 0 })], discovery, ...options });
    /** A frontend: dials only, and knows no address (it finds peers through discovery). */
    const frontend = (discovery: NonNullable<NodeOptions['discovery']>) =>
      node({ transports: [tcpTransport({ listen: false })], discovery });
    /** The watch of `d`, past its snapshot. */
    const synced = async (d: Discovery): Promise<DiscoveryWatch> => {
      const w = d.watch();
      watches.push(w);
      await until(w, (e) => e.type === 'synced');
      return w;
    };
    /** Attach to `handle` from `from`, send `items`, finalize. */
    const stream = async (from: LanemuxNode, handle: string, items: string[]): Promise<void> => {
      const sender = await from.attachAnchor<string>(handle);
      for (const item of items) await sender.send(item);
      await sender.finalize();
    };

    beforeAll(async () => {
      h = await setup();
    }, 60_000);
    afterEach(async () => {
      for (const c of children.splice(0)) c.kill('SIGKILL');
      for (const w of watches.splice(0)) w.close();
      await Promise.all(nodes.splice(0).map((n) => n.close()));
      await Promise.all(clients.splice(0).map((d) => d.close()));
    });
    afterAll(async () => {
      await h?.close();
    });

    it('an engine registers where it listens; a frontend that knows no address attaches to an anchor on it by handle and streams', async () => {
      const space = await h.space();
      const e = await engine(
        {
          client: client(space),
          register: { metadata: { role: 'engine' }, credential: 'fleet/engine-token' },
        },
        { lanes: 4 },
      );
      const reader = client(space);
      expect(await reader.resolve(e.workerId)).toEqual({
        workerId: e.workerId,
        addresses: { tcp: e.address },
        lanes: 4,
        metadata: { role: 'engine' },
        credential: 'fleet/engine-token',
      });
      const f = await frontend(client(space));
      expect(f.addresses).toEqual([]);
      // Nothing registers for a node that does not listen.
      expect(await reader.resolve(f.workerId)).toBeUndefined();
      const anchor = e.createAnchor<string>();
      const read = readAll(anchor);
      await stream(f, anchor.handle, ['a', 'b', 'c']);
      expect(await read).toEqual(['a', 'b', 'c']);
      // The link the attach made carries the next attach too, without discovery.
      const again = e.createAnchor<string>();
      const readAgain = readAll(again);
      await stream(f, again.handle, ['d']);
      expect(await readAgain).toEqual(['d']);
    });

    it('a zero-RTT ticket and an MPSC attach dial the worker through discovery too', async () => {
      const space = await h.space();
      const e = await engine(client(space));
      const anchor = e.createAnchor<string>();
      const ticket = e.prebindAnchor(anchor)!;
      const read = readAll(anchor);
      const viaTicket = await frontend(client(space));
      const sender = await viaTicket.openAnchorStream<string>(anchor.handle, ticket);
      await sender.send('zero-rtt');
      await sender.finalize();
      expect(await read).toEqual(['zero-rtt']);

      const mpsc = e.createMpscAnchor<string>();
      const viaMpsc = await frontend(client(space));
      const m = await viaMpsc.attachMpscAnchor<string>(mpsc.handle);
      await m.send('mpsc');
      await m.finalize();
      const events = [];
      for await (const ev of mpsc) {
        events.push(ev.kind === 'item' ? ev.value : ev.kind);
        if (ev.kind === 'finalized') break;
      }
      expect(events).toEqual(['mpsc', 'finalized']);
    });

    it('two engines: each attach reaches the worker its handle names, and attaches to one worker share one dial', async () => {
      const space = await h.space();
      const [a, b] = [await engine(client(space)), await engine(client(space))];
      const f = await frontend(client(space));
      const ups: string[] = [];
      f.onPeerState((ev) => ev.type === 'up' && ups.push(ev.peer));
      const anchors = [a, b, a, b, a, b].map((n) => n.createAnchor<string>());
      const reads = anchors.map((x) => readAll(x));
      // All at once: the attaches to one engine wait on one resolve and one dial.
      await Promise.all(anchors.map((x, i) => stream(f, x.handle, [`to ${parseHandle(x.handle).workerId} #${i}`])));
      const got = await Promise.all(reads);
      anchors.forEach((x, i) => expect(got[i]).toEqual([`to ${parseHandle(x.handle).workerId} #${i}`]));
      expect(ups.sort()).toEqual([hex(a.workerId), hex(b.workerId)].sort());
    });

    it('an engine that closes is deregistered before close() resolves; a new attach then fails ERR_UNKNOWN_PEER, retryable', async () => {
      const space = await h.space();
      const e = await engine(client(space));
      const f = await frontend(client(space));
      const first = e.createAnchor<string>();
      const read = readAll(first);
      await stream(f, first.handle, ['x']);
      await read;
      const gone = new Promise<void>((resolve) =>
        f.onPeerState((ev) => ev.type === 'gone' && ev.workerId === e.workerId && resolve()),
      );
      const later = e.createAnchor<string>().handle;
      await e.close();
      expect(await client(space).resolve(e.workerId)).toBeUndefined();
      await gone;
      const err = await failure(f.attachAnchor(later));
      expect(err).toBeInstanceOf(LanemuxError);
      expect(err.code).toBe('ERR_UNKNOWN_PEER');
      expect(err.retryable).toBe(true);
      expect(err.message).toMatch(new RegExp(`worker ${hex(e.workerId)}.*discovery has no record`));
    });

    it('an engine that dies without deregistering: while its record lives the dial fails (retryable); once its lease expires, ERR_UNKNOWN_PEER (retryable)', async () => {
      const space = await h.space();
      const watcher = await synced(client(space));
      let handle: string;
      if (features.spawnEngine !== undefined) {
        // A real death: the engine's process is killed, its keep-alive with it.
        const spawned = await features.spawnEngine(space);
        children.push(spawned.child);
        handle = spawned.handle;
        const worker = hex(parseHandle(handle).workerId);
        await until(watcher, (ev) => ev.type === 'put' && hex(ev.workerId) === worker);
        const exited = new Promise((r) => spawned.child.once('exit', r));
        spawned.child.kill('SIGKILL');
        await exited;
      } else {
        // In one process: the engine's discovery stops renewing without deregistering, then the engine goes.
        const own = space.create();
        const e = await engine(own);
        handle = e.createAnchor<string>().handle;
        await own.close({ deregister: false });
        await e.close();
      }
      const worker = parseHandle(handle).workerId;
      const f = await frontend(client(space));
      const stale = await failure(f.attachAnchor(handle));
      expect(stale.code).toBe('ERR_CONNECT');
      expect(stale.retryable).toBe(true);
      await until(watcher, (ev) => ev.type === 'delete' && ev.workerId === worker, 4 * TTL_MS + 5000);
      const err = await failure(f.attachAnchor(handle));
      expect(err.code).toBe('ERR_UNKNOWN_PEER');
      expect(err.retryable).toBe(true);
      expect(err.message).toMatch(/discovery has no record/);
    }, 30_000);

    it('with the store out of reach, an attach over a link that exists works and one to an unknown worker fails ERR_DISCOVERY_UNAVAILABLE (retryable); an engine that cannot register does not start', async () => {
      const space = await h.space();
      const e = await engine(client(space));
      const d = h.unavailable({ timeoutMs: 500 });
      clients.push(d);
      const f = await frontend({ client: d, timeoutMs: 1000 });
      await f.connect(e.address);
      const anchor = e.createAnchor<string>();
      const read = readAll(anchor);
      await stream(f, anchor.handle, ['still']);
      expect(await read).toEqual(['still']);
      const unknown = formatHandle({ workerId: 0x5eed_0000_0000_0001n, localId: 1n });
      const started = Date.now();
      const err = await failure(f.attachAnchor(unknown));
      expect(err.code).toBe('ERR_DISCOVERY_UNAVAILABLE');
      expect(err.retryable).toBe(true);
      expect(Date.now() - started).toBeLessThan(1000 + 2000);

      const refused = await failure(
        createNode({ transports: [tcpTransport({ port: 0 })], discovery: h.unavailable({ timeoutMs: 500 }) }),
      );
      expect(refused.code).toBe('ERR_DISCOVERY_UNAVAILABLE');
    });

    if (features.outage === true)
      it('when the server stops, links made through discovery keep streaming; a new worker fails ERR_DISCOVERY_UNAVAILABLE until it is back', async () => {
        const space = await h.space();
        const e = await engine(client(space));
        const other = await engine(client(space));
        const f = await frontend({ client: client(space, { timeoutMs: 1000 }), timeoutMs: 1500 });
        const first = e.createAnchor<string>();
        const readFirst = readAll(first);
        await stream(f, first.handle, ['before']);
        expect(await readFirst).toEqual(['before']);
        await h.stop!();
        try {
          const during = e.createAnchor<string>();
          const readDuring = readAll(during);
          await stream(f, during.handle, ['during']);
          expect(await readDuring).toEqual(['during']);
          const err = await failure(f.attachAnchor(other.createAnchor<string>().handle));
          expect(err.code).toBe('ERR_DISCOVERY_UNAVAILABLE');
          expect(err.retryable).toBe(true);
        } finally {
          await h.start!();
        }
        // Back: the same attach goes through (the client may need a moment to reconnect, and the engine's
        // registration, if its lease ran out while the server was down, a moment to come back).
        const after = other.createAnchor<string>();
        const readAfter = readAll(after);
        for (let i = 0; ; i++) {
          try {
            await stream(f, after.handle, ['after']);
            break;
          } catch (err) {
            const code = (err as LanemuxError).code;
            if (i >= 40 || (code !== 'ERR_DISCOVERY_UNAVAILABLE' && code !== 'ERR_UNKNOWN_PEER')) throw err;
            await new Promise((r) => setTimeout(r, 250));
          }
        }
        expect(await readAfter).toEqual(['after']);
      }, 60_000);
  });
}
