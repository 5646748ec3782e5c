/**
 * Options every discovery adapter takes, with their defaults and bounds. Every limit is finite.
 */
import * as z from '../schema.ts';
import type { Runtime } from '../runtime/runtime.ts';
import { int, parseOptions } from '../validate.ts';
import type { DiscoveryError } from './errors.ts';

/** Default lease TTL: 30 s. */
export const DEFAULT_TTL_MS = 30_000;
/** Default bound on one operation against the store: 5 s. */
export const DEFAULT_TIMEOUT_MS = 5_000;
/** Default largest record: 4 KiB. */
export const DEFAULT_MAX_RECORD_BYTES = 4096;
/** Default events a watch buffers for a slow consumer: 1024. */
export const DEFAULT_MAX_WATCH_QUEUE = 1024;

/** Options of every discovery adapter. */
export interface DiscoveryOptions {
  /**
   * Lease TTL, ms: how long the store keeps a registration after its client stops renewing it. The
   * keep-alive renews every third of it. Whole seconds on etcd (rounded up). Defaults to 30,000;
   * 1,000..86,400,000.
   */
  readonly ttlMs?: number | undefined;
  /** Bound on each operation against the store (connect, read, write), ms. Defaults to 5,000; 1..600,000. */
  readonly timeoutMs?: number | undefined;
  /** Largest record written or accepted on read, bytes. Defaults to 4,096; 256..65,536. */
  readonly maxRecordBytes?: number | undefined;
  /** Events a watch buffers for a slow consumer (see `WatchOptions.maxQueue`). Defaults to 1,024; 1..1,000,000. */
  readonly maxWatchQueue?: number | undefined;
  /**
   * Called with what goes wrong in the background (a failed keep-alive, a lost lease, a failed
   * deregistration in `close()`). Defaults to ignoring them; never throws into the client.
   */
  readonly onError?: ((error: DiscoveryError) => void) | undefined;
  /** Clock and timers of the keep-alive and the bounds. Defaults to the system runtime. */
  readonly runtime?: Runtime | undefined;
}

/** {@link DiscoveryOptions} with every default applied. */
export interface ResolvedDiscoveryOptions {
  readonly ttlMs: number;
  readonly timeoutMs: number;
  readonly maxRecordBytes: number;
  readonly maxWatchQueue: number;
  readonly onError?: ((error: DiscoveryError) => void) | undefined;
  readonly runtime?: Runtime | undefined;
}

/** The zod shape of {@link DiscoveryOptions}, spread into each adapter's schema. */
export const discoveryOptionsShape = {
  ttlMs: z._default(int(1000, 86_400_000), DEFAULT_TTL_MS),
  timeoutMs: z._default(int(1, 600_000), DEFAULT_TIMEOUT_MS),
  maxRecordBytes: z._default(int(256, 65_536), DEFAULT_MAX_RECORD_BYTES),
  maxWatchQueue: z._default(int(1, 1_000_000), DEFAULT_MAX_WATCH_QUEUE),
  onError: z.optional(
    z.custom<(error: DiscoveryError) => void>((v) => typeof v === 'function', 'onError must be a function'),
  ),
  runtime: z.optional(
    z.custom<Runtime>(
      (v) =>
        typeof v === 'object' &&
        v !== null &&
        typeof (v as Runtime).now === 'function' &&
        typeof (v as Runtime).setTimer === 'function' &&
        typeof (v as Runtime).clearTimer === 'function',
      'runtime must be a Runtime (now, setTimer, clearTimer)',
    ),
  ),
};

const sharedSchema = z.object(discoveryOptionsShape);

/**
 * The {@link DiscoveryOptions} part of an adapter's `options`, validated (a `ConfigError` naming
 * `where` and every bad field) with the defaults applied; other keys are ignored. For adapter
 * authors, to hand to `createDiscovery`.
 */
export function resolveDiscoveryOptions(options: DiscoveryOptions, where: string): ResolvedDiscoveryOptions {
  return parseOptions(sharedSchema, options, where);
}
