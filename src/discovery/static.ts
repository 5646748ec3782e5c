/**
 * `lanemux/discovery/static`: discovery without a server, for one host and for tests. Registrations
 * live in a {@link StaticStore} in memory (clients given the same store see each other, leases and
 * watches included), seeded from `entries` and from a JSON file:
 *
 * ```json
 * { "workers": [
 *   { "v": 1, "workerId": "00000000000000a1", "addresses": { "tcp": "tcp://10.0.0.5:7000" }, "lanes": 4 }
 * ] }
 * ```
 *
 * The file is read once, on first use, through `readFile` (on Node, Deno and Bun a default reads
 * it from disk); its records are validated when read like any other, so one bad entry makes only
 * its own worker invalid. Runtime-agnostic: the default reader is found by feature detection.
 *
 * @example
 * ```ts
 * const store = createStaticStore();
 * const a = staticDiscovery({ store });
 * await a.register({ workerId: node.workerId, addresses: { tcp: 'tcp://127.0.0.1:7000' } });
 * const b = staticDiscovery({ store });
 * const peer = await b.resolve(node.workerId);
 * ```
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import { systemRuntime, type Runtime, type TimerHandle } from '../runtime/runtime.ts';
import { int, parseOptions } from '../validate.ts';
import type { BackendContext, DiscoveryBackend, StoredRecord, WatchSink } from './backend.ts';
import { createDiscovery } from './create.ts';
import type { Discovery, RegistrationInput } from './discovery.ts';
import { DiscoveryError } from './errors.ts';
import { KeepAlive } from './keep-alive.ts';
import { discoveryOptionsShape, type DiscoveryOptions } from './options.ts';
import { encodeRegistration } from './record.ts';
import { isWorkerHex } from './worker-id.ts';

/** An in-memory store of registrations, shared by the static clients given it. */
export interface StaticStore {
  /** The keys present (worker ids as 16 hex digits, and any key `writeRaw` used). */
  keys(): readonly string[];
  /**
   * Write `value` under `key` as it is: unvalidated, without a lease, seen by every watch. What a
   * hand edit or a foreign writer may leave in a store; readers validate it.
   */
  writeRaw(key: string, value: string | Uint8Array): void;
}

/** Options of {@link createStaticStore}. */
export interface StaticStoreOptions {
  /** The clock of lease expiry. Defaults to the system runtime. */
  readonly runtime?: Runtime | undefined;
}

/** Create an empty static store. */
export function createStaticStore(options: StaticStoreOptions = {}): StaticStore {
  return new Store(options.runtime ?? systemRuntime());
}

/** Options of {@link staticDiscovery}. */
export interface StaticDiscoveryOptions extends DiscoveryOptions {
  /** The store to use. Defaults to a new store of this client's own. */
  readonly store?: StaticStore | undefined;
  /** Registrations to put in the store, without a lease. Defaults to none. */
  readonly entries?: readonly RegistrationInput[] | undefined;
  /** A JSON file of registrations (`{ "workers": [record, …] }`) to put in the store on first use. */
  readonly file?: string | undefined;
  /** Reads `file`. Defaults to the runtime's file system (Node, Deno, Bun); required elsewhere. */
  readonly readFile?: ((path: string) => Promise<string | Uint8Array>) | undefined;
  /** Largest `file` accepted, bytes. Defaults to 1 MiB; 1..67,108,864. */
  readonly maxFileBytes?: number | undefined;
}

const schema = z.strictObject({
  ...discoveryOptionsShape,
  store: z.optional(z.custom<StaticStore>((v) => v instanceof Store, 'not a StaticStore from createStaticStore()')),
  entries: z.optional(z.array(z.custom<RegistrationInput>((v) => typeof v === 'object' && v !== null, 'an object'))),
  file: z.optional(z.string().check(z.minLength(1), z.maxLength(4096))),
  readFile: z.optional(
    z.custom<(path: string) => Promise<string | Uint8Array>>(
      (v) => typeof v === 'function',
      'readFile must be a function',
    ),
  ),
  maxFileBytes: z._default(int(1, 64 * 1024 * 1024), 1024 * 1024),
});

