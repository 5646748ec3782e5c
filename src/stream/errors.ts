import { LanemuxError } from '../errors.ts';
import type { LanemuxErrorOptions } from '../errors.ts';

/** Codes of errors a stream's consumer or producer sees. */
export type StreamErrorCode =
  /** The producer reported an error with `sender.error(message)`; the stream goes on. */
  | 'ERR_SENDER_ERROR'
  /** The producer went away without a terminal (peer gone, epoch death, watchdog). Terminal. */
  | 'ERR_SENDER_DROPPED'
  /** A protocol violation ended the stream. Terminal. */
  | 'ERR_TRANSPORT_ERROR'
  /** A record could not be decoded. Terminal. */
  | 'ERR_DESERIALIZATION'
  /** The handle string is not a lanemux anchor handle. */
  | 'ERR_INVALID_HANDLE'
  /** The ticket is malformed or incomplete, or was issued for another anchor than the handle names. */
  | 'ERR_INVALID_TICKET'
  /** The attach was refused (unknown anchor, already attached, no common transport, zero credit …). */
  | 'ERR_ATTACH_REFUSED'
  /** The anchor already has a sender. */
  | 'ERR_ALREADY_ATTACHED'
  /**
   * No connected peer owns the handle's worker id (and, with `createNode({ discovery })`, discovery
   * has no record of it, or its record's address reached another worker: retryable then).
   */
  | 'ERR_UNKNOWN_PEER'
  /** `send()` was called again and again without waiting while the stream was at its byte budget. */
  | 'ERR_BACKPRESSURE'
  /**
   * A live stream with `overrun: 'fail'` had more records waiting for credit than its `overrunLimit`:
   * it ended (the producer's sends reject with it, and a lanemux consumer's read does). Terminal.
   */
  | 'ERR_FEED_OVERRUN'
  /** The stream is closed for this operation (after finalize, detach, cancel or a peer close). */
  | 'ERR_STREAM_CLOSED'
  /** The consumer cancelled the stream. */
  | 'ERR_STREAM_CANCELLED'
  /** The anchor already has a push-mode consumer (`consume()`): an anchor has one reader. */
  | 'ERR_READER_ACTIVE'
  /** A push-mode consumer's `item` callback threw; the stream was cancelled (the thrown value is the `cause`). */
  | 'ERR_CONSUMER_THREW'
  /** The operation was aborted by its AbortSignal. */
  | 'ERR_ABORTED'
  /**
   * The node is draining (`node.drain()`, docs/protocol.md §8.4): it takes no new streams, or it
   * drained and ended this stream at its deadline. Retryable: open the stream on another node.
   */
  | 'ERR_DRAINING'
  /** The node is closed. */
  | 'ERR_CLOSED';

/** An error of a stream, with a stable code. */
export class StreamError extends LanemuxError<StreamErrorCode> {
  constructor(code: StreamErrorCode, message: string, options?: LanemuxErrorOptions) {
    super(code, message, options);
  }
}

/**
 * Why a stream could not be resumed after its link was lost (docs/protocol.md §8.3):
 * `window` — the link did not come back within the resume window; `evicted` — the items the
 * consumer still needed were no longer in the producer's replay ring; `restarted` — the peer came
 * back as another instance (a restart: its state is gone); `refused` — the peer does not know the
 * stream any more; `closed` — this node closed while the stream waited; `unsupported` — the stream
 * ran on the per-stream path (`tcp-stream`, docs/protocol.md §9), which never resumes: a node with
 * resume on ends such a stream whose connection was lost with this reason.
 */
export type ResumeFailure = 'window' | 'evicted' | 'restarted' | 'refused' | 'closed' | 'unsupported';

/**
 * A stream that lost its link and could not be resumed. Its `code` is the one a lost link gives
 * without resume (`ERR_SENDER_DROPPED` for the consumer, the producer's peer-lost code); `reason`
 * says why, for code that retries. Always retryable.
 */
export class ResumeFailedError extends StreamError {
  /** Why the resume failed. */
  readonly reason: ResumeFailure;
  constructor(code: StreamErrorCode, reason: ResumeFailure, message: string, options?: LanemuxErrorOptions) {
    super(code, message, { ...options, retryable: true });
    this.reason = reason;
  }
}
