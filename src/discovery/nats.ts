/**
 * `lanemux/discovery/nats`: discovery over a NATS JetStream key-value bucket with the modular NATS
 * client: `@nats-io/kv` (an optional peer dependency), and `@nats-io/transport-node` to connect
 * unless a `connection` is given (in a browser, pass one from `wsconnect` of `@nats-io/nats-core`).
 * Both are loaded on first use. The server needs JetStream (`nats-server -js`).
 *
 * Each worker is one key of the bucket (default `lanemux_workers`), its 16 hex digits. The bucket's
 * TTL is the lease: the client writes its record again every third of it, and the server drops a
 * record that is not renewed. The bucket is created with `ttlMs` when missing; an existing bucket
 * keeps its own TTL, which the client then uses (one without a TTL is refused).
 *
 * Servers before 2.11 send nothing when a record expires, so a watch keeps the time each record
 * was written and, when its TTL has passed without a renewal, asks the server whether it is still
 * there: a delete is reported only on the server's word. Renewals that change nothing are not
 * reported. Across a reconnect the watch resumes after the last revision it delivered (NATS's
 * ordered consumer).
 *
 * @example
 * ```ts
 * const discovery = natsDiscovery({ servers: 'nats://10.0.0.2:4222' });
 * await discovery.register({ workerId: node.workerId, addresses: { tcp: 'tcp://10.0.0.5:7000' } });
 * ```
 *
 * @packageDocumentation
 */
import type { KV, KvEntry } from '@nats-io/kv';
import type { NatsConnection, NodeConnectionOptions } from '@nats-io/transport-node';
import * as z from '../schema.ts';
import { ConfigError } from '../errors.ts';
import type { Runtime, TimerHandle } from '../runtime/runtime.ts';
import { int, parseOptions, str } from '../validate.ts';
import type { BackendContext, DiscoveryBackend, StoredRecord, WatchSink } from './backend.ts';
import { bounded } from './bounded.ts';
import { createDiscovery } from './create.ts';
import type { Discovery } from './discovery.ts';
import { DiscoveryError } from './errors.ts';
import { KeepAlive } from './keep-alive.ts';
import { discoveryOptionsShape, type DiscoveryOptions } from './options.ts';
import { isWorkerHex } from './worker-id.ts';

/** Default bucket name. */
export const DEFAULT_NATS_BUCKET = 'lanemux_workers';

/** Options of {@link natsDiscovery}. */
export interface NatsDiscoveryOptions extends DiscoveryOptions {
  /** NATS servers. Defaults to `nats://127.0.0.1:4222`. Ignored with `connection`. */
  readonly servers?: string | readonly string[] | undefined;
  /** Further options of the connection this adapter opens (auth, TLS, reconnects). Ignored with `connection`. */
  readonly connectOptions?: Omit<NodeConnectionOptions, 'servers'> | undefined;
  /** A NATS connection to use instead of opening one; `close()` leaves it open. */
  readonly connection?: NatsConnection | undefined;
  /** The KV bucket (`[A-Za-z0-9_-]`, at most 64 characters). Defaults to `lanemux_workers`. */
  readonly bucket?: string | undefined;
  /** Replicas of the bucket when this client creates it. Defaults to 1; 1..5. */
  readonly replicas?: number | undefined;
  /**
   * Workers one watch tracks (to report their expiry); past it the watch ends with
   * `ERR_DISCOVERY_WATCH_OVERFLOW`. Defaults to 100,000; 1..10,000,000.
   */
  readonly maxWatchedWorkers?: number | undefined;
}

const schema = z.strictObject({
  ...discoveryOptionsShape,
  servers: z._default(
    z.union([str(1024, 1), z.array(str(1024, 1)).check(z.minLength(1), z.maxLength(64))]),
    'nats://127.0.0.1:4222',
  ),
  connectOptions: z.optional(
    z.custom<Omit<NodeConnectionOptions, 'servers'>>((v) => typeof v === 'object' && v !== null, 'an object'),
  ),
  connection: z.optional(
    z.custom<NatsConnection>(
      (v) => typeof v === 'object' && v !== null && typeof (v as NatsConnection).request === 'function',
      'not a NATS connection',
    ),
  ),
  bucket: z._default(
    z.string().check(z.regex(/^[A-Za-z0-9_-]{1,64}$/, '[A-Za-z0-9_-], 1 to 64 characters')),
    DEFAULT_NATS_BUCKET,
  ),
  replicas: z._default(int(1, 5), 1),
  maxWatchedWorkers: z._default(int(1, 10_000_000), 100_000),
});

type Options = z.output<typeof schema>;

/** Create a discovery client over a NATS KV bucket. Nothing connects until the first operation. */
export function natsDiscovery(options: NatsDiscoveryOptions = {}): Discovery {
  const o = parseOptions(schema, options, 'natsDiscovery');
  return createDiscovery('nats discovery', o, (ctx) => new NatsBackend(o, ctx));
}

