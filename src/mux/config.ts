/**
 * `MuxConfig`: the mux's knobs, validated with zod/mini at construction (every knob documented on `MuxConfig` below).
 * A bad value is an error naming the field; every limit is finite.
 */
import * as z from '../schema.ts';
import { ConfigError } from '../errors.ts';
import {
  DEFAULT_INITIAL_CREDIT,
  DEFAULT_PEER_BYTE_BUDGET,
  DEFAULT_SLOT_BYTE_BUDGET,
  MAX_CREDIT,
} from '../credit/constants.ts';
import { DEFAULT_MAX_BATCH_BYTES, MIN_BATCH_CAP } from '../wire/constants.ts';
import { int, num, parse } from '../validate.ts';
import { configError } from '../validate.ts';

/** When the batcher writes its open batch. */
export type FlushPolicy =
  | { readonly kind: 'auto'; readonly onAdmission: true }
  | {
      readonly kind: 'auto';
      readonly onAdmission: false;
      /** Longest a staged record waits, in ms. Defaults to none (only clamps, kicks and liveness write). */
      readonly maxLinger?: number;
      /** Also write when every live slot on the lane has a data record in the batch. Defaults to false. */
      readonly onComplete?: boolean;
      /** Also write when the batch reaches this many bytes. Defaults to none. */
      readonly atBytes?: number;
    }
  /**
   * Only `flushBatch()` writes application records (plus clamps, terminals, closes and credit
   * replies past their linger). A credit grant that arrives after a pass's flush releases the
   * withheld records only at the next `flushBatch()`: a producer that waits
   * for its consumer before it flushes again must flush on a timer too, or use `auto`.
   */
  | { readonly kind: 'manual' };

/** Mux configuration. Every field is optional; see {@link MUX_DEFAULTS}. */
export interface MuxConfig {
  /** Install the mux. Defaults to true. The kill switch `LANEMUX_MUX_DISABLE` (or `VELO_MESSENGER_MUX_DISABLE`) ∈ {1, true, yes, on} wins. */
  readonly enabled?: boolean;
  /** Install no per-stream (legacy) listener. Defaults to false. */
  readonly muxOnly?: boolean;
  /** Configured batch cap in bytes. Defaults to 61,440 (60 KiB). */
  readonly maxBatchBytes?: number;
  /** Per-slot data credit C advertised to senders; the slot buffer holds C+1. Defaults to 32. 0 is refused. */
  readonly initialCredit?: number;
  /**
   * Tune each ingress slot's credit window (docs/protocol.md §10.7.1): grow it from `initialCredit` toward the
   * stream's bandwidth-delay product, within `slotByteBudget` and half the peer's receive window, and shrink it
   * back while that window is nearly full. The wire is unchanged. A relay's source keeps C (the next hop bounds the
   * stream). Defaults to true; false keeps every window at `initialCredit`.
   */
  readonly autoCredit?: boolean;
  /** Per-slot byte budget (withheld queue cap on egress, hold and grant watermark on ingress). Defaults to 1 MiB; 0 means the default. */
  readonly slotByteBudget?: number;
  /**
   * Byte budget per peer, shared by its lanes. Defaults to 8 MiB. Receive side: the out-of-order
   * hold of all its slots, and the receive window this node advertises in its HELLO (capped at
   * 2^32 − 1): a peer that advertised one too keeps at most this many bytes of Data-record bodies
   * toward this node unreleased, so what this node holds for the peer's unread records stays within
   * it plus one batch. Send side: the withheld queues of all its slots (records of slots without
   * credit or without room in the peer's window); once they reach it, producers of such slots wait
   * (`send()` resolves later).
   */
  readonly peerByteBudget?: number;
  /** Period of the credit sweep (whole-table walk, bind expiry, batcher eviction), ms. Defaults to 200. Must be non-zero. */
  readonly creditSweepInterval?: number;
  /** At most one doorbell visit per (peer, lane) per this many ms. Defaults to 2; 0 disables the floor; clamped to ≤ 1 h. */
  readonly drainVisitFloor?: number;
  /** An idle batcher with no live slots is evicted after this many ms. Defaults to 60,000. */
  readonly batcherIdleTtl?: number;
  /** When batches are written. Defaults to `{ kind: 'auto', onAdmission: true }`. */
  readonly flushPolicy?: FlushPolicy;
  /** How long a credit reply may wait for company, ms. Defaults to 1; 0 makes every reply urgent. */
  readonly replyLinger?: number;
  /** Accept window of attach binds (answered, not yet claimed by an OpenSlot), ms. Defaults to 60,000. */
  readonly acceptWindow?: number;
  /** Accept window of pre-binds (zero-RTT tickets not yet claimed), ms. Defaults to 180,000. */
  readonly prebindTimeout?: number;
  /**
   * Open ack without waiting for admission: `openAnchorStream`/`attachAnchor` return at once and the
   * slot is fenced until its OpenSlot batch is admitted (only when admission is not synchronous).
   * Defaults to false (the open resolves once the OpenSlot batch is admitted).
   */
  readonly asyncOpenAck?: boolean;
  /**
   * Largest record this node stages as a rendezvous transfer (sender side) and accepts from a peer
   * (receiver side), in bytes. A record over the batch cap goes alone as a transfer that the
   * receiver pulls in chunks; a receiver refuses a transfer that states more than this before it
   * allocates anything, and ends only that stream. Defaults to 64 MiB.
   */
  readonly stagedPayloadMax?: number;
  /** Heartbeat interval this node advertises as a consumer, ms. Defaults to 5,000. */
  readonly heartbeatInterval?: number;
  /** Peer health-check period while a batcher has live slots, ms. Defaults to 5,000. */
  readonly healthCheckInterval?: number;
  /** Peer health-check timeout, ms. Defaults to the health-check interval. */
  readonly healthCheckTimeout?: number;
  /** Dead heartbeat windows before the watchdog drops a stream. Defaults to 3. */
  readonly detectionMultiplier?: number;
}

