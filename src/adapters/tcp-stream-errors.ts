/**
 * Errors of the per-stream (legacy) `tcp-stream` transport.
 *
 * A separate union from `TransportErrorCode` (`transport/errors.ts`): this path has no hello or GOAWAY, and its
 * connection-loss code must be one the stream layer already documents (`ERR_SENDER_DROPPED`),
 * because these errors surface unchanged through `StreamSender.send()` / `finalize()`.
 *
 * @packageDocumentation
 */
import { LanemuxError } from '../errors.ts';
import type { LanemuxErrorOptions } from '../errors.ts';

/** Stable codes of `tcp-stream` errors. */
export type TcpStreamErrorCode =
  /** A length prefix announced more than `maxFrameBytes` (consumer), or a body over it was written (producer). */
  | 'ERR_FRAME_TOO_LARGE'
  /** The byte stream does not form frames: it ended inside a frame, or the sink threw on a body. */
  | 'ERR_MALFORMED_FRAME'
  /** The 16-byte preface did not arrive in time, or the connection ended before it was complete. */
  | 'ERR_PREFACE'
  /** The consumer does not know (anchor, session): its accept callback returned null. */
  | 'ERR_REFUSED'
  /** The listener already holds `maxConnections` connections. */
  | 'ERR_TOO_MANY_CONNECTIONS'
  /** The connection was lost before a clean end (reset, peer closed early). Retryable. */
  | 'ERR_SENDER_DROPPED'
  /** Dialling failed: refused, unreachable or timed out. Retryable. */
  | 'ERR_CONNECT'
  /** Listening failed (address in use, permission, already listening). */
  | 'ERR_LISTEN'
  /** The endpoint is not `tcp-stream://host:port`. */
  | 'ERR_UNSUPPORTED_ADDRESS'
  /** An anchor or session id outside 0..2^64-1. */
  | 'ERR_INVALID_ARGUMENT'
  /** The caller's AbortSignal fired during the dial. */
  | 'ERR_ABORTED'
  /** The transport was closed, or the connection was destroyed locally. */
  | 'ERR_CLOSED'
  /** A large frame did not complete within its deadline, or the transport's memory for incomplete frames is full. */
  | 'ERR_FRAME_DEADLINE';

/** An error raised or reported by the `tcp-stream` transport. */
export class TcpStreamError extends LanemuxError<TcpStreamErrorCode> {
  constructor(code: TcpStreamErrorCode, message: string, options: LanemuxErrorOptions = {}) {
    super(code, message, options);
  }
}
