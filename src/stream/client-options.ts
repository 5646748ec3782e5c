/**
 * Validation of the options a client and a node share (see `ClientOptions`): one zod/mini schema per
 * entry over every field, and the mux config resolved with it, so a bad value anywhere is one
 * {@link ConfigError} (`ERR_INVALID_CONFIG`) naming every bad field (`lanes`, `unattachedTimeout`,
 * `mux.initialCredit`, …). node-options.ts adds what only a node takes (authenticate, perStream,
 * discovery).
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import { ConfigError } from '../errors.ts';
import { MuxMetrics, type NodeLogger } from '../metrics/mux-metrics.ts';
import type { Messenger } from '../messenger/types.ts';
import { resolveMuxConfig, type ResolvedMuxConfig } from '../mux/config.ts';
import { issueFields, type Issue } from '../validate.ts';
import { int, parse } from '../validate.ts';
import {
  MAX_CREDENTIAL_LENGTH,
  MAX_LANES,
  MAX_MAX_MESSAGE_SIZE,
  MESSENGER_MUX_KEY,
  MIN_MAX_MESSAGE_SIZE,
} from '../wire/constants.ts';
import { RUNTIME_SHAPE, isRuntime, systemRuntime, type Runtime } from '../runtime/runtime.ts';
import { resumeSchema } from './resume-options.ts';

/** Longest `unattachedTimeout`, ms: one day, like the mux's accept windows (and far below the 2^31 − 1 ms a timer can wait). */
export const MAX_UNATTACHED_TIMEOUT = 86_400_000;

/** Has every method `names`: a duck check for interfaces implemented outside lanemux. */
export const withMethods = <T>(what: string, names: readonly string[]) =>
  z.custom<T>(
    (v) =>
      typeof v === 'object' &&
      v !== null &&
      names.every((n) => typeof (v as Record<string, unknown>)[n] === 'function'),
    `not ${what} (needs ${names.join(', ')})`,
  );

const runtimeSchema = z.custom<Runtime>(isRuntime, RUNTIME_SHAPE);

const MESSENGER_METHODS = [
  'on',
  'handle',
  'registerBatchHandler',
  'send',
  'sendBatch',
  'request',
  'connect',
  'peer',
  'peers',
  'onPeer',
  'onPeerGone',
  'onDialEnded',
  'close',
];

const messengerMethods = withMethods<Messenger>('a Messenger', MESSENGER_METHODS);

/** The fields of `ClientOptions`: a node's schema spreads them and adds its own. */
export const CLIENT_FIELDS = {
  messenger: z.optional(
    z.custom<Messenger>(
      (v) => {
        if (!messengerMethods.safeParse(v).success) return false;
        const self = (v as { self?: { workerId?: unknown; transportKeys?: unknown } }).self;
        return typeof self?.workerId === 'bigint' && Array.isArray(self.transportKeys);
      },
      `not a Messenger (createMessenger's result: ${MESSENGER_METHODS.join(', ')}, and self with workerId and transportKeys)`,
    ),
  ),
  transports: z.optional(z.array(withMethods('a TransportAdapter', ['listen', 'dial', 'close']))),
  lanes: z.optional(int(1, MAX_LANES)),
  maxMessageSize: z.optional(int(MIN_MAX_MESSAGE_SIZE, MAX_MAX_MESSAGE_SIZE)),
  workerId: z.optional(z.bigint().check(z.gte(0n), z.lte(0xffff_ffff_ffff_ffffn))),
  credential: z.optional(
    z.custom(
      (v) => typeof v === 'function' || (typeof v === 'string' && v.length <= MAX_CREDENTIAL_LENGTH),
      `credential must be a function or a string of at most ${MAX_CREDENTIAL_LENGTH} characters`,
    ),
  ),
  // Finite and above 0: NaN or a negative value would expire every anchor at once, Infinity never.
  unattachedTimeout: z.optional(z.number().check(z.gt(0), z.lte(MAX_UNATTACHED_TIMEOUT))),
  // Checked by resolveMuxConfig, below, with its own field names.
  mux: z.optional(z.unknown()),
  metrics: z.optional(z.custom<MuxMetrics>((v) => v instanceof MuxMetrics, 'not a MuxMetrics')),
  runtime: z.optional(runtimeSchema),
  logger: z.optional(
    z.custom<NodeLogger>(
      (v) =>
        typeof v === 'object' &&
        v !== null &&
        ['debug', 'warn'].every((k) => {
          const f = (v as Record<string, unknown>)[k];
          return f === undefined || typeof f === 'function';
        }),
      'not a logger (an object whose debug and warn, if present, are functions)',
    ),
  ),
  resume: resumeSchema,
};

/** Options of a client that only shape a messenger it builds itself (meaningless beside a given one). */
export const CLIENT_BUILD_ONLY = ['transports', 'lanes', 'maxMessageSize', 'workerId', 'credential'] as const;

const clientSchema = z.strictObject(CLIENT_FIELDS);

