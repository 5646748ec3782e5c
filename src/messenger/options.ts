/**
 * The options of `createMessenger`: their types (the public API, with defaults) and the zod schema
 * that checks them and fills the defaults in.
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import { parseOptions } from '../validate.ts';
import { int, str } from '../validate.ts';
import {
  DEFAULT_MAX_MESSAGE_SIZE,
  MAX_LANES,
  MAX_MAX_MESSAGE_SIZE,
  MIN_MAX_MESSAGE_SIZE,
  PROTOCOL_VERSION,
  type TransportAdapter,
} from '../transport/port.ts';
import { MAX_CREDENTIAL_LENGTH, type Authenticate, type CredentialSource } from '../transport/auth.ts';
import { RUNTIME_SHAPE, isRuntime, type Runtime } from '../runtime/runtime.ts';
import type { PeerInfo } from './types.ts';

/** Health-check settings (docs/protocol.md §6). */
export interface HealthCheckOptions {
  /** Ping each peer this often. Defaults to 5,000 ms (docs/protocol.md §6). */
  readonly intervalMs?: number;
  /** A ping unanswered after this reports the peer gone (`ERR_HEALTH_CHECK_FAILED`). Defaults to 5,000 ms. */
  readonly timeoutMs?: number;
  /** Only check peers for which this returns true (the mux: peers with live work). Defaults to all peers. */
  readonly filter?: (peer: PeerInfo) => boolean;
}

/** Options of {@link createMessenger}. Every limit is finite by default. */
export interface MessengerOptions {
  /** The transports to listen and dial with (at least one). */
  readonly transports: readonly TransportAdapter[];
  /** This node's 64-bit worker id. Defaults to a random one. */
  readonly workerId?: bigint;
  /** This process instance's id. Defaults to 16 random hex digits. */
  readonly instanceId?: string;
  /** Streaming transport keys advertised in the hello (e.g. `messenger-mux-v2`). Defaults to none. */
  readonly transportKeys?: readonly string[];
  /** Lanes offered to peers, 1..16; a link uses min(ours, theirs). Defaults to 1. */
  readonly lanes?: number;
  /** Largest message (envelope included) this node accepts, 256 B..256 MiB. Defaults to 1 MiB. */
  readonly maxMessageSize?: number;
  /** Default timeout of `request`. Defaults to 10,000 ms. */
  readonly requestTimeoutMs?: number;
  /** Default timeout of `connect`. Defaults to 10,000 ms. */
  readonly connectTimeoutMs?: number;
  /** Time allowed for the hello exchange of one link. Defaults to 10,000 ms. */
  readonly helloTimeoutMs?: number;
  /** Health check (`false` disables it). Defaults to every 5 s, 5 s timeout, all peers. */
  readonly healthCheck?: false | HealthCheckOptions;
  /** Most peers (links) at once; more are refused with `ERR_TOO_MANY_PEERS`. Defaults to 1,024. */
  readonly maxPeers?: number;
  /** Most inbound connections in their hello at once. Defaults to 256. */
  readonly maxHandshakes?: number;
  /** Most outstanding `request` calls of this messenger. Defaults to 65,536. */
  readonly maxPendingRequests?: number;
  /** Most request handlers running at once per peer; more are answered `ERR_BUSY`. Defaults to 4,096. */
  readonly maxInflightRequests?: number;
  /**
   * Let reconnecting transports (the WebSocket and WebTransport clients) re-establish a link after
   * it dies, unless a `connect` says otherwise. TCP and memory dials re-dial only when their
   * `connect` asks (`reconnect: true`). Defaults to true.
   */
  readonly reconnect?: boolean;
  /**
   * A peer whose link was lost while nothing re-dials it (it dialled this node, or its dial does
   * not reconnect) stays `down` this long, waiting for it to come back, before it is reported
   * `gone` (see `onPeerState`). 1..86,400,000 ms. Defaults to 30,000 ms.
   */
  readonly downTimeoutMs?: number;
  /** Messenger protocol version to speak. Defaults to the build's version; other values exist for tests. */
  readonly protocolVersion?: number;
  /**
   * Authenticates inbound links of transports that have no `authenticate` of their own (see
   * `Authenticate`). Defaults to none: peers are not authenticated (docs/security.md).
   */
  readonly authenticate?: Authenticate;
  /** Credential presented in the HELLO by dials of transports that have no `credential` of their own. */
  readonly credential?: CredentialSource;
  /**
   * A link that carried nothing but health checks for this long is closed (`ERR_IDLE`, retryable);
   * at `maxPeers`, the link idle longest (at least one whole health-check interval) is closed to
   * admit a new peer (`ERR_EVICTED`). 0 disables the idle bound (eviction stays). Defaults to 600,000 ms.
   */
  readonly idleTimeoutMs?: number;
  /**
   * A link with live work the messenger cannot see (streams of the mux) is never idle-closed or
   * evicted: this says which. Requests, handlers and pings in flight count as work anyway.
   * Defaults to none.
   */
  readonly isBusy?: (peer: PeerInfo) => boolean;
  /**
   * Receive window advertised to every peer in the HELLO: the most bytes of mux data this node
   * holds for one peer before it releases some (the node sets it to `mux.peerByteBudget`). Defaults
   * to none advertised.
   */
  readonly receiveWindow?: number;
  /**
   * Clock, timers and randomness of the messenger, its transport and its adapters' connections (a
   * test passes a manual clock). Defaults to the current runtime's clock and timers.
   */
  readonly runtime?: Runtime;
}

