/**
 * The discovery conformance suite: the same behaviour from every adapter, against its real store
 * (a static store in memory, etcd, nats-server with JetStream). `describeDiscovery(name, setup)`
 * runs it; each test gets a namespace of its own (a key prefix, a bucket, a store) so no test sees
 * another's records.
 */
import type { ChildProcess } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Discovery, DiscoveryEvent, DiscoveryWatch, Registration } from '../../src/discovery/discovery.ts';
import { DiscoveryError } from '../../src/discovery/errors.ts';
import type { DiscoveryOptions } from '../../src/discovery/options.ts';

/** The lease TTL of every namespace: short, so expiry tests take seconds. */
export const TTL_MS = 2000;

/** One test's namespace of a store. */
export interface DiscoverySpace {
  /** A new client of this namespace (TTL {@link TTL_MS} unless `options` say otherwise). */
  create(options?: DiscoveryOptions): Discovery;
  /** Write `value` as the record of worker `hex`, straight into the store (no validation). */
  writeRaw(hex: string, value: string): Promise<void>;
  /** Take the lease of worker `hex` away in the store (revoke it, or drop the record as an expiry would). */
  loseLease?(hex: string): Promise<void>;
  /** The options a child process passes to the adapter to reach this namespace. */
  readonly childOptions?: Record<string, unknown>;
}

export interface DiscoveryHarness {
  /** A fresh namespace. */
  space(): Promise<DiscoverySpace>;
  /** A client whose store cannot be reached (nothing listens, or the file cannot be read). */
  unavailable(options: DiscoveryOptions): Discovery;
  /** Restart the server (same address, same data), for adapters that have one. */
  readonly restart?: () => Promise<void>;
  /** Stop the server (the store is out of reach until `start`), for adapters that have one. */
  readonly stop?: () => Promise<void>;
  /** Start the stopped server again (same address, same data); resolves once the harness reaches it. */
  readonly start?: () => Promise<void>;
  /** The adapter a child process uses (`registrant.ts`), for adapters whose store outlives a process. */
  readonly childAdapter?: 'etcd' | 'nats';
  close(): Promise<void>;
}

let counter = 0;
/** A worker id no other test uses (16 hex digits). */
export function freshHex(): string {
  counter++;
  return (BigInt(Date.now()) * 4096n + BigInt(counter)).toString(16).padStart(16, '0').slice(-16);
}

/** A registration of `hex` with every field set. */
export function sample(hex: string, tag = 'a') {
  return {
    workerId: hex,
    addresses: { tcp: `tcp://127.0.0.1:7${tag.length}00`, ws: `ws://127.0.0.1:8000/${tag}` },
    lanes: 4,
    metadata: { zone: `eu-${tag}`, role: 'engine' },
    credential: 'fleet/engine-token',
  };
}

/** The next `n` events of `watch`, or a rejection naming what arrived after `timeoutMs`. */
export async function take(watch: DiscoveryWatch, n: number, timeoutMs = 10_000): Promise<DiscoveryEvent[]> {
  const out: DiscoveryEvent[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const left = deadline - Date.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const r = await Promise.race([
      watch.next(),
      new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), Math.max(0, left));
      }),
    ]);
    clearTimeout(timer);
    if (r === 'timeout') throw new Error(`timed out after ${timeoutMs} ms; got ${JSON.stringify(out.map(show))}`);
    if (r.done) throw new Error(`the watch ended; got ${JSON.stringify(out.map(show))}`);
    out.push(r.value);
  }
  return out;
}

/** Read `watch` until `match` holds for an event; returns every event read. */
export async function until(
  watch: DiscoveryWatch,
  match: (e: DiscoveryEvent) => boolean,
  timeoutMs = 10_000,
): Promise<DiscoveryEvent[]> {
  const seen: DiscoveryEvent[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [e] = await take(watch, 1, Math.max(1, deadline - Date.now())).catch((err: Error) => {
      throw new Error(`${err.message}; before it: ${JSON.stringify(seen.map(show))}`);
    });
    seen.push(e!);
    if (match(e!)) return seen;
  }
}

/** An event in a line: `put 00…a1 zone=eu-a`, `delete 00…a1`, `synced`, `invalid <key>`. */
export function show(e: DiscoveryEvent): string {
  switch (e.type) {
    case 'put':
      return `put ${hex(e.workerId)} zone=${e.registration.metadata['zone'] ?? ''}`;
    case 'delete':
      return `delete ${hex(e.workerId)}`;
    case 'synced':
      return 'synced';
    case 'invalid':
      return `invalid ${e.workerId === undefined ? e.key : hex(e.workerId)} ${e.error.code}`;
  }
}

