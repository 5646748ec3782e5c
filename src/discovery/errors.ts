/**
 * Errors of discovery: the store is out of reach, a record in it is not a registration, a watch
 * ended without its rest. Invalid arguments (a bad registration, a malformed worker id, bad adapter
 * options) are a `ConfigError` (`ERR_INVALID_CONFIG`), not a discovery error.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';
import type { LanemuxErrorOptions } from '../errors.ts';

/** Stable codes of discovery errors. */
export type DiscoveryErrorCode =
  /**
   * The store could not be reached or did not answer within `timeoutMs` (server down, connection
   * refused, lease lost and not yet renewed), or the adapter's client package is not installed
   * (then not retryable). Retryable otherwise: the same call may succeed later.
   */
  | 'ERR_DISCOVERY_UNAVAILABLE'
  /**
   * A record in the store is not a registration: not UTF-8 JSON, over `maxRecordBytes`, a field out
   * of its bounds, or a worker id other than its key's. Another writer (or a hand edit) put it
   * there; the worker it names counts as unregistered. Not retryable.
   */
  | 'ERR_DISCOVERY_INVALID_RECORD'
  /**
   * A watch's consumer fell more than `maxQueue` events behind. The events before it are delivered,
   * then the watch ends with this error; a new watch starts from a fresh snapshot. Retryable.
   */
  | 'ERR_DISCOVERY_WATCH_OVERFLOW'
  /**
   * A watch could not go on without missing changes (the store compacted the history it needed to
   * resume, or its stream ended). It ends with this error; a new watch starts from a fresh snapshot.
   * Retryable.
   */
  | 'ERR_DISCOVERY_WATCH_LOST'
  /** The discovery client is closed. */
  | 'ERR_DISCOVERY_CLOSED';

/** An error of discovery, with a stable code. */
export class DiscoveryError extends LanemuxError<DiscoveryErrorCode> {
  constructor(code: DiscoveryErrorCode, message: string, options: LanemuxErrorOptions = {}) {
    super(code, message, options);
  }
}

/** `error` as a discovery error: itself when it is a lanemux error, else `ERR_DISCOVERY_UNAVAILABLE` naming `what`. */
export function asDiscoveryError(error: unknown, what: string): LanemuxError {
  if (error instanceof LanemuxError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  return new DiscoveryError('ERR_DISCOVERY_UNAVAILABLE', `${what}: ${detail}`, { cause: error, retryable: true });
}
