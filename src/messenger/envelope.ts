/**
 * The messenger envelope: the bytes lanemux puts around a `_stream_batch` payload and around control
 * messages, inside one transport message. Specified in docs/protocol.md §4.
 *
 * The batch path is hot (one per mux batch): its envelope is one constant byte, the payload is
 * copied once into the outgoing frame by the transport, and the handler name is implied by the
 * connection's lane. Control messages (unary requests/replies, pings, notices) carry a u32
 * correlation id and, where they have a body, MessagePack.
 *
 * @packageDocumentation
 */
import { isMap, isText } from '../wire/checks.ts';
import { MAX_LANES } from '../wire/constants.ts';
import { decodeBounded, encodeShared } from '../wire/msgpack.ts';

/** Message kinds (first byte). 0x00 and 0x0A–0xEF are invalid; 0xF0–0xFF belong to the transport. */
export const Kind = {
  /** `[0x01][payload]`: a `_stream_batch[.lane]` payload for the connection's lane. */
  Batch: 0x01,
  /** `[0x02][u8 n][n bytes UTF-8 name][payload]`: fire-and-forget to a named handler. */
  Message: 0x02,
  /** `[0x03][u32 id][u8 n][name][MessagePack body]`: unary request. */
  Request: 0x03,
  /** `[0x04][u32 id][MessagePack body]`: unary success reply. */
  Response: 0x04,
  /** `[0x05][u32 id][MessagePack {code, message, retryable}]`: unary error reply. */
  ErrorResponse: 0x05,
  /** `[0x06][u32 id]`: the caller gave up on request `id` (timeout or abort). */
  Cancel: 0x06,
  /** `[0x07][u32 id]`: health-check ping. */
  Ping: 0x07,
  /** `[0x08][u32 id]`: answer to a ping. */
  Pong: 0x08,
  /** `[0x09][MessagePack {code, message, handler?}]`: error about a fire-and-forget message. */
  Notice: 0x09,
} as const;

/** Bytes the batch envelope adds to a `_stream_batch` payload. */
export const BATCH_ENVELOPE_BYTES = 1;

/** Longest handler name in bytes of UTF-8. */
export const MAX_HANDLER_NAME_BYTES = 255;

/** The 16 reserved batch handler names, index = lane (docs/protocol.md §4.1). */
export const BATCH_HANDLER_NAMES: readonly string[] = Array.from({ length: MAX_LANES }, (_, k) =>
  k === 0 ? '_stream_batch' : `_stream_batch.${k}`,
);

const RESERVED = new Set(BATCH_HANDLER_NAMES);

/** True for `_stream_batch` and `_stream_batch.1` … `_stream_batch.15`. */
export function isReservedName(name: string): boolean {
  return RESERVED.has(name);
}

/** The one-byte batch head, shared: the transport copies it into each frame. */
export const BATCH_HEAD: Uint8Array = Uint8Array.of(Kind.Batch);

const utf8 = new TextEncoder();
// `ignoreBOM`: a name that starts with U+FEFF is read as sent.
const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** UTF-8 bytes of a handler name, or undefined if empty or longer than 255 bytes. */
export function encodeName(name: string): Uint8Array | undefined {
  if (name.length === 0 || name.length > MAX_HANDLER_NAME_BYTES) return undefined;
  const bytes = utf8.encode(name);
  return bytes.byteLength > MAX_HANDLER_NAME_BYTES ? undefined : bytes;
}

/** Decode a handler name; undefined if not valid UTF-8. ASCII (the usual case) skips TextDecoder. */
export function decodeName(bytes: Uint8Array, start: number, end: number): string | undefined {
  let ascii = true;
  for (let i = start; i < end; i++) {
    if ((bytes[i] as number) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return String.fromCharCode.apply(null, bytes.subarray(start, end) as unknown as number[]);
  try {
    return utf8Decoder.decode(bytes.subarray(start, end));
  } catch {
    return undefined;
  }
}

/** `[0x02][n][name]`: the head of a fire-and-forget message. */
export function messageHead(nameBytes: Uint8Array): Uint8Array {
  const head = new Uint8Array(2 + nameBytes.byteLength);
  head[0] = Kind.Message;
  head[1] = nameBytes.byteLength;
  head.set(nameBytes, 2);
  return head;
}

/** `[0x03][u32 id][n][name]`: the head of a request (the MessagePack body follows). */
export function requestHead(id: number, nameBytes: Uint8Array): Uint8Array {
  const head = new Uint8Array(6 + nameBytes.byteLength);
  head[0] = Kind.Request;
  writeU32(head, 1, id);
  head[5] = nameBytes.byteLength;
  head.set(nameBytes, 6);
  return head;
}

/** `[kind][u32 id]`: reply, cancel, ping and pong heads. */
export function idHead(kind: number, id: number): Uint8Array {
  const head = new Uint8Array(5);
  head[0] = kind;
  writeU32(head, 1, id);
  return head;
}

export function writeU32(out: Uint8Array, off: number, v: number): void {
  out[off] = v >>> 24;
  out[off + 1] = (v >>> 16) & 0xff;
  out[off + 2] = (v >>> 8) & 0xff;
  out[off + 3] = v & 0xff;
}

export { readU32 } from '../wire/msgpack.ts';

/** Body of an error reply and of a notice (docs/protocol.md §4). */
export interface ErrorBody {
  readonly code: string;
  readonly message: string;
  readonly retryable?: boolean | undefined;
  readonly handler?: string | undefined;
}

/**
 * An error body checked field by field: `code` 1..64 characters, `message` ≤ 4,096, optional
 * `retryable` (boolean) and `handler` (≤ 255 characters); unknown keys are ignored. Undefined when
 * it breaks a rule.
 */
export function readErrorBody(v: unknown): ErrorBody | undefined {
  if (!isMap(v)) return undefined;
  const { code, message, retryable, handler } = v;
  if (!isText(code, 64, 1) || !isText(message, 4096)) return undefined;
  if (retryable !== undefined && typeof retryable !== 'boolean') return undefined;
  if (handler !== undefined && !isText(handler, MAX_HANDLER_NAME_BYTES)) return undefined;
  const body: { code: string; message: string; retryable?: boolean; handler?: string } = { code, message };
  if (retryable !== undefined) body.retryable = retryable;
  if (handler !== undefined) body.handler = handler;
  return body;
}

/** MessagePack of an error body (shared buffer: send it at once). */
export function encodeErrorBody(body: ErrorBody): Uint8Array {
  return encodeShared(body);
}

/** An error body from a peer (ERROR_RESPONSE, NOTICE), or undefined if it is not valid MessagePack or not a valid body. */
export function decodeErrorBody(bytes: Uint8Array): ErrorBody | undefined {
  try {
    return readErrorBody(decodeBounded(bytes));
  } catch {
    return undefined;
  }
}
