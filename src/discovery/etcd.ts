/**
 * `lanemux/discovery/etcd`: discovery over etcd v3 with the `etcd3` client (an optional peer
 * dependency: `npm install etcd3`; it is loaded on first use, so importing this entry costs nothing
 * without it).
 *
 * Each worker is one key, `<prefix><16 hex>` (default `/lanemux/workers/00000000000000a1`), attached
 * to a lease of `ttlMs` that the client keeps alive; when the client dies, etcd deletes the key
 * after the TTL and every watch sees the delete. A lost lease (etcd out of reach for longer than
 * the TTL) is reported to `onError` and the record is written again under a new lease.
 *
 * A watch reads the prefix in pages at one revision R, then watches from R + 1. Across a broken
 * stream or an etcd restart it resumes from the revision after the last one it delivered, so no
 * change is missed; if etcd compacted that revision away, the watch ends with
 * `ERR_DISCOVERY_WATCH_LOST`.
 *
 * @example
 * ```ts
 * const discovery = etcdDiscovery({ hosts: 'http://10.0.0.2:2379' });
 * await discovery.register({ workerId: node.workerId, addresses: { tcp: 'tcp://10.0.0.5:7000' }, lanes: 4 });
 * ```
 *
 * @packageDocumentation
 */
import type { Etcd3, IOptions, IKeyValue, IWatchResponse, Lease, Watcher } from 'etcd3';
import * as z from '../schema.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { int, parseOptions, str } from '../validate.ts';
import type { BackendContext, DiscoveryBackend, StoredRecord, WatchSink } from './backend.ts';
import { bounded, toDiscoveryError } from './bounded.ts';
import { createDiscovery } from './create.ts';
import type { Discovery } from './discovery.ts';
import { DiscoveryError } from './errors.ts';
import { discoveryOptionsShape, type DiscoveryOptions } from './options.ts';
import { isWorkerHex } from './worker-id.ts';

/** Default key prefix. */
export const DEFAULT_ETCD_PREFIX = '/lanemux/workers/';

/** Options of {@link etcdDiscovery}. */
export interface EtcdDiscoveryOptions extends DiscoveryOptions {
  /** etcd endpoints (`host:port` or `http(s)://host:port`). Defaults to `127.0.0.1:2379`. Ignored with `client`. */
  readonly hosts?: string | readonly string[] | undefined;
  /** Further options of the `etcd3` client this adapter creates (TLS, auth, gRPC). Ignored with `client`. */
  readonly clientOptions?: Omit<IOptions, 'hosts'> | undefined;
  /** An `etcd3` client to use instead of creating one; `close()` leaves it open. */
  readonly client?: Etcd3 | undefined;
  /** Key prefix of the registrations. Defaults to `/lanemux/workers/`; at most 256 characters. */
  readonly prefix?: string | undefined;
  /** Keys per page of a watch's snapshot. Defaults to 500; 1..10,000. */
  readonly pageSize?: number | undefined;
}

const schema = z.strictObject({
  ...discoveryOptionsShape,
  hosts: z._default(
    z.union([str(1024, 1), z.array(str(1024, 1)).check(z.minLength(1), z.maxLength(64))]),
    '127.0.0.1:2379',
  ),
  clientOptions: z.optional(z.custom<Omit<IOptions, 'hosts'>>((v) => typeof v === 'object' && v !== null, 'an object')),
  client: z.optional(
    z.custom<Etcd3>(
      (v) => typeof v === 'object' && v !== null && typeof (v as Etcd3).lease === 'function',
      'not an etcd3 client (new Etcd3(…))',
    ),
  ),
  prefix: z._default(str(256, 1), DEFAULT_ETCD_PREFIX),
  pageSize: z._default(int(1, 10_000), 500),
});

type Options = z.output<typeof schema>;

/** Create a discovery client over etcd. Nothing connects until the first operation. */
export function etcdDiscovery(options: EtcdDiscoveryOptions = {}): Discovery {
  const o = parseOptions(schema, options, 'etcdDiscovery');
  return createDiscovery('etcd discovery', o, (ctx) => new EtcdBackend(o, ctx));
}

const keyDecoder = new TextDecoder();
const encoder = new TextEncoder();

class EtcdBackend implements DiscoveryBackend {
  readonly #o: Options;
  readonly #ctx: BackendContext;
  readonly #runtime: Runtime;
  readonly #ttlSeconds: number;
  #client: Promise<Etcd3> | undefined;
  /** The lease holding the current record; undefined while (re-)registering or unregistered. */
  #lease: Lease | undefined;
  #hex: string | undefined;
  #text = '';
  /** Bumped by every register, deregister and close: work started under an older one stops. */
  #generation = 0;
  #retry: TimerHandle | undefined;
  readonly #watches = new Set<() => void>();
  #closed = false;