/** The bucket once open: its handle and TTL. */
interface Bucket {
  readonly kv: KV;
  readonly ttlMs: number;
}

/** The watch's view of one record. */
interface Known {
  value: Uint8Array;
  revision: number;
  timer: TimerHandle | undefined;
}

class NatsBackend implements DiscoveryBackend {
  readonly #o: Options;
  readonly #ctx: BackendContext;
  readonly #runtime: Runtime;
  #bucket: Promise<Bucket> | undefined;
  #connection: NatsConnection | undefined;
  #keepAlive: KeepAlive | undefined;
  #hex: string | undefined;
  #text = '';
  /** Bumped by every register, deregister and close: work started under an older one stops. */
  #generation = 0;
  readonly #watches = new Set<() => void>();
  #closed = false;

  constructor(o: Options, ctx: BackendContext) {
    this.#o = o;
    this.#ctx = ctx;
    this.#runtime = ctx.runtime;
  }

  async register(hex: string, text: string): Promise<void> {
    const gen = ++this.#generation;
    await this.#keepAlive?.halt();
    this.#hex = hex;
    this.#text = text;
    const { kv, ttlMs } = await this.#open();
    await kv.put(hex, text);
    if (gen !== this.#generation) {
      // Overtaken by a deregister (or another worker's register) while the write was in flight: undo it.
      if (this.#hex !== hex) await kv.delete(hex).catch(() => undefined);
      return;
    }
    this.#keepAlive ??= new KeepAlive(
      this.#runtime,
      Math.max(1, Math.floor(ttlMs / 3)),
      this.#o.timeoutMs,
      async () => {
        const current = this.#hex;
        // Writing again renews the record's age, and writes it back if it expired meanwhile.
        if (current !== undefined) await kv.put(current, this.#text);
      },
      this.#ctx.report,
      'nats discovery keep-alive',
    );
    this.#keepAlive.start();
  }

  async deregister(hex: string): Promise<void> {
    ++this.#generation;
    if (this.#hex === hex) this.#hex = undefined;
    await this.#keepAlive?.halt();
    const { kv } = await this.#open();
    await kv.delete(hex);
  }

  async read(hex: string): Promise<StoredRecord | undefined> {
    const { kv } = await this.#open();
    const entry = await kv.get(hex);
    if (entry === null || entry.operation !== 'PUT') return undefined;
    return { key: this.#key(hex), value: entry.value };
  }

  watch(sink: WatchSink): () => void {
    let stopped = false;
    let iterator: { stop(): void } | undefined;
    const known = new Map<string, Known>();
    const stop = (): void => {
      if (stopped) return;
      stopped = true;
      this.#watches.delete(stop);
      iterator?.stop();
      for (const k of known.values()) if (k.timer !== undefined) this.#runtime.clearTimer(k.timer);
      known.clear();
    };
    const fail = (error: unknown): void => {
      if (stopped) return;
      stop();
      sink.fail(error);
    };
    this.#watches.add(stop);

    const run = async (): Promise<void> => {
      const { kv, ttlMs } = await this.#open();
      if (stopped) return;
      const graceMs = Math.min(1000, Math.ceil(ttlMs / 10));
      // A record's deadline passed without a renewal: ask the server, and report a delete only on its word.
      const check = (key: string, k: Known): void => {
        k.timer = undefined;
        bounded(this.#runtime, kv.get(key), this.#o.timeoutMs, 'nats discovery watch').then(
          (entry) => {
            if (stopped || known.get(key) !== k) return;
            if (entry === null || entry.operation !== 'PUT') {
              known.delete(key);
              sink.delete(this.#key(key), hexOf(key));
            } else {
              // Still there (the server expires it shortly), or rewritten and on its way to us.
              arm(key, k, Math.max(250, Math.floor(ttlMs / 4)));
            }
          },
          () => {
            if (!stopped && known.get(key) === k) arm(key, k, Math.max(250, Math.floor(ttlMs / 4)));
          },
        );
      };
      const arm = (key: string, k: Known, ms: number): void => {
        if (k.timer !== undefined) this.#runtime.clearTimer(k.timer);
        k.timer = this.#runtime.setTimer(() => check(key, k), ms);
      };
      const onEntry = (e: KvEntry): void => {
        const key = e.key;
        const prev = known.get(key);
        if (e.operation !== 'PUT') {
          if (prev === undefined) return;
          if (prev.timer !== undefined) this.#runtime.clearTimer(prev.timer);
          known.delete(key);
          sink.delete(this.#key(key), hexOf(key));
          return;
        }
        // The server's clock says how old the record is; a skewed local clock only moves the check.
        const age = Math.max(0, Date.now() - e.created.getTime());
        const deadline = Math.max(0, Math.min(ttlMs, ttlMs - age)) + graceMs;
        if (prev !== undefined) {
          const same = sameBytes(prev.value, e.value);
          prev.value = e.value;
          prev.revision = e.revision;
          arm(key, prev, deadline);
          if (!same) sink.put(this.#key(key), hexOf(key), e.value);
          return;
        }
        if (known.size >= this.#o.maxWatchedWorkers) {
          fail(
            new DiscoveryError(
              'ERR_DISCOVERY_WATCH_OVERFLOW',
              `nats discovery watch: more than ${this.#o.maxWatchedWorkers} workers (maxWatchedWorkers)`,
              { retryable: true },
            ),
          );
          return;
        }
        const k: Known = { value: e.value, revision: e.revision, timer: undefined };
        known.set(key, k);
        arm(key, k, deadline);
        sink.put(this.#key(key), hexOf(key), e.value);
      };

      const entries = await bounded(this.#runtime, kv.watch({ key: '>' }), this.#o.timeoutMs, 'nats discovery watch');
      iterator = entries;
      if (stopped) {
        entries.stop();
        return;
      }
      let initial = await initialCount(entries);
      if (initial === 0) sink.synced();
      for await (const e of entries) {
        if (stopped) return;
        onEntry(e);
        if (initial > 0 && --initial === 0) sink.synced();
      }
      fail(
        new DiscoveryError('ERR_DISCOVERY_WATCH_LOST', 'nats discovery watch: the KV watch ended (start a new watch)', {
          retryable: true,
        }),
      );
    };
    run().catch(fail);
    return stop;
  }

  async close(): Promise<void> {
    this.#closed = true;
    ++this.#generation;
    this.#keepAlive?.stop();
    this.#hex = undefined;
    for (const stop of [...this.#watches]) stop();
    const owned = this.#o.connection === undefined ? this.#connection : undefined;
    this.#connection = undefined;
    if (owned !== undefined) await owned.close();
  }

  #key(hex: string): string {
    return `${this.#o.bucket}.${hex}`;
  }

  /** The bucket: connect (unless given a connection) and create or open it, once; a failure is tried again next time. */
  #open(): Promise<Bucket> {
    if (this.#closed) return Promise.reject(new DiscoveryError('ERR_DISCOVERY_CLOSED', 'nats discovery is closed'));
    this.#bucket ??= this.#openBucket().catch((e: unknown) => {
      this.#bucket = undefined;
      throw e;
    });
    return this.#bucket;
  }

  async #openBucket(): Promise<Bucket> {
    const o = this.#o;
    let nc = o.connection;
    if (nc === undefined) {
      const { connect } = await load<typeof import('@nats-io/transport-node')>(
        () => import('@nats-io/transport-node'),
        '@nats-io/transport-node',
      );
      nc = await connect({
        name: 'lanemux-discovery',
        timeout: o.timeoutMs,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 1000,
        ...o.connectOptions,
        servers: typeof o.servers === 'string' ? o.servers : [...o.servers],
      });
      if (this.#closed) {
        await nc.close();
        throw new DiscoveryError('ERR_DISCOVERY_CLOSED', 'nats discovery is closed');
      }
      this.#connection = nc;
    }
    try {
      const { Kvm } = await load<typeof import('@nats-io/kv')>(() => import('@nats-io/kv'), '@nats-io/kv');
      const kv = await new Kvm(nc).create(o.bucket, {
        ttl: o.ttlMs,
        history: 1,
        maxValueSize: o.maxRecordBytes,
        replicas: o.replicas,
        timeout: o.timeoutMs,
      });
      // An existing bucket keeps its configuration: its TTL is the lease.
      const ttlMs = (await kv.status()).ttl;
      if (!(ttlMs > 0))
        throw new ConfigError(
          'bucket',
          `the bucket ${o.bucket} has no TTL, so the records of dead workers would never expire`,
          { where: 'natsDiscovery' },
        );
      return { kv, ttlMs };
    } catch (e) {
      if (nc === this.#connection) {
        this.#connection = undefined;
        await nc.close().catch(() => undefined);
      }
      throw e;
    }
  }
}

/** Records the watch will deliver before it is live (the consumer's pending count when it was created). */
async function initialCount(entries: unknown): Promise<number> {
  // @nats-io/kv keeps the push consumer on its iterator; its info (cached) is what kv.watch counted
  // to tell the initial records from updates. Without it, report synced at once.
  const consumer = (entries as { _data?: { info?: (cached?: boolean) => Promise<{ num_pending?: unknown }> } })._data;
  if (typeof consumer?.info !== 'function') return 0;
  const info = await consumer.info(true);
  return typeof info.num_pending === 'number' && info.num_pending > 0 ? info.num_pending : 0;
}

async function load<T>(importer: () => Promise<T>, name: string): Promise<T> {
  try {
    return await importer();
  } catch (e) {
    throw new DiscoveryError(
      'ERR_DISCOVERY_UNAVAILABLE',
      `natsDiscovery needs the package ${name} (npm install ${name}): it could not be loaded`,
      { cause: e },
    );
  }
}

function hexOf(key: string): string | undefined {
  return isWorkerHex(key) ? key : undefined;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
