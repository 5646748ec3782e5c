/**
 * Validation of {@link NodeOptions} for `createNode`: the fields a client takes (client-options.ts)
 * and a node's own (authenticate, perStream, discovery) in one zod/mini schema, and the mux config
 * resolved with it, so a bad value anywhere is one {@link ConfigError} (`ERR_INVALID_CONFIG`) naming
 * every bad field (`lanes`, `unattachedTimeout`, `mux.initialCredit`, …).
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import { ConfigError } from '../errors.ts';
import type { ResolvedMuxConfig } from '../mux/config.ts';
import type { NodeOptions } from './node.ts';
import { CLIENT_FIELDS as F, checkOptionsExplained, withMethods } from './client-options.ts';
import { nodeDiscoveryOf, nodeDiscoverySchema } from './discovery-options.ts';
import { resolveReconnect } from '../transport/reconnect.ts';

const fn = (what: string) =>
  z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', `${what} must be a function`);

const perStreamMethods = withMethods('a PerStreamTransport', ['listen', 'connect', 'close']);

// The client's fields with a node's own, in the order the reasons of an error list them.
const schema = z.strictObject({
  messenger: F.messenger,
  transports: F.transports,
  lanes: F.lanes,
  maxMessageSize: F.maxMessageSize,
  workerId: F.workerId,
  authenticate: z.optional(fn('authenticate')),
  credential: F.credential,
  unattachedTimeout: F.unattachedTimeout,
  mux: F.mux,
  perStream: z.optional(
    z.custom(
      (v) => perStreamMethods.safeParse(v).success && typeof (v as { key?: unknown }).key === 'string',
      'not a PerStreamTransport (needs key, listen, connect, close)',
    ),
  ),
  metrics: F.metrics,
  runtime: F.runtime,
  logger: F.logger,
  resume: F.resume,
  discovery: z.optional(nodeDiscoverySchema),
});

/** Options that only shape a messenger the node builds itself (meaningless beside a given one). */
const BUILD_ONLY = ['transports', 'lanes', 'maxMessageSize', 'workerId', 'authenticate', 'credential'] as const;

/**
 * Validate every createNode option and resolve the mux config, honouring the kill switch
 * `LANEMUX_MUX_DISABLE` (or `VELO_MESSENGER_MUX_DISABLE`) read through the node's runtime. Rejects
 * with one {@link ConfigError} naming every bad field (zod's messages, loaded only on a refusal).
 */
export function validateNodeOptions(options: NodeOptions): Promise<ResolvedMuxConfig> {
  let discovery: unknown;
  return checkOptionsExplained(options, {
    where: 'createNode',
    schema,
    buildOnly: BUILD_ONLY,
    input: (o) => {
      discovery = nodeDiscoveryOf((o as { discovery?: unknown }).discovery);
      return discovery === undefined ? o : { ...o, discovery };
    },
    more: (add) => {
      const reconnect = (discovery as { connect?: { reconnect?: unknown } } | undefined)?.connect?.reconnect;
      try {
        resolveReconnect(reconnect);
      } catch (e) {
        if (!(e instanceof ConfigError)) throw e;
        add('discovery.connect.reconnect', e.message);
      }
    },
  });
}
