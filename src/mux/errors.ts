import { LanemuxError } from '../errors.ts';

/** Codes of mux and stream errors. */
export type MuxErrorCode =
  | 'ERR_SENDER_DROPPED'
  | 'ERR_SENDER_ERROR'
  | 'ERR_TRANSPORT_ERROR'
  | 'ERR_DESERIALIZATION'
  | 'ERR_EPOCH_DEATH'
  | 'ERR_SLOT_CLOSED'
  | 'ERR_PROTOCOL'
  | 'ERR_UNKNOWN_SLOT'
  | 'ERR_RECORD_TOO_LARGE'
  | 'ERR_TOO_MANY_SLOTS'
  | 'ERR_STREAM_CANCELLED'
  | 'ERR_STREAM_ENDED'
  | 'ERR_ABORTED'
  | 'ERR_CLOSED';

/** An error of the mux or of a stream. */
export class MuxError extends LanemuxError<MuxErrorCode> {}

/**
 * True when a link's loss says it was closed on purpose (by this node, or by the peer's GOAWAY:
 * `ERR_CLOSED`, or `ERR_PEER_GONE` caused by one): the peer's instance is not coming back, so no
 * stream waits for a resume (docs/protocol.md §8.3). Looks through `cause`s.
 */
export function closedOnPurpose(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof LanemuxError && depth < 4; e = e.cause, depth++) {
    if (e.code === 'ERR_CLOSED') return true;
    if (e.code !== 'ERR_PEER_GONE' && e.code !== 'ERR_SENDER_DROPPED') return false;
  }
  return false;
}
