/**
 * `createNode({ discovery })`: what a node registers in discovery and how it finds the workers its
 * handles name through it (discovery-dial.ts runs both). Validated with the other node options.
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import type { Discovery } from '../discovery/discovery.ts';
import type { ReconnectOption } from '../transport/reconnect.ts';
import { int } from '../validate.ts';

/** Default bound on each discovery operation of a node (a resolve, its registration, its deregistration), ms. */
export const DEFAULT_DISCOVERY_TIMEOUT_MS = 5_000;
/** Default bound on dialling a resolved worker (every address tried), ms: the messenger's connect default. */
export const DEFAULT_DISCOVERY_CONNECT_TIMEOUT_MS = 10_000;
/** Default number of workers a node resolves and dials at once. */
export const DEFAULT_MAX_PENDING_DIALS = 256;

/** What a node registers (see `RegistrationInput`); the worker id is the node's own. */
export interface NodeRegistration {
  /**
   * Where peers connect, by transport name (`{ tcp: 'tcp://10.0.0.5:7000' }`). Defaults to the
   * addresses the node listens on, each under its URL scheme (`tcp`, `tls`, `ws`, …; a second one of
   * the same scheme as `tcp.2`). A wildcard listen host (`0.0.0.0`, `::`) is refused there: give the
   * addresses peers can dial.
   */
  readonly addresses?: Readonly<Record<string, string>>;
  /** Lanes offered (1..16). Defaults to the node's own. */
  readonly lanes?: number;
  /** A small string map for the application (zone, role, version). Defaults to none. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** The name of the credential a dialler should present (never the secret: every reader sees it). Defaults to none. */
  readonly credential?: string;
}

/** `createNode({ discovery })` in full; a bare `Discovery` means `{ client }` with every default. */
export interface NodeDiscoveryOptions {
  /**
   * The discovery client (`staticDiscovery`, `etcdDiscovery`, `natsDiscovery`). The node registers
   * through it and resolves with it; it does not close it (unless `closeClient`). A client registers
   * one node: nodes that share one should give `register: false` but one.
   */
  readonly client: Discovery;
  /**
   * What to register once the node listens, under the client's lease; `close()` deregisters it
   * (waiting at most `timeoutMs`). `false`: register nothing. Defaults to the node's listen
   * addresses when it listens, and to nothing when it does not (a node that only dials).
   */
  readonly register?: NodeRegistration | false;
  /**
   * Bound on each discovery operation of the node, ms: a resolve (past it the attach fails
   * `ERR_DISCOVERY_UNAVAILABLE`, retryable), the registration in `createNode`, the deregistration in
   * `close()`. Defaults to 5,000; 1..600,000.
   */
  readonly timeoutMs?: number;
  /**
   * How a resolved worker is dialled (`connect(address, options)`): `timeoutMs` bounds the dial over
   * every address tried (defaults to 10,000), `reconnect` as in `ConnectOptions` (defaults to the
   * messenger's default).
   */
  readonly connect?: { readonly timeoutMs?: number; readonly reconnect?: ReconnectOption };
  /**
   * Workers resolved and dialled at once (attaches to the same worker share one); an attach past it
   * fails `ERR_DISCOVERY_UNAVAILABLE` (retryable). Defaults to 256; 1..65,536.
   */
  readonly maxPendingDials?: number;
  /** Close the client when the node closes, after deregistering. Defaults to false. */
  readonly closeClient?: boolean;
}

const DISCOVERY_METHODS = ['register', 'resolve', 'watch', 'deregister', 'close'] as const;

/** True when `v` has the methods of a {@link Discovery}. */
export function isDiscovery(v: unknown): v is Discovery {
  return (
    typeof v === 'object' &&
    v !== null &&
    DISCOVERY_METHODS.every((m) => typeof (v as Record<string, unknown>)[m] === 'function')
  );
}

/** The `discovery` option in full form: a bare client becomes `{ client }`. */
export function nodeDiscoveryOf(v: unknown): unknown {
  return isDiscovery(v) ? { client: v } : v;
}

/** A plain object of strings; `register` checks its keys and sizes (a zod record would cost browsers its code). */
const stringMap = z.custom<Record<string, string>>(
  (v) => typeof v === 'object' && v !== null && Object.values(v).every((x) => typeof x === 'string'),
  'an object of strings',
);

/** The schema of {@link NodeDiscoveryOptions}; the registration's fields are checked by `register` itself. */
export const nodeDiscoverySchema = z.strictObject({
  client: z.custom<Discovery>(isDiscovery, `not a Discovery (needs ${DISCOVERY_METHODS.join(', ')})`),
  register: z.optional(
    z.union([
      z.literal(false),
      z.strictObject({
        addresses: z.optional(stringMap),
        lanes: z.optional(int(1, 16)),
        metadata: z.optional(stringMap),
        credential: z.optional(z.string()),
      }),
    ]),
  ),
  timeoutMs: z.optional(int(1, 600_000)),
  connect: z.optional(
    z.strictObject({
      timeoutMs: z.optional(int(1, 2 ** 31 - 1)),
      reconnect: z.optional(z.unknown()),
    }),
  ),
  maxPendingDials: z.optional(int(1, 65_536)),
  closeClient: z.optional(z.boolean()),
});
