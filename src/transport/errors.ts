/**
 * Errors of the transport layer (adapters, hello exchange, admission).
 *
 * Every error is a {@link LanemuxError}; `code` is the contract, the message is prose. Codes that
 * travel on the wire (in a GOAWAY frame or an error reply) keep their meaning on the far side.
 *
 * @packageDocumentation
 */
import { ConfigError, LanemuxError } from '../errors.ts';
import type { LanemuxErrorOptions } from '../errors.ts';

/** Stable codes of transport errors. */
export type TransportErrorCode =
  /** A message is larger than the peer accepts (sender side), or a frame header announced more than we accept. */
  | 'ERR_FRAME_TOO_LARGE'
  /** The transport refused a send: the connection is not writable or its bounded pending queue is full. */
  | 'ERR_SEND_REFUSED'
  /** The peer's connection is gone (retryable: a new connection may succeed). */
  | 'ERR_PEER_GONE'
  /** Bytes from the peer that do not form a valid envelope or hello. */
  | 'ERR_MALFORMED_ENVELOPE'
  /** The peer speaks another messenger protocol version. */
  | 'ERR_VERSION_MISMATCH'
  /** The hello exchange failed (timeout, self-connection, inconsistent lanes, duplicate lane). */
  | 'ERR_HANDSHAKE'
  /** Dialling failed (refused, unreachable, aborted before the hello completed). */
  | 'ERR_CONNECT'
  /** The transport or messenger is closed. */
  | 'ERR_CLOSED'
  /** The caller's AbortSignal fired. */
  | 'ERR_ABORTED'
  /** No connected peer has this id. */
  | 'ERR_UNKNOWN_PEER'
  /** A lane outside 0..lanes(peer)-1. */
  | 'ERR_BAD_LANE'
  /** No installed transport can dial or listen on this address. */
  | 'ERR_UNSUPPORTED_ADDRESS'
  /** The node holds `maxPeers` peers and none is idle, or `maxHandshakes` authentications are in flight. */
  | 'ERR_TOO_MANY_PEERS'
  /**
   * A listener's address is taken: the port (or memory name) is already listening. Retryable: it
   * may be free later. The message names `host:port`. (Invalid options are a `ConfigError`,
   * `ERR_INVALID_CONFIG`, not a transport error.)
   */
  | 'ERR_ADDRESS_IN_USE'
  /** A protocol rule broken by the peer that has no more specific code. */
  | 'ERR_PROTOCOL'
  /**
   * Two nodes dialled each other at once: of the two links, the one dialled by the lower worker id is
   * kept and the other is closed with this code (docs/protocol.md §3.5). The dial that made it does not retry.
   */
  | 'ERR_DUPLICATE_LINK'
  /** The acceptor's `authenticate` refused this peer (not retryable: the same credential is refused again). */
  | 'ERR_UNAUTHENTICATED'
  /**
   * A HELLO claimed the worker id of a live link without proving it is that peer (another identity, or
   * no claim token of the live link). Retryable: once the live link is found dead, a retry succeeds.
   */
  | 'ERR_WORKER_ID_IN_USE'
  /** A frame did not complete within its deadline, or the node's memory for incomplete frames is full. */
  | 'ERR_FRAME_DEADLINE'
  /** The connection was closed to make room: the oldest connection still in its hello, or an idle link. */
  | 'ERR_EVICTED'
  /** The link carried nothing but health checks for longer than the idle bound. */
  | 'ERR_IDLE';

/** An error raised or reported by the transport layer. */
export class TransportError extends LanemuxError<TransportErrorCode> {
  constructor(code: TransportErrorCode, message: string, options: LanemuxErrorOptions = {}) {
    super(code, message, options);
  }
}

/** Codes a peer may send us in a GOAWAY or error reply; anything else is reported as `ERR_PROTOCOL`. */
export function isTransportCode(code: string): code is TransportErrorCode {
  return TRANSPORT_CODES.has(code);
}

