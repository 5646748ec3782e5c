/**
 * `lanemux/discovery`: the discovery interface every adapter implements, its errors, and
 * {@link createDiscovery} for adapter authors. The adapters are entries of their own
 * (`lanemux/discovery/static`, `lanemux/discovery/etcd`, `lanemux/discovery/nats`), so a bundle pulls
 * in only the ones it imports, and their client packages load only when used.
 *
 * @packageDocumentation
 */
export type {
  Discovery,
  DiscoveryCloseOptions,
  DiscoveryEvent,
  DiscoveryWatch,
  Registration,
  RegistrationInput,
  WatchOptions,
} from './discovery.ts';
export { DiscoveryError } from './errors.ts';
export type { DiscoveryErrorCode } from './errors.ts';
export {
  DEFAULT_MAX_RECORD_BYTES,
  DEFAULT_MAX_WATCH_QUEUE,
  DEFAULT_TIMEOUT_MS,
  DEFAULT_TTL_MS,
  resolveDiscoveryOptions,
} from './options.ts';
export type { DiscoveryOptions, ResolvedDiscoveryOptions } from './options.ts';
export type { WorkerIdInput } from './worker-id.ts';
export { createDiscovery } from './create.ts';
export type { BackendContext, DiscoveryBackend, StoredRecord, WatchSink } from './backend.ts';
