/**
 * The transport's own two message kinds: HELLO (identity exchange, first message of every lane
 * connection in each direction) and GOAWAY (why a connection is being closed). Every other first
 * byte belongs to the messenger. Byte layouts: docs/protocol.md §3.
 *
 * @packageDocumentation
 */
import * as z from '../schema.ts';
import type { LanemuxError } from '../errors.ts';
import { LanemuxError as LanemuxErrorClass } from '../errors.ts';
import { MAX_LANES, MAX_MAX_MESSAGE_SIZE, MIN_MAX_MESSAGE_SIZE } from './port.ts';
import { TransportError } from './errors.ts';
import { decodeBounded, encodeShared } from '../wire/msgpack.ts';
import { MAX_CREDENTIAL_LENGTH } from './auth.ts';
import { int, parse, str } from '../validate.ts';

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

/** The MessagePack map after the HELLO prefix. Unknown keys are ignored (forward compatible). */
const helloSchema = z.object({
  /** Worker id, 16 lower-case hex digits. */
  worker: z.string().check(z.regex(hex16)),
  /** Instance id of the sender's process. */
  instance: str(64, 1),
  /**
   * Dialler-chosen session number grouping the lanes of one link attempt, 0..2^53-1. Values above
   * 2^32-1 may arrive as MessagePack uint64 (decoded as bigint) or as an integral float64 (how
   * `@msgpack/msgpack` encodes them with `useBigInt64`); both are accepted.
   */
  session: z.union([
    int(0, Number.MAX_SAFE_INTEGER),
    z.pipe(
      z.bigint().check(z.gte(0n), z.lte(BigInt(Number.MAX_SAFE_INTEGER))),
      z.transform((v) => Number(v)),
    ),
  ]),
  /** Lane of this connection. */
  lane: int(0, MAX_LANES - 1),
  /** Dialler: lanes it offers (lane 0) or the agreed count (lanes ≥ 1). Acceptor: the agreed count. */
  lanes: int(1, MAX_LANES),
  /** Largest message the sender accepts. */
  maxMessageSize: int(MIN_MAX_MESSAGE_SIZE, 0xffffffff),
  /** Streaming transport keys the sender supports. */
  keys: z.array(str(128)).check(z.maxLength(64)),
  /** Address the sender listens on, if any. */
  address: z.optional(str(512)),
  /** The sender's receive window for mux data, in bytes (docs/protocol.md §3.3). */
  window: z.optional(int(1, 0xffffffff)),
  /** Dialler, lane 0: the credential for the acceptor's `authenticate`. */
  credential: z.optional(str(MAX_CREDENTIAL_LENGTH)),
  /**
   * Acceptor, lane-0 answer: the claim token it issued to this dialler (32 hex digits). Dialler:
   * empty on a first lane 0, the token on lanes 1.. and on a reconnect that supersedes its old link.
   */
  claim: z.optional(z.string().check(z.regex(claimRe))),
});

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
  const parsed = parse(helloSchema, raw);
  if (!parsed.success) {
    return new TransportError('ERR_MALFORMED_ENVELOPE', `invalid HELLO: ${z.prettifyError(parsed.error)}`);
  }
  const h = parsed.data;
  return {
    protocolVersion: version,
    worker: h.worker,
    instance: h.instance,
    session: h.session,
    lane: h.lane,
    lanes: h.lanes,
    maxMessageSize: h.maxMessageSize,
    keys: h.keys,
    address: h.address,
    window: h.window,
    credential: h.credential,
    claim: h.claim,
  };
}

const goawaySchema = z.object({
  code: str(64, 1),
  message: str(1024),
});

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
    const parsed = parse(goawaySchema, decodeBounded(bytes.subarray(1)));
    if (parsed.success) {
      const { code, message } = parsed.data;
      return new LanemuxErrorClass(code, `peer closed the connection: ${message}`, {
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