const TRANSPORT_CODES: ReadonlySet<string> = new Set<TransportErrorCode>([
  'ERR_FRAME_TOO_LARGE',
  'ERR_SEND_REFUSED',
  'ERR_PEER_GONE',
  'ERR_MALFORMED_ENVELOPE',
  'ERR_VERSION_MISMATCH',
  'ERR_HANDSHAKE',
  'ERR_CONNECT',
  'ERR_CLOSED',
  'ERR_ABORTED',
  'ERR_UNKNOWN_PEER',
  'ERR_BAD_LANE',
  'ERR_UNSUPPORTED_ADDRESS',
  'ERR_TOO_MANY_PEERS',
  'ERR_ADDRESS_IN_USE',
  'ERR_PROTOCOL',
  'ERR_DUPLICATE_LINK',
  'ERR_UNAUTHENTICATED',
  'ERR_WORKER_ID_IN_USE',
  'ERR_FRAME_DEADLINE',
  'ERR_EVICTED',
  'ERR_IDLE',
]);

/** Wrap anything thrown by a socket library into a TransportError with `code` (keeps LanemuxErrors). */
export function asTransportError(code: TransportErrorCode, context: string, cause: unknown): LanemuxError {
  if (cause instanceof LanemuxError) return cause;
  const detail = describeThrown(cause);
  return new TransportError(code, `${context}: ${detail}`, {
    cause,
    retryable: code === 'ERR_PEER_GONE' || code === 'ERR_CONNECT',
  });
}

/**
 * What a listener that could not listen on `host:port` reports (`where` names the adapter): a busy
 * address is `ERR_ADDRESS_IN_USE` (retryable); anything else (a host on no local interface, a
 * privileged port, a bad certificate) is a {@link ConfigError} naming host and port. Never the raw
 * socket error.
 */
export function listenFailure(where: string, host: string, port: number | string, cause: unknown): LanemuxError {
  const at = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  if (isAddressInUse(cause)) {
    return new TransportError('ERR_ADDRESS_IN_USE', `${where} cannot listen on ${at}: the address is already in use`, {
      cause,
      retryable: true,
    });
  }
  if (cause instanceof LanemuxError) return cause;
  return new ConfigError('port', `cannot listen on ${at}: ${describeThrown(cause)}`, {
    fields: ['host', 'port'],
    where,
    cause,
  });
}

/**
 * True for "address in use" from any runtime: Node and Bun set `code: 'EADDRINUSE'`, Deno throws
 * `Deno.errors.AddrInUse` (name `AddrInUse`); Bun.serve may only say so in its message.
 */
function isAddressInUse(e: unknown): boolean {
  try {
    if (typeof e !== 'object' || e === null) return false;
    const { code, name } = e as { code?: unknown; name?: unknown };
    if (code === 'EADDRINUSE' || name === 'AddrInUse') return true;
    return /EADDRINUSE|address already in use|addr(?:ess)? ?in ?use|port \d+ in use/i.test(describeThrown(e));
  } catch {
    return false;
  }
}

/**
 * A printable description of any thrown value, never throwing itself: `String(v)` throws for
 * `Object.create(null)`, symbols-as-objects and hostile proxies, and an Error's `message` may be a
 * throwing getter. Falls back to `Object.prototype.toString` (e.g. `[object Object]`).
 */
export function describeThrown(value: unknown): string {
  try {
    if (value instanceof Error) return String(value.message);
    return String(value);
  } catch {
    try {
      return Object.prototype.toString.call(value);
    } catch {
      return '[unprintable value]';
    }
  }
}

/** `value` if it is an Error, else an Error describing it (with `value` as its cause). Never throws. */
export function toError(value: unknown): Error {
  try {
    if (value instanceof Error) return value;
  } catch {
    // A proxy whose prototype trap throws: describe it below.
  }
  return new Error(describeThrown(value), { cause: value });
}
