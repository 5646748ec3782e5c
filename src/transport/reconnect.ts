/**
 * The re-dial policy of a `connect(address, { reconnect })` on an adapter that does not reconnect by
 * itself (TCP, memory): its options, their defaults (the WebSocket client's back-off), and the delay
 * of each attempt. The transport core (dial.ts) runs it on the node's runtime (docs/protocol.md §3.5).
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import { int, num, parseOptions } from '../validate.ts';
import type { Runtime } from '../runtime/runtime.ts';

/**
 * How lanemux re-dials a lost link when the adapter does not reconnect by itself. The delay of
 * attempt n (0-based) is `min(maxDelayMs, (initialDelayMs + random·jitterMs) · factor^n)`, as the
 * WebSocket client's; n counts failed attempts since the last link that formed (its HELLOs completed).
 * Every limit is finite: the dial gives up (`onDialEnded`, peer `gone`) after
 * `maxRetries` failed attempts in a row or once the link has been down for `maxDownMs`.
 */
export interface ReconnectOptions {
  /** Smallest delay before the first attempt, before jitter. Defaults to 500 ms. */
  readonly initialDelayMs?: number;
  /** Random extra delay, 0..this, added before the growth factor. Defaults to 2,500 ms. */
  readonly jitterMs?: number;
  /** Growth of the delay per failed attempt, 1..10. Defaults to 1.3. */
  readonly factor?: number;
  /** Largest delay between two attempts. Defaults to 30,000 ms. */
  readonly maxDelayMs?: number;
  /** Failed attempts in a row (no link formed) before the dial gives up. Defaults to 100. */
  readonly maxRetries?: number;
  /** How long the link may stay down before the dial gives up. Defaults to 300,000 ms (5 minutes). */
  readonly maxDownMs?: number;
}

/** The `reconnect` option of a `connect`: `true` for the defaults, an object to tune them, `false` for none. */
export type ReconnectOption = boolean | ReconnectOptions;

const schema = z.strictObject({
  initialDelayMs: z._default(int(0, 600_000), 500),
  jitterMs: z._default(int(0, 600_000), 2_500),
  factor: z._default(num(1, 10), 1.3),
  maxDelayMs: z._default(int(1, 3_600_000), 30_000),
  maxRetries: z._default(int(0, 1_000_000), 100),
  maxDownMs: z._default(int(1, 86_400_000), 300_000),
});

/** {@link ReconnectOptions} with every default filled in. */
export type ReconnectPolicy = Readonly<z.output<typeof schema>>;

const optionSchema = z.object({ reconnect: z.optional(z.union([z.boolean(), schema])) });

/**
 * Check a `reconnect` option: undefined when not given, `false` for none, else the policy (`true`:
 * every default). Throws a `ConfigError` (`ERR_INVALID_CONFIG`) naming every bad field.
 */
export function resolveReconnect(option: unknown): ReconnectPolicy | false | undefined {
  const r = parseOptions(optionSchema, { reconnect: option }, 'connect').reconnect;
  return r === true ? schema.parse({}) : r;
}

/** The delay before attempt `step` (0-based) of `policy`, jittered from the runtime's randomness. */
export function reconnectDelay(policy: ReconnectPolicy, step: number, rt: Runtime): number {
  const b = new Uint8Array(4);
  rt.randomBytes(b);
  const random = (((b[0]! << 24) >>> 0) + (b[1]! << 16) + (b[2]! << 8) + b[3]!) / 2 ** 32;
  return Math.min(policy.maxDelayMs, (policy.initialDelayMs + random * policy.jitterMs) * policy.factor ** step);
}