/** What {@link checkOptions} checks: the schema, the build-only fields, and the checks one entry adds. */
export interface OptionsCheck {
  /** The factory named in messages (`createNode`, `createClient`). */
  readonly where: string;
  readonly schema: z.ZodMiniType;
  /** The options as the schema reads them (a node normalises its `discovery`). Defaults to the options as given. */
  readonly input?: (options: object) => object;
  readonly buildOnly: readonly string[];
  /** More checks, run after the messenger's (the order of the reasons in the error). */
  readonly more?: (add: (field: string, reason: string) => void) => void;
}

/**
 * Validate every option of `check.where` and resolve the mux config (with `explained`, zod's issues
 * for what the readers refused stand in for the readers' own, see {@link checkOptionsExplained}), honouring the kill switch
 * `LANEMUX_MUX_DISABLE` (or `VELO_MESSENGER_MUX_DISABLE`) read through the given runtime. Throws
 * one {@link ConfigError} naming every bad field.
 */
export function checkOptions(options: unknown, check: OptionsCheck, explained?: readonly Issue[]): ResolvedMuxConfig {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new ConfigError('options', `${check.where} takes an options object`, { where: check.where });
  }
  const fields: string[] = [];
  const reasons: string[] = [];
  const add = (field: string, reason: string): void => {
    if (!fields.includes(field)) fields.push(field);
    reasons.push(`✖ ${reason}\n  → at ${field}`);
  };
  const parsed = parse(check.schema, check.input?.(options) ?? options);
  if (!parsed.success) {
    for (const issue of explained ?? parsed.error.issues) {
      // Every unrecognized key is a field of its own.
      const named = issueFields([issue]);
      for (const f of named) if (!fields.includes(f)) fields.push(f);
      reasons.push(`✖ ${issue.message}\n  → at ${named.join(', ')}`);
    }
  }
  const o = options as Record<string, unknown>;
  if (o['messenger'] !== undefined) {
    const ignored = check.buildOnly.filter((k) => o[k] !== undefined);
    for (const k of ignored)
      add(k, `${k} only applies when the node builds its messenger; configure the messenger you pass instead`);
  } else if (!Array.isArray(o['transports']) || o['transports'].length === 0) {
    add('transports', 'give a messenger or at least one transport');
  }
  check.more?.(add);
  const given = o['runtime'];
  const runtime = isRuntime(given) ? given : systemRuntime();
  const killSwitch = runtime.env('LANEMUX_MUX_DISABLE') ?? runtime.env('VELO_MESSENGER_MUX_DISABLE');
  let config: ResolvedMuxConfig | undefined;
  try {
    config = resolveMuxConfig(o['mux'], killSwitch);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    for (const f of e.fields) if (!fields.includes(f)) fields.push(f);
    // `invalid config mux.a: why; mux.b: why` → one entry per field, as zod lists the others.
    for (const part of e.message.replace(/^invalid config /, '').split(/; (?=mux\b)/)) {
      const colon = part.indexOf(': ');
      reasons.push(colon < 0 ? `✖ ${part}` : `✖ ${part.slice(colon + 2)}\n  → at ${part.slice(0, colon)}`);
    }
  }
  // A node with the mux on behind a messenger that does not advertise it in its HELLO: peers would
  // never open mux streams to it (docs/protocol.md §3.1).
  const messenger = parsed.success ? (parsed.data as { messenger?: Messenger }).messenger : undefined;
  if (
    config?.enabled === true &&
    messenger !== undefined &&
    !messenger.self.transportKeys.includes(MESSENGER_MUX_KEY)
  ) {
    add(
      'messenger',
      `the messenger does not advertise ${MESSENGER_MUX_KEY} in its HELLO, so peers would never open mux streams to this node: create it with transportKeys: ['${MESSENGER_MUX_KEY}'], or set mux.enabled: false`,
    );
  }
  if (fields.length > 0 || config === undefined) {
    throw new ConfigError(fields[0] ?? 'options', reasons.join('\n'), { fields, where: check.where });
  }
  return config;
}

/**
 * {@link checkOptions}, with a refusal explained by zod, the validator of record: the hand-written
 * readers answer well-formed options, and only when they refuse is `zod/mini` loaded (a dynamic
 * import, so a page's bundle carries no zod up front) to list the issues with zod's own messages. If
 * zod accepts what a reader refused, the reader is wrong and its error stands; so does it when zod
 * cannot be loaded.
 */
export async function checkOptionsExplained(options: unknown, check: OptionsCheck): Promise<ResolvedMuxConfig> {
  try {
    return checkOptions(options, check);
  } catch (e) {
    if (!(e instanceof ConfigError) || typeof options !== 'object' || options === null) throw e;
    const input = check.input?.(options) ?? options;
    if (parse(check.schema, input).success) throw e;
    const zr = await z.explain(check.schema, input).catch(() => undefined);
    if (zr === undefined || zr.success) throw e;
    return checkOptions(options, check, zr.error.issues as readonly Issue[]);
  }
}

/** Validate every createClient option and resolve the mux config, a refusal explained by zod (see {@link checkOptionsExplained}). */
export function validateClientOptions(options: unknown): Promise<ResolvedMuxConfig> {
  return checkOptionsExplained(options, { where: 'createClient', schema: clientSchema, buildOnly: CLIENT_BUILD_ONLY });
}