/** The resolved configuration. */
export type ResolvedMuxConfig = { readonly [K in keyof MuxConfig]-?: Exclude<MuxConfig[K], undefined> };

/** Defaults of every {@link MuxConfig} field. */
export const MUX_DEFAULTS: ResolvedMuxConfig = Object.freeze({
  enabled: true,
  muxOnly: false,
  maxBatchBytes: DEFAULT_MAX_BATCH_BYTES,
  initialCredit: DEFAULT_INITIAL_CREDIT,
  autoCredit: true,
  slotByteBudget: DEFAULT_SLOT_BYTE_BUDGET,
  peerByteBudget: DEFAULT_PEER_BYTE_BUDGET,
  creditSweepInterval: 200,
  drainVisitFloor: 2,
  batcherIdleTtl: 60_000,
  flushPolicy: Object.freeze({ kind: 'auto', onAdmission: true }) as FlushPolicy,
  replyLinger: 1,
  acceptWindow: 60_000,
  prebindTimeout: 180_000,
  asyncOpenAck: false,
  stagedPayloadMax: 64 * 1024 * 1024,
  heartbeatInterval: 5_000,
  healthCheckInterval: 5_000,
  healthCheckTimeout: 5_000,
  detectionMultiplier: 3,
});

const HOUR = 3_600_000;
const ms = (max: number) => num(0, max);

const flushPolicySchema = z.union([
  z.strictObject({ kind: z.literal('auto'), onAdmission: z.literal(true) }),
  z.strictObject({
    kind: z.literal('auto'),
    onAdmission: z.literal(false),
    maxLinger: z.optional(ms(HOUR)),
    onComplete: z.optional(z.boolean()),
    atBytes: z.optional(int(MIN_BATCH_CAP, 1 << 30)),
  }),
  z.strictObject({ kind: z.literal('manual') }),
]);

const schema = z.strictObject({
  enabled: z.boolean(),
  muxOnly: z.boolean(),
  maxBatchBytes: int(MIN_BATCH_CAP, 1 << 30),
  initialCredit: int(0, MAX_CREDIT),
  autoCredit: z.boolean(),
  slotByteBudget: int(0, 2 ** 40),
  peerByteBudget: int(1, 2 ** 42),
  creditSweepInterval: ms(HOUR),
  drainVisitFloor: num(0),
  batcherIdleTtl: ms(24 * HOUR),
  flushPolicy: flushPolicySchema,
  replyLinger: ms(HOUR),
  acceptWindow: num(1, 24 * HOUR),
  prebindTimeout: num(1, 24 * HOUR),
  asyncOpenAck: z.boolean(),
  stagedPayloadMax: int(1, 2 ** 40),
  heartbeatInterval: num(1, HOUR),
  healthCheckInterval: num(1, HOUR),
  healthCheckTimeout: num(1, HOUR),
  detectionMultiplier: int(1, 255),
});

// The one configuration error of lanemux lives with the error base; re-exported here, where the
// package root has always taken it from.
export { ConfigError };

const KILL_VALUES = new Set(['1', 'true', 'yes', 'on']);

/** True if a kill-switch value disables the mux: 1, true, yes or on, case-insensitive. */
export function killSwitchSet(value: string | undefined): boolean {
  return value !== undefined && KILL_VALUES.has(value.trim().toLowerCase());
}

/**
 * Validate and resolve a mux config. Throws {@link ConfigError} naming every bad field: unknown keys,
 * wrong types, out-of-range values, `initialCredit = 0` ("initial_credit = 0") and
 * `creditSweepInterval = 0`.
 */
export function resolveMuxConfig(input: unknown, killSwitch: string | undefined = undefined): ResolvedMuxConfig {
  if (input !== undefined && (typeof input !== 'object' || input === null || Array.isArray(input))) {
    throw new ConfigError('mux', 'expected an object');
  }
  const merged = { ...MUX_DEFAULTS, ...(input as object | undefined) } as Record<string, unknown>;
  if (
    merged['healthCheckTimeout'] === undefined ||
    (input as MuxConfig | undefined)?.healthCheckTimeout === undefined
  ) {
    merged['healthCheckTimeout'] = merged['healthCheckInterval'];
  }
  for (const k of Object.keys(merged))
    if (merged[k] === undefined) merged[k] = (MUX_DEFAULTS as Record<string, unknown>)[k];
  const parsed = parse(schema, merged);
  if (!parsed.success) throw configError(parsed.error, { prefix: 'mux.' });
  const c = parsed.data;
  if (c.initialCredit === 0)
    throw new ConfigError('mux.initialCredit', 'initial_credit = 0 would let no stream send anything');
  if (c.creditSweepInterval === 0)
    throw new ConfigError('mux.creditSweepInterval', 'credit_sweep_interval must be non-zero');
  return Object.freeze({
    ...c,
    enabled: c.enabled && !killSwitchSet(killSwitch),
    slotByteBudget: c.slotByteBudget === 0 ? DEFAULT_SLOT_BYTE_BUDGET : c.slotByteBudget,
    drainVisitFloor: Math.min(c.drainVisitFloor, HOUR),
    flushPolicy: c.flushPolicy as FlushPolicy,
  });
}