/** Create a discovery client over a static store. */
export function staticDiscovery(options: StaticDiscoveryOptions = {}): Discovery {
  const o = parseOptions(schema, options, 'staticDiscovery');
  const store = (o.store as Store | undefined) ?? new Store(o.runtime ?? systemRuntime());
  for (const input of o.entries ?? []) {
    const { hex, text } = encodeRegistration(input, o.maxRecordBytes);
    store.set(hex, text, undefined, undefined);
  }
  let reader = o.readFile;
  if (o.file !== undefined && reader === undefined) {
    reader = defaultReadFile();
    if (reader === undefined)
      throw new DiscoveryError(
        'ERR_DISCOVERY_UNAVAILABLE',
        'staticDiscovery: this runtime has no file system to read file from; pass readFile',
      );
  }
  const file = o.file === undefined ? undefined : { path: o.file, read: reader!, maxBytes: o.maxFileBytes };
  return createDiscovery('static discovery', o, (ctx) => new StaticBackend(store, file, ctx.options.ttlMs, ctx));
}

interface Entry {
  readonly value: string | Uint8Array;
  timer: TimerHandle | undefined;
  /** The client whose lease this is; undefined for entries without one. */
  readonly owner: object | undefined;
}

class Store implements StaticStore {
  readonly #runtime: Runtime;
  readonly #entries = new Map<string, Entry>();
  readonly #sinks = new Set<WatchSink>();

  constructor(runtime: Runtime) {
    this.#runtime = runtime;
  }

  keys(): readonly string[] {
    return [...this.#entries.keys()];
  }

  writeRaw(key: string, value: string | Uint8Array): void {
    this.set(key, typeof value === 'string' ? value : value.slice(), undefined, undefined);
  }

  get(key: string): Entry | undefined {
    return this.#entries.get(key);
  }

  /** Put `value` under `key`, with a lease of `ttlMs` held by `owner` (none when undefined). */
  set(key: string, value: string | Uint8Array, ttlMs: number | undefined, owner: object | undefined): void {
    const old = this.#entries.get(key);
    if (old?.timer !== undefined) this.#runtime.clearTimer(old.timer);
    const entry: Entry = { value, timer: undefined, owner };
    this.#entries.set(key, entry);
    if (ttlMs !== undefined) this.#arm(key, entry, ttlMs);
    for (const sink of this.#sinks) sink.put(key, hexOf(key), value);
  }

  /** Extend `owner`'s lease on `key`; false when it has none there any more. */
  renew(key: string, owner: object, ttlMs: number): boolean {
    const entry = this.#entries.get(key);
    if (entry === undefined || entry.owner !== owner) return false;
    if (entry.timer !== undefined) this.#runtime.clearTimer(entry.timer);
    this.#arm(key, entry, ttlMs);
    return true;
  }

  /** Remove `key` if `owner` holds it. */
  remove(key: string, owner: object): void {
    const entry = this.#entries.get(key);
    if (entry === undefined || entry.owner !== owner) return;
    this.#drop(key, entry);
  }

  /** Deliver every entry, `synced`, then every change to `sink` until the returned stop. */
  watch(sink: WatchSink): () => void {
    for (const [key, entry] of this.#entries) sink.put(key, hexOf(key), entry.value);
    sink.synced();
    this.#sinks.add(sink);
    return () => this.#sinks.delete(sink);
  }

  #arm(key: string, entry: Entry, ttlMs: number): void {
    entry.timer = this.#runtime.setTimer(() => {
      if (this.#entries.get(key) === entry) this.#drop(key, entry);
    }, ttlMs);
  }

  #drop(key: string, entry: Entry): void {
    if (entry.timer !== undefined) this.#runtime.clearTimer(entry.timer);
    this.#entries.delete(key);
    for (const sink of this.#sinks) sink.delete(key, hexOf(key));
  }
}

function hexOf(key: string): string | undefined {
  return isWorkerHex(key) ? key : undefined;
}

interface FileSource {
  readonly path: string;
  readonly read: (path: string) => Promise<string | Uint8Array>;
  readonly maxBytes: number;
}

class StaticBackend implements DiscoveryBackend {
  readonly #store: Store;
  readonly #file: FileSource | undefined;
  readonly #ttlMs: number;
  readonly #owner = {};
  readonly #keepAlive: KeepAlive;
  #loaded: Promise<void> | undefined;
  #hex: string | undefined;
  #text = '';