function hex(id: bigint): string {
  return id.toString(16).padStart(16, '0');
}

/** Retry `op` until it succeeds (a client reconnecting after a restart), for at most `timeoutMs`. */
async function eventually<T>(op: () => Promise<T>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await op();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** What a store can do beyond the common behaviour. */
export interface DiscoveryFeatures {
  /** The store is a server that `harness.restart()` restarts. */
  readonly restart?: boolean;
  /** The store can lose a registration behind its client's back (`space.loseLease`); an in-memory one cannot. */
  readonly loseLease?: boolean;
  /** The store tells the client its lease is gone (etcd), so the client reports it to `onError`. */
  readonly reportsLeaseLoss?: boolean;
  /** Start a child process that registers `hex` in `space` and resolves once it has. */
  readonly spawnRegistrant?: (space: DiscoverySpace, hex: string) => Promise<ChildProcess>;
}

export function describeDiscovery(
  name: string,
  setup: () => Promise<DiscoveryHarness>,
  features: DiscoveryFeatures = {},
): void {
  const { spawnRegistrant } = features;
  describe(`discovery conformance: ${name}`, () => {
    let h: DiscoveryHarness;
    const open: Discovery[] = [];
    const watches: DiscoveryWatch[] = [];
    const client = (space: DiscoverySpace, options?: DiscoveryOptions): Discovery => {
      const d = space.create(options);
      open.push(d);
      return d;
    };
    const watchOf = (d: Discovery): DiscoveryWatch => {
      const w = d.watch();
      watches.push(w);
      return w;
    };

    beforeAll(async () => {
      h = await setup();
    }, 60_000);
    afterEach(async () => {
      for (const w of watches.splice(0)) w.close();
      await Promise.all(open.splice(0).map((d) => d.close()));
    });
    afterAll(async () => {
      await h?.close();
    });

    it('a registration resolves from another client with every field; an unknown worker resolves to undefined', async () => {
      const space = await h.space();
      const a = client(space);
      const b = client(space);
      const id = freshHex();
      await a.register(sample(id));
      const got = await b.resolve(id);
      expect(got).toEqual({
        workerId: BigInt(`0x${id}`),
        addresses: { tcp: 'tcp://127.0.0.1:7100', ws: 'ws://127.0.0.1:8000/a' },
        lanes: 4,
        metadata: { zone: 'eu-a', role: 'engine' },
        credential: 'fleet/engine-token',
      } satisfies Registration);
      expect(Object.isFrozen(got) && Object.isFrozen(got!.metadata)).toBe(true);
      // A bigint and upper-case hex name the same worker.
      expect(await b.resolve(BigInt(`0x${id}`))).toEqual(got);
      expect(await b.resolve(id.toUpperCase())).toEqual(got);
      expect(await b.resolve(freshHex())).toBeUndefined();
    });

    it('registering again replaces the record; registering another worker id replaces the old one', async () => {
      const space = await h.space();
      const a = client(space);
      const b = client(space);
      const id = freshHex();
      await a.register(sample(id, 'a'));
      await a.register({ ...sample(id, 'b'), metadata: { zone: 'eu-b', version: '2' } });
      expect((await b.resolve(id))?.metadata).toEqual({ zone: 'eu-b', version: '2' });
      const other = freshHex();
      await a.register(sample(other));
      expect(await b.resolve(id)).toBeUndefined();
      expect((await b.resolve(other))?.workerId).toBe(BigInt(`0x${other}`));
    });

    it('deregister removes the registration, and close() deregisters unless told not to', async () => {
      const space = await h.space();
      const reader = client(space);
      const a = client(space);
      const id = freshHex();
      await a.register(sample(id));
      await a.deregister();
      expect(await reader.resolve(id)).toBeUndefined();
      await a.deregister(); // nothing registered: a no-op

      const c = space.create();
      const id2 = freshHex();
      await c.register(sample(id2));
      await c.close();
      expect(await reader.resolve(id2)).toBeUndefined();
      await expect(c.resolve(id2)).rejects.toMatchObject({ code: 'ERR_DISCOVERY_CLOSED' });
      await expect(c.register(sample(id2))).rejects.toMatchObject({ code: 'ERR_DISCOVERY_CLOSED' });
    });

    it('a kept-alive registration outlives its TTL; one whose client stops renewing expires one TTL later and watches see the delete', async () => {
      const space = await h.space();
      const reader = client(space);
      const kept = client(space);
      const dying = space.create();
      const keptId = freshHex();
      const dyingId = freshHex();
      await kept.register(sample(keptId));
      await dying.register(sample(dyingId));
      const w = watchOf(reader);
      const snapshot = await until(w, (e) => e.type === 'synced');
      expect(snapshot.map(show).sort()).toEqual(
        [`put ${dyingId} zone=eu-a`, `put ${keptId} zone=eu-a`, 'synced'].sort(),
      );
      // The client goes away without removing its record (as if its process had died).
      const stoppedAt = Date.now();
      await dying.close({ deregister: false });
      expect(await reader.resolve(dyingId)).toBeDefined();
      const seen = await until(w, (e) => e.type === 'delete', 4 * TTL_MS + 5000);
      const elapsed = Date.now() - stoppedAt;
      expect(seen.map(show)).toEqual([`delete ${dyingId}`]);
      // Not a removal: the lease ran out (at least the TTL less one renewal interval after the last renewal).
      expect(elapsed).toBeGreaterThanOrEqual(TTL_MS / 2);
      expect(await reader.resolve(dyingId)).toBeUndefined();
      // `kept` registered before `dying`'s last renewal, so it has lived past one TTL on renewals alone.
      expect((await reader.resolve(keptId))?.workerId).toBe(BigInt(`0x${keptId}`));
    }, 30_000);

    it('a watch yields the snapshot, synced, then every put and delete in order', async () => {
      const space = await h.space();
      const a = client(space);
      const b = client(space);
      const c = client(space);
      const aId = freshHex();
      const cId = freshHex();
      await a.register(sample(aId, 'a'));
      const w = watchOf(b);
      expect((await take(w, 2)).map(show)).toEqual([`put ${aId} zone=eu-a`, 'synced']);
      await c.register(sample(cId, 'c'));
      await c.register({ ...sample(cId, 'c'), metadata: { zone: 'eu-c2' } });
      await c.deregister();
      await a.deregister();
      await c.register(sample(cId, 'c3'));
      expect((await take(w, 5)).map(show)).toEqual([
        `put ${cId} zone=eu-c`,
        `put ${cId} zone=eu-c2`,
        `delete ${cId}`,
        `delete ${aId}`,
        `put ${cId} zone=eu-c3`,
      ]);
      const last = (await b.resolve(cId))!;
      expect(last.metadata).toEqual({ zone: 'eu-c3', role: 'engine' });
    });

    it('a corrupt or hostile record fails resolve with ERR_DISCOVERY_INVALID_RECORD and is reported by a watch, which goes on', async () => {
      const space = await h.space();
      const reader = client(space, { maxRecordBytes: 512 });
      const w = watchOf(reader);
      expect((await take(w, 1)).map(show)).toEqual(['synced']);
      const notJson = freshHex();
      const wrongId = freshHex();
      const outOfBounds = freshHex();
      const tooBig = freshHex();
      await space.writeRaw(notJson, '{"v":1,"workerId":');
      await space.writeRaw(wrongId, JSON.stringify({ ...sample(freshHex()), v: 1 }));
      await space.writeRaw(outOfBounds, JSON.stringify({ ...sample(outOfBounds), v: 1, lanes: 1000 }));
      await space.writeRaw(
        tooBig,
        JSON.stringify({ v: 1, workerId: tooBig, addresses: { tcp: `tcp://${'a'.repeat(900)}` }, lanes: 1 }),
      );
      for (const id of [notJson, wrongId, outOfBounds, tooBig]) {
        const err = await reader.resolve(id).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err, id).toBeInstanceOf(DiscoveryError);
        expect((err as DiscoveryError).code, id).toBe('ERR_DISCOVERY_INVALID_RECORD');
      }
      const reasons = (await take(w, 4)).map((e) => {
        expect(e.type).toBe('invalid');
        return e.type === 'invalid' ? `${e.workerId?.toString(16).padStart(16, '0')} ${e.error.message}` : '';
      });
      expect(reasons[0]).toMatch(new RegExp(`^${notJson} .*not UTF-8 JSON`));
      expect(reasons[1]).toMatch(new RegExp(`^${wrongId} .*names worker`));
      expect(reasons[2]).toMatch(new RegExp(`^${outOfBounds} .*lanes`));
      expect(reasons[3]).toMatch(new RegExp(`^${tooBig} .*maxRecordBytes`));
      // The watch is still live: a valid registration after the bad ones arrives.
      const good = client(space);
      const goodId = freshHex();
      await good.register(sample(goodId));
      expect((await take(w, 1)).map(show)).toEqual([`put ${goodId} zone=eu-a`]);
    });

    it('a store out of reach fails register, resolve and watch with ERR_DISCOVERY_UNAVAILABLE within timeoutMs', async () => {
      const d = h.unavailable({ timeoutMs: 1000 });
      open.push(d);
      const started = Date.now();
      const errors = await Promise.all([
        d.register(sample(freshHex())).catch((e: unknown) => e),
        d.resolve(freshHex()).catch((e: unknown) => e),
        d
          .watch()
          .next()
          .catch((e: unknown) => e),
      ]);
      const elapsed = Date.now() - started;
      for (const e of errors) {
        expect(e).toBeInstanceOf(DiscoveryError);
        expect((e as DiscoveryError).code).toBe('ERR_DISCOVERY_UNAVAILABLE');
        expect((e as DiscoveryError).retryable).toBe(true);
      }
      expect(elapsed).toBeLessThan(1000 + 2000);
    });

    if (features.loseLease === true)
      it('when the store loses a registration, its client writes it again under a new lease', async () => {
        const space = await h.space();
        const errors: DiscoveryError[] = [];
        const a = client(space, { onError: (e) => errors.push(e) });
        const reader = client(space);
        const id = freshHex();
        await a.register(sample(id));
        const w = watchOf(reader);
        expect((await take(w, 2)).map(show)).toEqual([`put ${id} zone=eu-a`, 'synced']);
        await space.loseLease!(id);
        const seen = await until(w, (e) => e.type === 'put', 4 * TTL_MS + 5000);
        expect(seen.map(show)).toEqual([`delete ${id}`, `put ${id} zone=eu-a`]);
        expect((await reader.resolve(id))?.workerId).toBe(BigInt(`0x${id}`));
        if (features.reportsLeaseLoss === true) {
          expect(errors[0]?.code).toBe('ERR_DISCOVERY_UNAVAILABLE');
          expect(errors[0]?.message).toMatch(new RegExp(`lease of ${id} was lost`));
        }
      }, 30_000);

    if (features.restart === true)
      it('a watch goes on across a restart of the server, and registrations come back', async () => {
        const space = await h.space();
        const a = client(space);
        const b = client(space);
        const aId = freshHex();
        await a.register(sample(aId));
        const w = watchOf(b);
        expect((await take(w, 2)).map(show)).toEqual([`put ${aId} zone=eu-a`, 'synced']);
        await h.restart!();
        // A new client after the restart: its first calls may race the server becoming ready.
        const c = client(space);
        const cId = freshHex();
        await eventually(() => c.register(sample(cId)));
        const seen = await until(w, (e) => e.type === 'put' && e.workerId === BigInt(`0x${cId}`), 20_000);
        // Whatever else the restart showed (`a` briefly expiring on a slow restart), nothing is out of order.
        expect(seen.map(show).filter((s) => !s.includes(aId))).toEqual([`put ${cId} zone=eu-a`]);
        const reader = client(space);
        await eventually(async () => {
          expect((await reader.resolve(aId))?.workerId).toBe(BigInt(`0x${aId}`));
        });
      }, 60_000);

    if (spawnRegistrant !== undefined)
      it('when the registering process is killed, its registration expires after the TTL and a watch sees the delete', async () => {
        const space = await h.space();
        const reader = client(space);
        const id = freshHex();
        const child = await spawnRegistrant(space, id);
        try {
          expect((await reader.resolve(id))?.workerId).toBe(BigInt(`0x${id}`));
          const w = watchOf(reader);
          expect((await take(w, 2)).map(show)).toEqual([`put ${id} zone=eu-a`, 'synced']);
          const exited = new Promise((r) => child.once('exit', r));
          child.kill('SIGKILL');
          await exited;
          const seen = await until(w, (e) => e.type === 'delete', 4 * TTL_MS + 5000);
          expect(seen.map(show)).toEqual([`delete ${id}`]);
          expect(await reader.resolve(id)).toBeUndefined();
        } finally {
          child.kill('SIGKILL');
        }
      }, 30_000);
  });
}
