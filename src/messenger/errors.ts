/**
 * Errors of the messenger. Transport codes (`ERR_PEER_GONE`, `ERR_FRAME_TOO_LARGE`, …) come from
 * `../transport/errors.ts`; these are the messenger's own. A peer's error reply keeps the peer's code.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';
import type { LanemuxErrorOptions } from '../errors.ts';

/** Stable codes of messenger errors. */
export type MessengerErrorCode =
  /** No handler is registered under the name (sent back to the caller, or reported as a notice). */
  | 'ERR_UNKNOWN_HANDLER'
  /** A unary request got no answer within its timeout (retryable). */
  | 'ERR_TIMEOUT'
  /** The caller's AbortSignal fired. */
  | 'ERR_ABORTED'
  /** A health-check ping failed; the peer is reported gone with this code. */
  | 'ERR_HEALTH_CHECK_FAILED'
  /** A remote request handler threw something that is not a LanemuxError. */
  | 'ERR_HANDLER_FAILED'
  /** A handler name is reserved (`_stream_batch[.k]`) or already registered, or invalid. */
  | 'ERR_INVALID_HANDLER'
  /** An argument is out of range (lane, name length, timeout) or a body cannot be encoded. */
  | 'ERR_INVALID_ARGUMENT'
  /** Too many requests pending (caller side) or in flight (handler side); retry later. */
  | 'ERR_BUSY'
  /** The messenger is closed. */
  | 'ERR_CLOSED';

/** An error raised by the messenger. */
export class MessengerError extends LanemuxError<MessengerErrorCode> {
  constructor(code: MessengerErrorCode, message: string, options: LanemuxErrorOptions = {}) {
    super(code, message, options);
  }
}

/** An error reported by the peer (error reply or notice): `code` is the peer's. */
export class RemoteError extends LanemuxError<string> {
  /** The peer that reported it (worker id, hex). */
  readonly peer: string;

  constructor(peer: string, code: string, message: string, options: LanemuxErrorOptions = {}) {
    super(code, message, options);
    this.peer = peer;
  }
}