  constructor(store: Store, file: FileSource | undefined, ttlMs: number, ctx: BackendContext) {
    this.#store = store;
    this.#file = file;
    this.#ttlMs = ttlMs;
    this.#keepAlive = new KeepAlive(
      ctx.runtime,
      Math.floor(ttlMs / 3),
      ctx.options.timeoutMs,
      async () => {
        const hex = this.#hex;
        if (hex === undefined || this.#store.renew(hex, this.#owner, this.#ttlMs)) return;
        // The lease ran out (the loop was held up for a whole TTL): register again.
        this.#store.set(hex, this.#text, this.#ttlMs, this.#owner);
        ctx.report(
          new DiscoveryError(
            'ERR_DISCOVERY_UNAVAILABLE',
            `static discovery: the lease of ${hex} expired; registered again`,
            {
              retryable: true,
            },
          ),
        );
      },
      ctx.report,
      'static discovery keep-alive',
    );
  }

  async register(hex: string, text: string): Promise<void> {
    await this.#load();
    this.#hex = hex;
    this.#text = text;
    this.#store.set(hex, text, this.#ttlMs, this.#owner);
    this.#keepAlive.start();
  }

  async deregister(hex: string): Promise<void> {
    this.#keepAlive.stop();
    if (this.#hex === hex) this.#hex = undefined;
    this.#store.remove(hex, this.#owner);
  }

  async read(hex: string): Promise<StoredRecord | undefined> {
    await this.#load();
    const entry = this.#store.get(hex);
    return entry === undefined ? undefined : { key: hex, value: entry.value };
  }

  watch(sink: WatchSink): () => void {
    let stop: (() => void) | undefined;
    let stopped = false;
    this.#load().then(
      () => {
        if (!stopped) stop = this.#store.watch(sink);
      },
      (e: unknown) => sink.fail(e),
    );
    return () => {
      stopped = true;
      stop?.();
    };
  }

  async close(): Promise<void> {
    this.#keepAlive.stop();
    this.#hex = undefined;
  }

  /** Read the file into the store once; a failed read is tried again on the next operation. */
  #load(): Promise<void> {
    const file = this.#file;
    if (file === undefined) return Promise.resolve();
    this.#loaded ??= loadFile(file, this.#store).catch((e: unknown) => {
      this.#loaded = undefined;
      throw e;
    });
    return this.#loaded;
  }
}

async function loadFile(file: FileSource, store: Store): Promise<void> {
  const invalid = (why: string, cause?: unknown): DiscoveryError =>
    new DiscoveryError('ERR_DISCOVERY_INVALID_RECORD', `static discovery file ${file.path}: ${why}`, { cause });
  let raw: string | Uint8Array;
  try {
    raw = await file.read(file.path);
  } catch (e) {
    throw new DiscoveryError(
      'ERR_DISCOVERY_UNAVAILABLE',
      `static discovery file ${file.path}: cannot be read: ${e instanceof Error ? e.message : String(e)}`,
      { cause: e, retryable: true },
    );
  }
  const size = typeof raw === 'string' ? raw.length : raw.length;
  if (size > file.maxBytes) throw invalid(`over maxFileBytes (${file.maxBytes})`);
  let json: unknown;
  try {
    json = JSON.parse(typeof raw === 'string' ? raw : new TextDecoder('utf-8', { fatal: true }).decode(raw));
  } catch (e) {
    throw invalid('not UTF-8 JSON', e);
  }
  const workers = (json as { workers?: unknown } | null)?.workers;
  if (typeof json !== 'object' || json === null || !Array.isArray(workers))
    throw invalid('expected { "workers": [record, …] }');
  workers.forEach((record: unknown, i) => {
    const id = (record as { workerId?: unknown } | null)?.workerId;
    // A record is keyed by the worker it names; one that names none stays visible (and invalid) under its index.
    const key = typeof id === 'string' && isWorkerHex(id) ? id : `${file.path}#${i}`;
    store.set(key, JSON.stringify(record), undefined, undefined);
  });
}

/** The runtime's own file reader (Node's and Bun's `fs`, Deno's `Deno.readFile`), if it has one. */
function defaultReadFile(): ((path: string) => Promise<Uint8Array>) | undefined {
  const host = globalThis as Record<string, unknown>;
  const deno = Reflect.get(host, 'Deno') as { readFile?: (path: string) => Promise<Uint8Array> } | undefined;
  if (typeof deno?.readFile === 'function') return (path) => deno.readFile!(path);
  const proc = Reflect.get(host, 'process') as { getBuiltinModule?: (id: string) => unknown } | undefined;
  const fs = proc?.getBuiltinModule?.('node:fs') as
    | { promises?: { readFile(path: string): Promise<Uint8Array> } }
    | undefined;
  const readFile = fs?.promises?.readFile;
  if (typeof readFile !== 'function') return undefined;
  return (path) => readFile(path);
}
