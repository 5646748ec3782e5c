/**
 * The call envelope shared by `node.serve` (serve.ts) and `node.stream` (call.ts), docs/protocol.md
 * §8.6: the unary request that names a method and carries the caller's anchor handle, its zero-RTT
 * ticket and the request value; the failure record a handler's throw becomes; and `CallError`.
 */
import { LanemuxError, type LanemuxErrorOptions } from '../errors.ts';

/** The messenger handler name of a served method is this prefix + the method name. */
export const CALL_PREFIX = '_call.';
/** Longest method name in UTF-8 bytes (a handler name is at most 255). */
export const MAX_METHOD_BYTES = 255 - CALL_PREFIX.length;
/** Envelope version of the request and of the acceptance reply. */
export const CALL_VERSION = 1;
/**
 * A SenderError whose message starts with this, followed by JSON `{ code, message, retryable }`,
 * is the handler's failure: the stream's Finalized follows it and the call fails with it.
 */
export const CALL_FAILED_PREFIX = 'lanemux-call-failed ';

/** Codes of the errors a call itself raises (the stream's own errors keep their `StreamErrorCode`). */
export type CallErrorCode =
  /** The peer serves no method of that name (or stopped serving it). */
  | 'ERR_UNKNOWN_METHOD'
  /** The method already runs its most concurrent calls for this peer or for all peers (retryable). */
  | 'ERR_CALL_LIMIT'
  /** The encoded request is over the method's `maxRequestBytes` (or the link's message limit). */
  | 'ERR_REQUEST_TOO_LARGE'
  /** The request cannot be encoded, or the peer found the envelope malformed. */
  | 'ERR_INVALID_REQUEST'
  /** The handler threw something that is not a `LanemuxError`. */
  | 'ERR_HANDLER_FAILED';

/**
 * An error of a call (`node.stream`): its `code` is a {@link CallErrorCode}, or, when the handler
 * threw a `LanemuxError`, that error's own code.
 */
export class CallError extends LanemuxError<string> {
  /** The method called. */
  readonly method: string;
  constructor(code: CallErrorCode | (string & {}), method: string, message: string, options?: LanemuxErrorOptions) {
    super(code, message, options);
    this.method = method;
  }
}

/** The request body (MessagePack map): `h` the caller's anchor handle, `t` its ticket, `r` the request's MessagePack bytes. */
export interface CallRequest {
  readonly v: number;
  readonly h: string;
  readonly t?: string;
  readonly r: Uint8Array;
}

const CODE_RE = /^ERR_[A-Z0-9_]{1,60}$/;

/** The SenderError text of a handler's failure. */
export function encodeFailure(thrown: unknown): string {
  const lanemux = thrown instanceof LanemuxError;
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return `${CALL_FAILED_PREFIX}${JSON.stringify({
    code: lanemux && CODE_RE.test(thrown.code) ? thrown.code : 'ERR_HANDLER_FAILED',
    message: message.slice(0, 4096),
    retryable: lanemux ? thrown.retryable : false,
  })}`;
}

/** The CallError of a failure record, or null when `text` is not one (a plain `sender.error`). */
export function decodeFailure(text: string, method: string): CallError | null {
  if (!text.startsWith(CALL_FAILED_PREFIX)) return null;
  let o: { code?: unknown; message?: unknown; retryable?: unknown } = {};
  try {
    o = JSON.parse(text.slice(CALL_FAILED_PREFIX.length)) ?? {};
  } catch {
    // A malformed record still fails the call, with the generic code.
  }
  const code = typeof o.code === 'string' && CODE_RE.test(o.code) ? o.code : 'ERR_HANDLER_FAILED';
  const message = typeof o.message === 'string' ? o.message.slice(0, 4096) : 'the handler failed';
  return new CallError(code, method, `${method}: ${message}`, { retryable: o.retryable === true });
}
