/**
 * The port a discovery adapter implements: moving record text in and out of one store, keeping a
 * registration's lease alive and feeding a watch. {@link createDiscovery} builds the
 * {@link Discovery} around it: input validation, record encoding, validation of every record read,
 * the bounds on each operation and the watch queues are the same for every store.
 */
import type { Runtime } from '../runtime/runtime.ts';
import type { DiscoveryError } from './errors.ts';
import type { ResolvedDiscoveryOptions } from './options.ts';

/** A stored record as read back: its key (for messages) and its raw value. */
export interface StoredRecord {
  readonly key: string;
  readonly value: Uint8Array | string;
}

/** Where a backend's watch delivers what the store sends, in the store's order. */
export interface WatchSink {
  /** A record was written under `key`; `hex` is the worker id the key names, undefined when it names none. */
  put(key: string, hex: string | undefined, value: Uint8Array | string): void;
  /** The record under `key` was removed (deleted, or its lease expired). */
  delete(key: string, hex: string | undefined): void;
  /**
   * Resolves when the consumer has caught up to half its queue (or the watch ended): a backend that
   * reads its snapshot in pages awaits it between pages, so a large store does not overflow the queue.
   */
  room(): Promise<void>;
  /** Every record of the initial snapshot has been delivered (call once). */
  synced(): void;
  /** The watch cannot go on without a gap; it ends. A non-lanemux error becomes `ERR_DISCOVERY_UNAVAILABLE`. */
  fail(error: unknown): void;
}

/** What a backend gets from {@link createDiscovery}. */
export interface BackendContext {
  readonly options: ResolvedDiscoveryOptions;
  readonly runtime: Runtime;
  /** Report a background failure (to the caller's `onError`). */
  report(error: DiscoveryError): void;
}

/**
 * One store. The core calls `register`, `deregister` and `close` one at a time, and bounds each
 * call by `timeoutMs`; a call that the bound gave up on may still finish, so each must be safe to
 * overtake (a later `deregister` or `close` wins over an earlier `register`).
 */
export interface DiscoveryBackend {
  /**
   * Store `text` as the record of worker `hex` under a lease of `ttlMs` and keep it alive until
   * `deregister` or `close`. Called again for the same worker, it replaces the record.
   */
  register(hex: string, text: string): Promise<void>;
  /** Stop keeping worker `hex` alive and remove its record. Resolves when removed (or there was none). */
  deregister(hex: string): Promise<void>;
  /** The record of worker `hex`, or undefined when the store has none (or only an expired one). */
  read(hex: string): Promise<StoredRecord | undefined>;
  /** Start a watch: every record in the store, `synced()`, then every change. Returns its stop. */
  watch(sink: WatchSink): () => void;
  /** Stop every keep-alive without removing anything, end every watch, release the connection. */
  close(): Promise<void>;
}