  constructor(o: Options, ctx: BackendContext) {
    this.#o = o;
    this.#ctx = ctx;
    this.#runtime = ctx.runtime;
    this.#ttlSeconds = Math.ceil(o.ttlMs / 1000);
  }

  async register(hex: string, text: string): Promise<void> {
    const gen = ++this.#generation;
    this.#cancelRetry();
    const same = this.#hex === hex;
    this.#hex = hex;
    this.#text = text;
    const client = await this.#connect();
    const lease = this.#lease;
    if (same && lease !== undefined && !lease.revoked()) {
      await lease.put(this.#key(hex)).value(text);
      return;
    }
    await this.#grantAndPut(client, gen);
  }

  async deregister(hex: string): Promise<void> {
    ++this.#generation;
    this.#cancelRetry();
    const lease = this.#lease;
    this.#lease = undefined;
    if (this.#hex === hex) this.#hex = undefined;
    const client = await this.#connect();
    // Revoking the lease deletes its key; without one (lost, or never granted) delete the key itself.
    if (lease !== undefined) await lease.revoke();
    else await client.delete().key(this.#key(hex));
  }

  async read(hex: string): Promise<StoredRecord | undefined> {
    const client = await this.#connect();
    const key = this.#key(hex);
    const value = await client.get(key).buffer();
    return value === null ? undefined : { key, value };
  }

  watch(sink: WatchSink): () => void {
    let stopped = false;
    let watcher: Watcher | undefined;
    const stop = (): void => {
      stopped = true;
      this.#watches.delete(stop);
      watcher?.cancel().catch(() => undefined);
    };
    this.#watches.add(stop);
    const run = async (): Promise<void> => {
      const client = await this.#connect();
      const prefix = encoder.encode(this.#o.prefix);
      const end = prefixEnd(prefix);
      // The snapshot: pages of the prefix, all read at the first page's revision.
      let revision: string | undefined;
      let start: Uint8Array = prefix;
      for (;;) {
        // etcd3 types keys as Buffer but copies any Uint8Array (its toBuffer).
        let query = client
          .getAll()
          .inRange({ start: start as unknown as string, end: end as unknown as string })
          .limit(this.#o.pageSize);
        if (revision !== undefined) query = query.revision(revision);
        const page = await bounded(this.#runtime, query.exec(), this.#o.timeoutMs, 'etcd discovery watch snapshot');
        if (stopped) return;
        revision ??= page.header.revision;
        for (const kv of page.kvs) this.#deliver(sink, 'Put', kv);
        const last = page.kvs[page.kvs.length - 1];
        if (!page.more || last === undefined) break;
        start = concatZero(last.key);
        await sink.room();
        if (stopped) return;
      }
      sink.synced();
      let next = BigInt(revision) + 1n;
      const w = client.watch().prefix(this.#o.prefix).startRevision(next.toString()).watcher();
      watcher = w;
      w.on('data', (res: IWatchResponse) => {
        if (stopped) return;
        for (const ev of res.events) this.#deliver(sink, ev.type, ev.kv);
        const seen = BigInt(res.header.revision) + 1n;
        if (seen > next) next = seen;
        w.request.start_revision = next.toString();
      });
      // etcd3 resumes a broken stream from the revision of the create response, which is past the
      // history a new watch still has to deliver: resume from the revision after the last delivered.
      w.on('connected', () => {
        w.request.start_revision = next.toString();
      });
      w.on('error', (e: unknown) => {
        if (stopped) return;
        stop();
        sink.fail(
          new DiscoveryError(
            'ERR_DISCOVERY_WATCH_LOST',
            `etcd discovery watch ended: ${e instanceof Error ? e.message : String(e)} (start a new watch)`,
            { cause: e, retryable: true },
          ),
        );
      });
      if (stopped) stop();
    };
    run().catch((e: unknown) => {
      if (stopped) return;
      stop();
      sink.fail(e);
    });
    return stop;
  }

  async close(): Promise<void> {
    this.#closed = true;
    ++this.#generation;
    this.#cancelRetry();
    for (const stop of [...this.#watches]) stop();
    // Release, not revoke: the record lapses after its TTL unless the core deregistered it first.
    this.#lease?.release();
    this.#lease = undefined;
    this.#hex = undefined;
    if (this.#o.client === undefined && this.#client !== undefined) {
      const client = await this.#client.catch(() => undefined);
      client?.close();
    }
  }

  #key(hex: string): string {
    return this.#o.prefix + hex;
  }

  #deliver(sink: WatchSink, type: string, kv: IKeyValue): void {
    const key = keyDecoder.decode(kv.key);
    const rest = key.startsWith(this.#o.prefix) ? key.slice(this.#o.prefix.length) : '';
    const hex = isWorkerHex(rest) ? rest : undefined;
    if (type === 'Put') sink.put(key, hex, kv.value);
    else sink.delete(key, hex);
  }

  /** Grant a lease, write the record under it, and make it current unless overtaken. */
  async #grantAndPut(client: Etcd3, gen: number): Promise<void> {
    const hex = this.#hex!;
    const lease = client.lease(this.#ttlSeconds, { autoKeepAlive: true });
    lease.on('lost', (e: unknown) => this.#lost(lease, e));
    try {
      await lease.grant();
      await lease.put(this.#key(hex)).value(this.#text);
    } catch (e) {
      lease.release();
      throw e;
    }
    if (gen !== this.#generation || this.#closed) {
      // A later register, deregister or close overtook this one: undo it, and put back a later
      // registration's record in case this put landed after it.
      const current = this.#lease;
      const restore = this.#hex === hex && current !== undefined ? this.#text : undefined;
      lease
        .revoke()
        .then(async () => {
          if (restore !== undefined) await current!.put(this.#key(hex)).value(restore);
        })
        .catch(() => undefined);
      return;
    }
    this.#lease?.release();
    this.#lease = lease;
  }

  #lost(lease: Lease, e: unknown): void {
    if (lease !== this.#lease || this.#closed) return;
    this.#lease = undefined;
    this.#ctx.report(
      new DiscoveryError(
        'ERR_DISCOVERY_UNAVAILABLE',
        `etcd discovery: the lease of ${this.#hex} was lost (${e instanceof Error ? e.message : String(e)}); registering again`,
        { cause: e, retryable: true },
      ),
    );
    this.#reRegister(this.#generation, 250);
  }

  /** Register again under a new lease, retrying with backoff up to a third of the TTL. */
  #reRegister(gen: number, delayMs: number): void {
    this.#cancelRetry();
    this.#retry = this.#runtime.setTimer(() => {
      this.#retry = undefined;
      if (gen !== this.#generation || this.#closed || this.#hex === undefined) return;
      const attempt = this.#connect().then((client) => this.#grantAndPut(client, gen));
      bounded(this.#runtime, attempt, this.#o.timeoutMs, 'etcd discovery re-register').catch((e: unknown) => {
        if (gen !== this.#generation || this.#closed) return;
        this.#ctx.report(toDiscoveryError(e, 'etcd discovery re-register'));
        this.#reRegister(gen, Math.min(delayMs * 2, Math.max(250, (this.#ttlSeconds * 1000) / 3)));
      });
    }, delayMs);
  }

  #cancelRetry(): void {
    if (this.#retry !== undefined) this.#runtime.clearTimer(this.#retry);
    this.#retry = undefined;
  }

  /** The client: the caller's, or one created (and the package loaded) on first use. */
  #connect(): Promise<Etcd3> {
    if (this.#closed) return Promise.reject(new DiscoveryError('ERR_DISCOVERY_CLOSED', 'etcd discovery is closed'));
    const given = this.#o.client;
    if (given !== undefined) return Promise.resolve(given);
    this.#client ??= loadEtcd3().then(({ Etcd3: Client }) => {
      const timeoutMs = this.#o.timeoutMs;
      const clientOptions = this.#o.clientOptions ?? {};
      return new Client({
        // Unary calls get a deadline; streams (watch, lease keep-alive) must not.
        defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + timeoutMs }),
        dialTimeout: timeoutMs,
        ...clientOptions,
        hosts: typeof this.#o.hosts === 'string' ? this.#o.hosts : [...this.#o.hosts],
      });
    });
    return this.#client;
  }
}

async function loadEtcd3(): Promise<typeof import('etcd3')> {
  try {
    return await import('etcd3');
  } catch (e) {
    throw new DiscoveryError(
      'ERR_DISCOVERY_UNAVAILABLE',
      'etcdDiscovery needs the package etcd3 (npm install etcd3): it could not be loaded',
      { cause: e },
    );
  }
}

/** The first key after every key that starts with `prefix` (etcd's range end of a prefix). */
function prefixEnd(prefix: Uint8Array): Uint8Array {
  const end = prefix.slice();
  for (let i = end.length - 1; i >= 0; i--) {
    const b = end[i]!;
    if (b < 0xff) {
      end[i] = b + 1;
      return end.subarray(0, i + 1);
    }
  }
  return new Uint8Array([0]);
}

/** `key` followed by a zero byte: the first key after it. */
function concatZero(key: Uint8Array): Uint8Array {
  const out = new Uint8Array(key.length + 1);
  out.set(key);
  return out;
}
