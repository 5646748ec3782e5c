/**
 * The transport's own two message kinds: HELLO (identity exchange, first message of every lane
 * connection in each direction) and GOAWAY (why a connection is being closed). Every other first
 * byte belongs to the messenger. Byte layouts: docs/protocol.md §3.
 *
 * @packageDocumentation
 */
import type { LanemuxError } from '../errors.ts';
import { LanemuxError as LanemuxErrorClass } from '../errors.ts';
import { TransportError } from './errors.ts';
import { isInt, isMap, isText } from '../wire/checks.ts';
import { MAX_CREDENTIAL_LENGTH, MAX_LANES, MAX_MAX_MESSAGE_SIZE, MIN_MAX_MESSAGE_SIZE } from '../wire/constants.ts';
import { decodeBounded, encodeShared } from '../wire/msgpack.ts';

/** First byte of a HELLO message. */
export const KIND_HELLO = 0xf0;
/** First byte of a GOAWAY message. */
export const KIND_GOAWAY = 0xf1;
/** First bytes at or above this value are transport-level; below it they are the messenger's. */
export const TRANSPORT_KIND_MIN = 0xf0;

/** Magic after the HELLO kind byte: ASCII `LMX`, so a non-lanemux peer is told apart from a bad version. */
const MAGIC = [0x4c, 0x4d, 0x58] as const;
/** Fixed HELLO prefix: kind, magic (3), u16 protocol version. */
export const HELLO_PREFIX_BYTES = 6;

const hex16 = /^[0-9a-f]{16}$/;
/** A claim token: 32 lower-case hex digits (128 random bits), or empty (none yet). */
const claimRe = /^(?:[0-9a-f]{32})?$/;
const MAX_SESSION = Number.MAX_SAFE_INTEGER;

/**
 * The MessagePack map after the HELLO prefix, checked field by field (unknown keys are ignored:
 * forward compatible). Returns the fields, or the name of the first field that breaks its rule:
 * - `worker`: 16 lower-case hex digits; `instance`: 1..64 characters;
 * - `session`: 0..2^53−1, the dialler's number grouping the lanes of one link attempt. Above 2^32−1 it
 *   may arrive as a MessagePack uint64 (decoded as a bigint) or an integral float64; both are taken;
 * - `lane`: 0..15; `lanes`: 1..16 (dialler: offered on lane 0, the agreed count on lanes ≥ 1);
 * - `maxMessageSize`: 256..2^32−1; `keys`: at most 64 strings of at most 128 characters;
 * - optional: `address` (≤ 512 characters), `window` (1..2^32−1, docs/protocol.md §3.8), `credential`
 *   (≤ 8,192 characters, the dialler's lane 0), `claim` (32 lower-case hex digits or empty, §3.6).
 */
export function readHello(raw: unknown): Omit<Hello, 'protocolVersion'> | string {
  if (!isMap(raw)) return 'the body is not a map';
  const { worker, instance, lane, lanes, maxMessageSize, keys, address, window, credential, claim } = raw;
  let session = raw['session'];
  if (typeof session === 'bigint' && session >= 0n && session <= BigInt(MAX_SESSION)) session = Number(session);
  if (typeof worker !== 'string' || !hex16.test(worker)) return 'worker';
  if (!isText(instance, 64, 1)) return 'instance';
  if (!isInt(session, 0, MAX_SESSION)) return 'session';
  if (!isInt(lane, 0, MAX_LANES - 1)) return 'lane';
  if (!isInt(lanes, 1, MAX_LANES)) return 'lanes';
  if (!isInt(maxMessageSize, MIN_MAX_MESSAGE_SIZE, 0xffffffff)) return 'maxMessageSize';
  if (!Array.isArray(keys) || keys.length > 64 || !keys.every((k) => isText(k, 128))) return 'keys';
  if (address !== undefined && !isText(address, 512)) return 'address';
  if (window !== undefined && !isInt(window, 1, 0xffffffff)) return 'window';
  if (credential !== undefined && !isText(credential, MAX_CREDENTIAL_LENGTH)) return 'credential';
  if (claim !== undefined && (typeof claim !== 'string' || !claimRe.test(claim))) return 'claim';
  return {
    worker,
    instance,
    session,
    lane,
    lanes,
    maxMessageSize,
    keys: keys as string[],
    address,
    window,
    credential,
    claim,
  };
}

/** A decoded HELLO. */
export interface Hello {
  readonly protocolVersion: number;
  readonly worker: string;
  readonly instance: string;
  readonly session: number;
  readonly lane: number;
  readonly lanes: number;
  readonly maxMessageSize: number;
  readonly keys: readonly string[];
  readonly address?: string | undefined;
  readonly window?: number | undefined;
  readonly credential?: string | undefined;
  readonly claim?: string | undefined;
}