const healthSchema = z.object({
  intervalMs: z._default(int(1, 3_600_000), 5_000),
  timeoutMs: z._default(int(1, 3_600_000), 5_000),
  filter: z.optional(z.custom<(peer: PeerInfo) => boolean>((v) => typeof v === 'function', 'not a function')),
});

const optionsSchema = z.object({
  transports: z
    .array(
      z.custom<TransportAdapter>(
        (v) => typeof v === 'object' && v !== null && 'dial' in v && 'listen' in v,
        'not a TransportAdapter',
      ),
    )
    .check(z.minLength(1)),
  workerId: z.optional(z.bigint().check(z.gte(0n), z.lte(0xffff_ffff_ffff_ffffn))),
  instanceId: z.optional(str(64, 1)),
  transportKeys: z._default(z.array(str(128, 1)).check(z.maxLength(64)), []),
  lanes: z._default(int(1, MAX_LANES), 1),
  maxMessageSize: z._default(int(MIN_MAX_MESSAGE_SIZE, MAX_MAX_MESSAGE_SIZE), DEFAULT_MAX_MESSAGE_SIZE),
  requestTimeoutMs: z._default(int(1, 3_600_000), 10_000),
  connectTimeoutMs: z._default(int(1, 3_600_000), 10_000),
  helloTimeoutMs: z._default(int(1, 600_000), 10_000),
  healthCheck: z._default(z.union([z.literal(false), healthSchema]), { intervalMs: 5_000, timeoutMs: 5_000 }),
  maxPeers: z._default(int(1, 1_000_000), 1_024),
  maxHandshakes: z._default(int(1, 1_000_000), 256),
  maxPendingRequests: z._default(int(1, 1 << 30), 65_536),
  maxInflightRequests: z._default(int(1, 1 << 30), 4_096),
  reconnect: z._default(z.boolean(), true),
  downTimeoutMs: z._default(int(1, 86_400_000), 30_000),
  protocolVersion: z._default(int(0, 0xffff), PROTOCOL_VERSION),
  receiveWindow: z.optional(int(1, 2 ** 42)),
  authenticate: z.optional(z.custom<Authenticate>((v) => typeof v === 'function', 'not a function')),
  credential: z.optional(
    z.custom<CredentialSource>(
      (v) => typeof v === 'function' || (typeof v === 'string' && v.length <= MAX_CREDENTIAL_LENGTH),
      `not a function or a string of at most ${MAX_CREDENTIAL_LENGTH} characters`,
    ),
  ),
  idleTimeoutMs: z._default(int(0, 86_400_000), 600_000),
  isBusy: z.optional(z.custom<(peer: PeerInfo) => boolean>((v) => typeof v === 'function', 'not a function')),
  runtime: z.optional(z.custom<Runtime>(isRuntime, RUNTIME_SHAPE)),
});

/** The options with every default filled in. */
export type ResolvedOptions = z.output<typeof optionsSchema>;

/** Check `options` and fill the defaults; throws a `ConfigError` (`ERR_INVALID_CONFIG`) naming every bad option. */
export function resolveOptions(options: MessengerOptions): ResolvedOptions {
  return parseOptions(optionsSchema, options, 'createMessenger');
}

/** Health-check interval, also the idle tick, ms: 5 s when health checks are off. */
export function tickMs(o: ResolvedOptions): number {
  return o.healthCheck === false ? 5_000 : o.healthCheck.intervalMs;
}
