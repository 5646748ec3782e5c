/**
 * Discovery: where a node registers how to reach it, and where other nodes find it by worker id
 * (the worker id an anchor handle `lmx1.<worker><local>` carries), instead of hand-written
 * addresses. The store is a distributed engine (etcd, NATS KV) or, for one host and tests, a
 * static map; each is an adapter behind this one interface.
 *
 * A registration lives under a lease: the registering client keeps it alive, and when the client
 * dies the store drops it after `ttlMs`. Every record read back is validated and size-bounded: a
 * hostile or corrupt record is a {@link DiscoveryError} (`ERR_DISCOVERY_INVALID_RECORD`), never a
 * crash.
 *
 * Runtime-agnostic: no `node:*`, no `Buffer`, no `process`.
 *
 * @packageDocumentation
 */
import type { DiscoveryError } from './errors.ts';
import type { WorkerIdInput } from './worker-id.ts';

/** A node as discovery knows it. Frozen. */
export interface Registration {
  /** The node's 64-bit worker id. */
  readonly workerId: bigint;
  /**
   * Where to connect, by transport: e.g. `{ tcp: 'tcp://10.0.0.5:7000', ws: 'wss://edge-1/lmx' }`.
   * Keys are transport names (`[a-z][a-z0-9+.-]*`, at most 32 characters); values are URLs.
   */
  readonly addresses: Readonly<Record<string, string>>;
  /** Lanes the node offers (1..16). */
  readonly lanes: number;
  /** A small string map for the application (zone, role, version, …). */
  readonly metadata: Readonly<Record<string, string>>;
  /**
   * The name of the credential a dialler should present (which token or key to fetch from its own
   * secret store), never the secret itself: every reader of the store sees it.
   */
  readonly credential?: string | undefined;
}

/** What {@link Discovery.register} takes. */
export interface RegistrationInput {
  /** The node's worker id: a bigint, or 16 hex digits. */
  readonly workerId: WorkerIdInput;
  /** Where to connect, by transport (at least one, at most 16). */
  readonly addresses: Readonly<Record<string, string>>;
  /** Lanes the node offers (1..16). Defaults to 1. */
  readonly lanes?: number | undefined;
  /** At most 32 entries: keys of at most 64 characters, values of at most 256. Defaults to none. */
  readonly metadata?: Readonly<Record<string, string>> | undefined;
  /** A credential reference name (at most 128 characters of `[A-Za-z0-9._:/-]`). Defaults to none. */
  readonly credential?: string | undefined;
}

/**
 * One change seen by a watch. A watch first yields a `put` for every registration in the store,
 * then `synced`, then each change after that snapshot in the store's order, with none missed.
 */
export type DiscoveryEvent =
  /** A worker registered, or changed its registration. */
  | { readonly type: 'put'; readonly workerId: bigint; readonly registration: Registration }
  /** A worker deregistered, or its lease expired. */
  | { readonly type: 'delete'; readonly workerId: bigint }
  /** Every registration that existed when the watch started has been yielded. Once per watch. */
  | { readonly type: 'synced' }
  /**
   * A record in the store is not a registration (`ERR_DISCOVERY_INVALID_RECORD`). The worker it
   * names (`workerId`, when its key names one) counts as unregistered; the watch goes on.
   */
  | {
      readonly type: 'invalid';
      readonly key: string;
      readonly workerId: bigint | undefined;
      readonly error: DiscoveryError;
    };

/** Options of {@link Discovery.watch}. */
export interface WatchOptions {
  /** Ends the watch when it fires (the iteration then finishes normally). */
  readonly signal?: AbortSignal | undefined;
  /**
   * Events buffered for a slow consumer before the watch ends with `ERR_DISCOVERY_WATCH_OVERFLOW`.
   * Defaults to the adapter's `maxWatchQueue` (1024).
   */
  readonly maxQueue?: number | undefined;
}

/**
 * A running watch: an async iterator of {@link DiscoveryEvent}s. Breaking out of `for await`, or
 * `close()`, stops it. It ends with a {@link DiscoveryError} when it cannot go on without a gap
 * (`ERR_DISCOVERY_WATCH_OVERFLOW`, `ERR_DISCOVERY_WATCH_LOST`, `ERR_DISCOVERY_UNAVAILABLE` when its
 * snapshot cannot be read); start a new one then.
 */
export interface DiscoveryWatch extends AsyncIterableIterator<DiscoveryEvent> {
  /** Stop the watch; a pending `next()` finishes with `done`. */
  close(): void;
}

/** Options of {@link Discovery.close}. */
export interface DiscoveryCloseOptions {
  /**
   * Remove this node's registration before closing. With false the keep-alive stops and the store
   * drops the registration when its lease expires. Defaults to true.
   */
  readonly deregister?: boolean | undefined;
}

/**
 * A discovery client. One client registers at most one node (its own); any client resolves and
 * watches every node. Operations that reach the store are bounded by the adapter's `timeoutMs`
 * and reject with `ERR_DISCOVERY_UNAVAILABLE` past it.
 */
export interface Discovery {
  /**
   * Register this node under a lease and keep the lease alive until {@link deregister} or
   * {@link close}; registering again replaces the record (a new worker id replaces the old one).
   * Resolves when the store holds the record. If the lease is lost later (the store was out of reach
   * for longer than its TTL), the client registers again and reports the loss to `onError`.
   * Invalid input is a `ConfigError`.
   */
  register(registration: RegistrationInput): Promise<void>;
  /** The registration of `workerId`, or undefined when it has none (never registered, deregistered, lease expired). */
  resolve(workerId: WorkerIdInput): Promise<Registration | undefined>;
  /** Watch every registration: a snapshot, `synced`, then each change (see {@link DiscoveryEvent}). */
  watch(options?: WatchOptions): DiscoveryWatch;
  /** Remove this node's registration and stop its keep-alive. Does nothing when not registered. */
  deregister(): Promise<void>;
  /**
   * Deregister (unless `deregister: false`), end every watch and release the connection (one the
   * caller passed in stays open). Never rejects: a failed deregistration goes to `onError`, and
   * the lease then expires on its own. `[Symbol.asyncDispose]` calls it where the runtime has it.
   */
  close(options?: DiscoveryCloseOptions): Promise<void>;
}