/** Encode a HELLO (a fresh buffer). */
export function encodeHello(hello: Hello): Uint8Array {
  const body = encodeShared({
    worker: hello.worker,
    instance: hello.instance,
    // A MessagePack uint64 above 2^32-1 (a plain number would go out as a float64).
    session: hello.session > 0xffffffff ? BigInt(hello.session) : hello.session,
    lane: hello.lane,
    lanes: hello.lanes,
    maxMessageSize: Math.min(hello.maxMessageSize, MAX_MAX_MESSAGE_SIZE),
    keys: hello.keys,
    address: hello.address,
    window: hello.window === undefined ? undefined : Math.min(hello.window, 0xffffffff),
    credential: hello.credential,
    claim: hello.claim,
  });
  const out = new Uint8Array(HELLO_PREFIX_BYTES + body.byteLength);
  out[0] = KIND_HELLO;
  out[1] = MAGIC[0];
  out[2] = MAGIC[1];
  out[3] = MAGIC[2];
  out[4] = hello.protocolVersion >>> 8;
  out[5] = hello.protocolVersion & 0xff;
  out.set(body, HELLO_PREFIX_BYTES);
  return out;
}

/** Decode a HELLO, checking the version before anything else. */
export function decodeHello(bytes: Uint8Array, ourVersion: number): Hello | LanemuxError {
  if (
    bytes.byteLength < HELLO_PREFIX_BYTES ||
    bytes[0] !== KIND_HELLO ||
    bytes[1] !== MAGIC[0] ||
    bytes[2] !== MAGIC[1] ||
    bytes[3] !== MAGIC[2]
  ) {
    return new TransportError(
      'ERR_MALFORMED_ENVELOPE',
      `expected a lanemux HELLO as the first message, got ${describeBytes(bytes)}`,
    );
  }
  const version = ((bytes[4] as number) << 8) | (bytes[5] as number);
  if (version !== ourVersion) {
    return new TransportError(
      'ERR_VERSION_MISMATCH',
      `peer speaks lanemux messenger protocol v${version}, this node speaks v${ourVersion}`,
    );
  }
  let raw: unknown;
  try {
    raw = decodeBounded(bytes.subarray(HELLO_PREFIX_BYTES));
  } catch (cause) {
    return new TransportError(
      'ERR_MALFORMED_ENVELOPE',
      `HELLO body is not valid MessagePack: ${(cause as Error).message}`,
      { cause },
    );
  }
  const h = readHello(raw);
  if (typeof h === 'string') return new TransportError('ERR_MALFORMED_ENVELOPE', `invalid HELLO: bad ${h}`);
  return { protocolVersion: version, ...h };
}

/** Encode a GOAWAY carrying an error's code and message. */
export function encodeGoaway(error: LanemuxError): Uint8Array {
  const body = encodeShared({ code: error.code, message: truncate(error.message, 1024) });
  const out = new Uint8Array(1 + body.byteLength);
  out[0] = KIND_GOAWAY;
  out.set(body, 1);
  return out;
}

/** Decode a GOAWAY into the error the peer reported (or a malformed-envelope error). */
export function decodeGoaway(bytes: Uint8Array): LanemuxError {
  return parseGoaway(bytes) ?? new TransportError('ERR_MALFORMED_ENVELOPE', 'malformed GOAWAY from peer');
}

/** The error a GOAWAY reports, or undefined if it does not decode (tells a peer's reason from a bad frame). */
export function parseGoaway(bytes: Uint8Array): LanemuxError | undefined {
  try {
    // `{code: 1..64 characters, message: ≤ 1,024}`, unknown keys ignored.
    const g = decodeBounded(bytes.subarray(1));
    if (isMap(g) && isText(g['code'], 64, 1) && isText(g['message'], 1024)) {
      const code = g['code'];
      return new LanemuxErrorClass(code, `peer closed the connection: ${g['message']}`, {
        retryable: isRetryableRemote(code),
      });
    }
  } catch {
    // fall through
  }
  return undefined;
}

/** Whether a peer-reported reason leaves room for a reconnect to succeed. */
function isRetryableRemote(code: string): boolean {
  return (
    code !== 'ERR_VERSION_MISMATCH' &&
    code !== 'ERR_MALFORMED_ENVELOPE' &&
    code !== 'ERR_HANDSHAKE' &&
    code !== 'ERR_UNAUTHENTICATED'
  );
}

/** A short printable description of bytes for error messages (never the whole payload). */
export function describeBytes(bytes: Uint8Array): string {
  const n = Math.min(bytes.byteLength, 12);
  let s = '';
  for (let i = 0; i < n; i++) s += (i ? ' ' : '') + (bytes[i] as number).toString(16).padStart(2, '0');
  return `${bytes.byteLength} bytes [${s}${bytes.byteLength > n ? ' …' : ''}]`;
}

export function truncate(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, max - 1) + '…';
}
