/**
 * The stored form of a registration: one UTF-8 JSON object per worker, the same for every adapter.
 *
 * ```json
 * {"v":1,"workerId":"00000000000000a1","addresses":{"tcp":"tcp://10.0.0.5:7000"},"lanes":4,
 *  "metadata":{"zone":"eu-1"},"credential":"fleet-token"}
 * ```
 *
 * Reads are validated field by field and bounded in size before parsing: what another writer put in
 * the store is input from outside. Unknown fields are ignored (a newer writer may add some); `v`
 * other than 1 is refused.
 */
import * as z from '../schema.ts';
import { ConfigError } from '../errors.ts';
import { configError, int, parse, str } from '../validate.ts';
import { MAX_LANES } from '../wire/constants.ts';
import { utf8Length } from '../wire/utf8.ts';
import type { Registration, RegistrationInput } from './discovery.ts';
import { DiscoveryError } from './errors.ts';
import { isWorkerHex, workerHex, workerIdOf } from './worker-id.ts';

/** The record format version this code writes and reads. */
export const RECORD_VERSION = 1;
/** Most addresses of one registration. */
export const MAX_ADDRESSES = 16;
/** Longest address URL, characters. */
export const MAX_ADDRESS_LENGTH = 1024;
/** Most metadata entries of one registration. */
export const MAX_METADATA_ENTRIES = 32;
/** Longest metadata key, characters. */
export const MAX_METADATA_KEY_LENGTH = 64;
/** Longest metadata value, characters. */
export const MAX_METADATA_VALUE_LENGTH = 256;
/** Longest credential reference name, characters. */
export const MAX_CREDENTIAL_NAME_LENGTH = 128;

// Keys become own properties of frozen objects (so `constructor` is harmless); `__proto__`, which
// the record parser would drop without a word, is refused before parsing (see noProtoKeys).
const addressKey = z.string().check(z.regex(/^[a-z][a-z0-9+.-]{0,31}$/, 'a transport name: [a-z][a-z0-9+.-]{0,31}'));
const addressValue = str(MAX_ADDRESS_LENGTH).check(z.regex(/^[a-z][a-z0-9+.-]*:\/\/\S+$/i, 'a URL: scheme://…'));
const metadataKey = z
  .string()
  .check(
    z.regex(
      /^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$/,
      'at most 64 characters of [A-Za-z0-9._/-], not starting with one of ._/-',
    ),
  );
const credentialName = z
  .string()
  .check(
    z.regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/, 'a reference name: at most 128 characters of [A-Za-z0-9._:/-]'),
  );

const entries = (min: number, max: number) =>
  z.refine((o: unknown) => {
    const n = Object.keys(o as object).length;
    return n >= min && n <= max;
  }, `${min} to ${max} entries`);

const addresses = z.record(addressKey, addressValue).check(entries(1, MAX_ADDRESSES));
const metadata = z.record(metadataKey, str(MAX_METADATA_VALUE_LENGTH)).check(entries(0, MAX_METADATA_ENTRIES));

const recordSchema = z.object({
  v: z.literal(RECORD_VERSION),
  workerId: z.string().check(z.regex(/^[0-9a-f]{16}$/, '16 lower-case hex digits')),
  addresses,
  lanes: int(1, MAX_LANES),
  metadata: z.optional(metadata),
  credential: z.optional(credentialName),
});

const inputSchema = z.object({
  workerId: z.custom<bigint | string>(
    (v) => typeof v === 'bigint' || typeof v === 'string',
    'a bigint or 16 hex digits',
  ),
  addresses,
  lanes: z.optional(int(1, MAX_LANES)),
  metadata: z.optional(metadata),
  credential: z.optional(credentialName),
});

/** A registration and its stored text. */
export interface EncodedRegistration {
  readonly registration: Registration;
  readonly hex: string;
  readonly text: string;
}

/** Validate `input` and encode it; a `ConfigError` names every bad field, or says the record is over `maxBytes`. */
export function encodeRegistration(input: RegistrationInput, maxBytes: number): EncodedRegistration {
  for (const field of ['addresses', 'metadata'] as const) {
    const o = (input as unknown as Record<string, unknown> | null)?.[field];
    if (typeof o === 'object' && o !== null && Object.hasOwn(o, '__proto__'))
      throw new ConfigError(field, 'the key __proto__ is not allowed', { where: 'register' });
  }
  const r = parse(inputSchema, input);
  if (!r.success) throw configError(r.error, { where: 'register' });
  const hex = workerHex(r.data.workerId);
  const registration = freeze(hex, r.data.addresses, r.data.lanes ?? 1, r.data.metadata ?? {}, r.data.credential);
  const text = JSON.stringify({
    v: RECORD_VERSION,
    workerId: hex,
    addresses: registration.addresses,
    lanes: registration.lanes,
    metadata: registration.metadata,
    ...(registration.credential === undefined ? {} : { credential: registration.credential }),
  });
  const bytes = utf8Length(text);
  if (bytes > maxBytes)
    throw new ConfigError('registration', `the record is ${bytes} bytes, over maxRecordBytes (${maxBytes})`, {
      where: 'register',
    });
  return { registration, hex, text };
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Decode and validate a stored record. `expectedHex` is the worker its key names (undefined when the
 * key names none, which makes any record invalid). Throws `ERR_DISCOVERY_INVALID_RECORD` naming `key`.
 */
export function decodeRegistration(
  value: Uint8Array | string,
  key: string,
  expectedHex: string | undefined,
  maxBytes: number,
): Registration {
  const bad = (why: string, cause?: unknown): DiscoveryError =>
    new DiscoveryError('ERR_DISCOVERY_INVALID_RECORD', `invalid registration record at ${key}: ${why}`, { cause });
  if (expectedHex === undefined || !isWorkerHex(expectedHex)) throw bad('the key names no worker id');
  // A string has at least one byte per character: refuse a long one before measuring it.
  const size = typeof value === 'string' ? (value.length > maxBytes ? maxBytes + 1 : utf8Length(value)) : value.length;
  if (size > maxBytes) throw bad(`over maxRecordBytes (${maxBytes})`);
  let text: string;
  try {
    text = typeof value === 'string' ? value : decoder.decode(value);
  } catch (e) {
    throw bad('not UTF-8 JSON', e);
  }
  let json: unknown;
  try {
    json = JSON.parse(text, noProtoKeys);
  } catch (e) {
    throw e === PROTO_KEY ? bad('it has a key __proto__') : bad('not UTF-8 JSON', e);
  }
  const r = parse(recordSchema, json);
  if (!r.success) throw bad(configError(r.error).message.replace(/^invalid config /, ''), r.error);
  const d = r.data;
  if (d.workerId !== expectedHex) throw bad(`it names worker ${d.workerId}, not the key's ${expectedHex}`);
  return freeze(d.workerId, d.addresses, d.lanes, d.metadata ?? {}, d.credential);
}

const PROTO_KEY = new Error('the key __proto__');

/** A `JSON.parse` reviver refusing the key `__proto__` anywhere (the schema would drop it silently). */
function noProtoKeys(key: string, value: unknown): unknown {
  if (key === '__proto__') throw PROTO_KEY;
  return value;
}

function freeze(
  hex: string,
  addresses: Record<string, string>,
  lanes: number,
  metadata: Record<string, string>,
  credential: string | undefined,
): Registration {
  return Object.freeze({
    workerId: workerIdOf(hex),
    addresses: Object.freeze({ ...addresses }),
    lanes,
    metadata: Object.freeze({ ...metadata }),
    ...(credential === undefined ? {} : { credential }),
  });
}
