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
